"""Each packet's connection, as ``ibwire qp`` numbers them, for a streamed export.

``ibwire qp`` joins streams (packets of one kind going one way to one QP) into connections
(``ibwire.analysis.connections``) and settles some only at the end of the capture. An export
writes rows as it goes, so it first runs the analysis over the capture (a scan of a few
columns), keeping which connection each stream ended in; then, while it writes, it gives each
row the connection of its stream. Memory grows with streams, not packets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ibwire.analysis import Analysis, batches, report
from ibwire.analysis.cnp_check import CnpCheck
from ibwire.analysis.connections import Connections, stream_keys, streams_of
from ibwire.pcap.source import Source


@dataclass
class Labels:
    """Stream key -> connection number (the row of ``ibwire qp``), and the analysis."""

    streams: dict[tuple[int, ...], int]
    analysis: Analysis

    def of(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        """The connection of every row of a batch's columns (-1: none)."""
        out = np.full(len(cols["record"]), -1, np.int64)
        keyed = stream_keys(cols)
        if keyed is None:
            return out
        rows, columns = keyed
        first, members_of = streams_of(columns)
        for s, members in zip(first.tolist(), members_of, strict=True):
            key = tuple(int(c[s]) for c in columns)
            out[rows[members]] = self.streams.get(key, -1)
        return out


def label(source: Source, *, pmtu: int | None = None, cnp_scope: str = "qp",
          cnp_interval_us: float = 4.0, threads: int = 2) -> Labels:
    """Analyse ``source`` as ``ibwire.analysis.analyse`` does, keeping the stream keys;
    ``threads`` as for ``scan_capture``."""
    conns = Connections(pmtu, True)
    check = CnpCheck(cnp_scope, round(cnp_interval_us * 1000))
    records = 0
    for batch in batches(source, threads=threads):
        records += len(batch)
        conns.cm.feed(batch)
        check.feed(conns.feed(batch.columns))
    check.finish()
    conns.finish()
    kept = conns.list
    number = {id(c): i for i, c in enumerate(kept)}
    streams: dict[tuple[int, ...], int] = {}
    for key, c in conns.stream_connections():
        if id(c) in number:
            streams[key] = number[id(c)]
    return Labels(streams, Analysis([report(c) for c in kept], records))

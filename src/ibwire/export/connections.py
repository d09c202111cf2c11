"""Each packet's connection, as ``ibwire qp`` numbers them, for a streamed export.

``ibwire qp`` joins streams (packets of one kind going one way to one QP) into connections
(``ibwire.analysis.connections``), numbered in the order they are first seen. An export runs
that analysis over the batches it writes (:class:`Labeller`): each row gets the number its
stream's connection has when the row is read. The end of a capture settles what needs all of
it, and may fold one connection into another, which renumbers those after it; only then
(``Labeller.finish`` says so) are the rows written again, with the numbers now known
(:class:`Labels`: each stream's connection at the end). Memory grows with streams, not
packets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ibwire.analysis import SCAN_FIELDS, WINDOW, Analysis, batches, report
from ibwire.analysis.cnp_check import CnpCheck
from ibwire.analysis.connections import Connections, stream_keys, streams_of
from ibwire.pcap.source import Source


@dataclass
class Labels:
    """Stream key -> connection number (the row of ``ibwire qp``), and the analysis."""

    streams: dict[tuple[int, ...], int]
    analysis: Analysis | None  # None: numbers only (``Labeller(observe=False)``)
    #: Scanner columns ``of`` needs besides the export's (its ``scan_fields`` has them),
    #: and the window its batches are cut by (any: the numbers do not depend on it).
    fields = ()
    window: ClassVar[int | None] = None

    def of(self, batch: Any) -> np.ndarray:
        """The connection of every row of a scanned batch (-1: none)."""
        cols = batch.columns
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


class Labeller:
    """The analysis of ``ibwire.analysis.analyse``, fed the batches of an export as they are
    read: ``of`` numbers each row's connection as the capture so far has it; ``finish``
    ends the analysis, makes ``labels`` and says whether every number given stands. Without
    ``observe``, only the numbers (the same) are made, not ``ibwire qp``'s table: the
    connections' observers run only where the joining of streams needs them
    (``Connections(observe=False)``)."""

    #: Scanner columns ``of`` needs: the analysis's. Its batches must be cut as the
    #: analysis cuts them (``ibwire.analysis.WINDOW``), so that it pairs streams alike.
    fields = SCAN_FIELDS
    window = WINDOW

    def __init__(self, *, pmtu: int | None = None, cnp_scope: str = "qp",
                 cnp_interval_us: float = 4.0, observe: bool = True) -> None:
        self.conns = Connections(pmtu, observe=observe)
        self.check = CnpCheck(cnp_scope, round(cnp_interval_us * 1000)) if observe else None
        self.records = 0
        self.labels: Labels | None = None

    def of(self, batch: Any) -> np.ndarray:
        """Feed the next batch; the connection of each of its rows so far (-1: none)."""
        self.records += len(batch)
        self.conns.cm.feed(batch)
        numbers = np.full(len(batch), -1, np.int64)
        parts = self.conns.feed(batch.columns, numbers)
        if self.check is not None:
            self.check.feed(parts)
        return numbers

    def finish(self) -> bool:
        """End the analysis (``labels``); True if every number ``of`` gave is final."""
        if self.check is not None:
            self.check.finish()
        self.conns.finish()
        kept = self.conns.list
        number = {id(c): i for i, c in enumerate(kept)}
        streams: dict[tuple[int, ...], int] = {}
        settled = True
        for key, c, first in self.conns.stream_connections():
            final = number.get(id(c), -1)
            if final >= 0:
                streams[key] = final
            settled = settled and final == first
        analysis = (Analysis([report(c) for c in kept], self.records)
                    if self.check is not None else None)
        self.labels = Labels(streams, analysis)
        return settled


def label(source: Source, *, pmtu: int | None = None, cnp_scope: str = "qp",
          cnp_interval_us: float = 4.0, threads: int = 2, observe: bool = True) -> Labels:
    """Analyse ``source`` as ``ibwire.analysis.analyse`` does, keeping the stream keys;
    ``threads`` as for ``scan_capture``; ``observe`` as for :class:`Labeller`."""
    labeller = Labeller(pmtu=pmtu, cnp_scope=cnp_scope, cnp_interval_us=cnp_interval_us,
                        observe=observe)
    for batch in batches(source, threads=threads):
        labeller.of(batch)
    labeller.finish()
    assert labeller.labels is not None
    return labeller.labels

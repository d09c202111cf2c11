"""Queue-pair analysis: every connection of a capture, its PSN story, latencies and findings.

Runs the transport rules of :mod:`ibwire.transport.observed` backward over the batch
scanner's columns: rows are grouped into connections batch by batch
(:mod:`ibwire.analysis.connections`) and each connection's rows go through its observer's
one loop (compiled, or its pure-Python twin), so memory grows with connections, not
packets. The counting definitions are those of the generation manifest
(:mod:`ibwire.gen`), which counts with the same observer.

    from ibwire.analysis import analyse
    result = analyse("trace.pcap", cnp_scope="ip-pair", cnp_interval_us=4)
    for qp in result.connections:      # QpReport objects; .as_dict() for the JSON keys
        print(qp.requester, qp.data_packets, qp.retransmitted_packets, qp.findings)
    table = result.to_arrow()          # one row per connection (needs pyarrow)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields, make_dataclass
from typing import Any

import numpy as np

from ibwire.analysis.addresses import FIELDS as ADDRESS_FIELDS
from ibwire.analysis.cm import FIELDS as CM_FIELDS
from ibwire.analysis.cnp_check import CnpCheck
from ibwire.analysis.connections import FIELDS as CONNECTION_FIELDS
from ibwire.analysis.connections import Connection, Connections
from ibwire.pcap.source import Source
from ibwire.transport.observed import COUNTERS, LATENCIES, RATES, STALL_NS, STALLS

#: Bytes of capture scanned per batch: bigger than the scanner's default, as the analysis
#: pays a few numpy calls per connection per batch (memory stays flat: about three windows,
#: the next one is scanned while this one is analysed; batches hold 65536 rows at most).
WINDOW = 48 << 20
#: Scanner columns the analysis extracts.
SCAN_FIELDS = (*CONNECTION_FIELDS, *ADDRESS_FIELDS, *CM_FIELDS)
#: The keys of one connection's result, in output order.
KEYS = ("requester", "responder", "transport", *COUNTERS, "cm_packets", "cut_packets", "first_ns",
        "last_ns", *RATES, "ack_rtt_ns", *LATENCIES, "rnr_wait_ns",
        *STALLS, "pmtu", "cm", "findings")

QpReport = make_dataclass(
    "QpReport", [(k, Any) for k in KEYS],
    namespace={"as_dict": lambda self: {f.name: getattr(self, f.name) for f in fields(self)},
               "__doc__": "One connection's result; attributes are the JSON keys (docs/reference/qp-findings.md)."})


@dataclass
class Analysis:
    """The connections of a capture, in the order they were first seen."""

    connections: list[Any]
    records: int = 0
    traces: dict[int, list[dict[str, np.ndarray]]] = field(default_factory=dict)

    def as_dicts(self) -> list[dict[str, Any]]:
        return [c.as_dict() for c in self.connections]

    def to_arrow(self) -> Any:
        """One row per connection as a ``pyarrow.Table`` (the ``arrow`` extra)."""
        try:
            import pyarrow as pa
        except ImportError as exc:
            raise ImportError("to_arrow() needs pyarrow: pip install 'ibwire[arrow]'") from exc
        return pa.Table.from_pylist(self.as_dicts())


def report(c: Connection) -> Any:
    o = c.observed
    result = o.result()
    return QpReport(**c.identity(), **{k: result[k] for k in KEYS if k in result},
                    pmtu=o.fixed_pmtu or o.pmtu_seen or None)


def batches(source: Source, count: int | None = None, threads: int = 2,
            fields: tuple[str, ...] = SCAN_FIELDS) -> Iterator[Any]:
    """The scanner's batches for the analysis (``fields``' columns and frames), at most
    ``count`` records; ``threads`` as for ``scan_capture``."""
    from dataclasses import replace

    from ibwire.scan import scan_capture

    left = count
    for batch in scan_capture(source, fields=fields, window=WINDOW, threads=threads):
        if left is not None:
            if left <= 0:
                break
            if len(batch) > left:
                batch = replace(batch, columns={k: v[:left] for k, v in batch.columns.items()})
            left -= len(batch)
        yield batch


def analyse(source: Source, *, pmtu: int | None = None, cnp_scope: str = "qp",
            cnp_interval_us: float = 4.0, count: int | None = None,
            trace: bool = False, stall_ms: float = STALL_NS / 1e6) -> Analysis:
    """Analyse a capture (path, '-' or binary file object). ``pmtu`` sizes READ requests'
    PSN ranges (default: learnt per connection from FIRST/MIDDLE payloads);
    ``cnp_scope`` and ``cnp_interval_us`` are the pacing the CNP check expects; ``trace``
    keeps every connection's rows for plots (memory then grows with packets); a connection
    with no packet (CNPs aside) for more than ``stall_ms`` stalls."""
    conns = Connections(pmtu, stall_ns=round(stall_ms * 1e6))
    check = CnpCheck(cnp_scope, round(cnp_interval_us * 1000))
    traces: dict[int, list[dict[str, np.ndarray]]] = {}
    records = 0
    for batch in batches(source, count):
        cols = batch.columns
        records += len(cols["record"])
        conns.cm.feed(batch)
        parts = conns.feed(cols)
        check.feed(parts)
        if trace:
            for c, rows in parts:
                traces.setdefault(c.index, []).append({k: np.array(v) for k, v in rows.items()})
    check.finish()
    conns.finish()
    return Analysis([report(c) for c in conns.list], records, traces)


__all__ = ["KEYS", "SCAN_FIELDS", "Analysis", "QpReport", "analyse"]

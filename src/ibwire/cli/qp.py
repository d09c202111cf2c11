"""``ibwire qp FILE``: one row per connection (queue pair direction): packets first sent and
resent, gaps, messages, bytes, NAKs, CNPs, ACK round trip, findings; ``--json`` one object
per connection (the keys are in README), ``--csv``, ``--plot DIR`` PSN/throughput plots.

Exit status 1 when some connection has findings (a check failed), as ``ibwire check``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ibwire.transport.cnp import SCOPES

#: Table columns: (title, value of a result dict, priority: lower ones go first when narrow).
_COLUMNS: tuple[tuple[str, Any, int], ...] = (
    ("#", lambda i, d: str(i), 0),
    ("requester", lambda i, d: _end(d["requester"]), 0),
    ("responder", lambda i, d: _end(d["responder"]), 0),
    ("tr", lambda i, d: d["transport"], 1),
    ("data", lambda i, d: str(d["data_packets"]), 0),
    ("retx", lambda i, d: str(d["retransmitted_packets"]), 0),
    ("nak/to/rnr", lambda i, d: f"{d['nak_retransmissions']}/{d['timeout_retransmissions']}/"
                                f"{d['rnr_retransmissions']}", 3),
    ("dup", lambda i, d: str(d["duplicates"]), 4),
    ("gaps", lambda i, d: str(d["psn_gaps"]), 2),
    ("msgs", lambda i, d: f"{d['messages_completed']}/{d['messages']}", 1),
    ("bytes", lambda i, d: _size(d["data_bytes"]), 1),
    ("naks", lambda i, d: str(d["naks_psn_seq_error"] + d["rnr_naks"] + d["naks_other"]), 2),
    ("cnps", lambda i, d: str(d["cnps"]), 2),
    ("ce", lambda i, d: str(d["ecn_ce_packets"]), 4),
    ("rtt us", lambda i, d: _us(d["ack_rtt_ns"]["avg"]), 3),
    ("find", lambda i, d: str(len(d["findings"])), 0),
)


def _end(side: dict[str, Any]) -> str:
    qpn = side["qpn"]
    return f"{side['address']}/{'?' if qpn is None else f'0x{qpn:x}'}"


def _size(n: int) -> str:
    for unit in ("", "K", "M", "G"):
        if n < 10000:
            return f"{n}{unit}"
        n //= 1000
    return f"{n}T"


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.1f}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE",
                        help="capture file (pcap, pcapng, ERF, gzip) or - for stdin")
    parser.add_argument("-c", "--count", type=int, default=None, metavar="N",
                        help="stop after N records")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object per connection")
    out.add_argument("--csv", action="store_true", help="one CSV row per connection")
    parser.add_argument("--plot", metavar="DIR", default=None,
                        help="write PSN/time and throughput plots per connection (PNG) into DIR "
                        "(needs the 'plot' extra: matplotlib)")
    parser.add_argument("--svg", action="store_true", help="with --plot: SVG files too")
    parser.add_argument("--pmtu", type=int, default=None, metavar="BYTES",
                        help="path MTU for READ PSN ranges (default: learnt from the traffic)")
    parser.add_argument("--cnp-scope", choices=SCOPES, default="qp",
                        help="CNP pacing scope the check expects (default qp)")
    parser.add_argument("--cnp-interval-us", type=float, default=4.0, metavar="US",
                        help="minimum time between CNPs of one scope (default 4)")


#: Keys of a connection's ``cm`` object (CSV columns ``cm.<key>``; empty without CM).
CM_KEYS = ("service_id", "local_comm_id", "remote_comm_id", "state", "reason")


def _flat(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k == "cm" and v is None:
            continue
        if isinstance(v, dict):
            out.update({f"{k}.{sub}": x for sub, x in v.items()})
        elif isinstance(v, list):
            out[k] = " ".join(f"{f['kind']}:{','.join(map(str, f['records']))}"
                              if isinstance(f, dict) else str(f) for f in v)
        else:
            out[k] = v
    return out


def csv_columns() -> list[str]:
    """The columns of ``--csv``, in order: each key of a connection, nested objects
    flattened to ``key.sub``."""
    from ibwire.analysis import KEYS

    return list(_flat({k: ({"min": 0, "avg": 0, "max": 0} if k == "ack_rtt_ns" else
                           {"address": 0, "qpn": 0} if k in ("requester", "responder")
                           else dict.fromkeys(CM_KEYS, 0) if k == "cm" else 0)
                       for k in KEYS}))


def table(results: list[dict[str, Any]], width: int) -> list[str]:
    """The rows as text lines no wider than ``width`` (columns of low priority left out)."""
    cells = [[get(i, d) for _, get, _ in _COLUMNS] for i, d in enumerate(results)]
    keep = list(range(len(_COLUMNS)))

    def widths() -> list[int]:
        return [max([len(_COLUMNS[c][0])] + [len(row[c]) for row in cells]) for c in keep]

    while sum(widths()) + 2 * (len(keep) - 1) > width:
        droppable = [c for c in keep if _COLUMNS[c][2] > 0]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda c: (_COLUMNS[c][2], c)))
    w = widths()
    lines = ["  ".join(_COLUMNS[c][0].ljust(x) for c, x in zip(keep, w, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(row[c].rjust(x) if k > 2 else row[c].ljust(x)
                               for k, (c, x) in enumerate(zip(keep, w, strict=True))).rstrip())
    return [line[:width] for line in lines]


def run(args: argparse.Namespace) -> int:
    from ibwire.analysis import analyse
    from ibwire.cli.common import json_line

    if args.svg and not args.plot:
        print("ibwire qp: --svg goes with --plot DIR", file=sys.stderr)
        return 2
    if args.plot:
        from ibwire.analysis.plot import _matplotlib

        _matplotlib()  # say it is missing before reading the capture
    result = analyse(args.file, pmtu=args.pmtu, cnp_scope=args.cnp_scope,
                     cnp_interval_us=args.cnp_interval_us, count=args.count,
                     trace=bool(args.plot))
    dicts = result.as_dicts()
    out = sys.stdout
    if args.json:
        for d in dicts:
            out.write(json_line(d))
    elif args.csv:
        import csv

        flat = [_flat(d) for d in dicts]
        writer = csv.DictWriter(out, csv_columns(), restval="", lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
    else:
        from ibwire.cli.main import terminal_columns

        for line in table(dicts, terminal_columns()):
            print(line, file=out)
        for i, d in enumerate(dicts):
            for f in d["findings"]:
                records = ", ".join(str(r + 1) for r in f["records"][:8])
                more = " ..." if len(f["records"]) > 8 else ""
                print(f"#{i} {f['kind']}: {f['detail']} (records {records}{more})", file=out)
        cut = [(i, d["cut_packets"]) for i, d in enumerate(dicts) if d["cut_packets"]]
        if cut:
            which = ", ".join(f"#{i} {n}" for i, n in cut)
            print(f"packets cut by the capture (snap length: headers only): {which}; counted "
                  f"whole from their length fields, their CRCs and payloads not checked",
                  file=out)
        print(f"{len(dicts)} connections in {result.records} records", file=out)
    if args.plot:
        from ibwire.analysis.plot import plot_analysis

        for path in plot_analysis(result, args.plot, args.svg):
            print(f"wrote {path}", file=sys.stderr)
    return 1 if any(d["findings"] for d in dicts) else 0

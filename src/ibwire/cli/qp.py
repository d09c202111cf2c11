"""``ibwire qp FILE``: one row per connection (queue pair direction): packets first sent and
resent, gaps, messages, bytes, NAKs, CNPs, ACK round trip, findings; ``--json`` one object
per connection (the keys are in docs/reference/qp-findings.md), ``--csv``, ``--plot DIR`` figures
(:mod:`ibwire.analysis.plot`).

Exit status 1 when some connection has findings (a check failed), as ``ibwire check``.
``--manifest M.json``: the verdict instead, one line per injected fault
(:mod:`ibwire.analysis.verdict`); exit status 1 when an endpoint broke a rule.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ibwire.transport.cnp import SCOPES
from ibwire.transport.observed import STALL_NS

#: Table columns: (title, value of a result dict, priority: when the table is too wide for
#: the terminal, the highest go first, after the addresses are shortened; 0 always stays).
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
    ("rdretx", lambda i, d: str(d["read_responses_resent"]), 2),
    ("good%", lambda i, d: _share(d["data_bytes"], d["payload_bytes"]), 3),
    ("naks", lambda i, d: str(d["naks_psn_seq_error"] + d["rnr_naks"] + d["naks_other"]), 2),
    ("cnps", lambda i, d: str(d["cnps"]), 2),
    ("ce", lambda i, d: str(d["ecn_ce_packets"]), 4),
    ("rtt us", lambda i, d: _us(d["ack_rtt_ns"]["avg"]), 3),
    ("stall ms", lambda i, d: f"{d['stall_ns'] / 1e6:.1f}", 2),
    ("cm", lambda i, d: "-" if d["cm"] is None else d["cm"]["state"], 3),
    ("find", lambda i, d: str(len(d["findings"])), 0),
)


#: The name of each column for ``--columns`` (its title, without the unit).
NAMES = {title.split()[0]: c for c, (title, _, _) in enumerate(_COLUMNS)}
#: Addresses (IPv6 addresses, GIDs) longer than this are shortened to fit a narrow terminal.
SHORT_ADDRESS = 16


def _end(side: dict[str, Any]) -> str:
    qpn = side["qpn"]
    return f"{side['address']}/{'?' if qpn is None else f'0x{qpn:x}'}"


def _shorten(end: str) -> str:
    """``address/qpn`` with a long address cut to its last characters after "…"."""
    address, _, qpn = end.rpartition("/")
    if len(address) <= SHORT_ADDRESS:
        return end
    return f"…{address[-(SHORT_ADDRESS - 1):]}/{qpn}"


def _size(n: int) -> str:
    for unit in ("", "K", "M", "G"):
        if n < 10000:
            return f"{n}{unit}"
        n //= 1000
    return f"{n}T"


def _share(part: int, whole: int) -> str:
    """``part`` in percent of ``whole`` (goodput of throughput), "-" of nothing."""
    return "-" if not whole else f"{100 * part / whole:.0f}"


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
                        help="write a figure per connection (PSN over time, retransmissions, "
                        "ACK line, NAK/CNP marks, throughput, latencies, the worst recoveries "
                        "zoomed) and index.html into DIR (needs the 'plot' extra)")
    parser.add_argument("--plot-format", metavar="F[,F]", default=None,
                        help="with --plot: png (default), svg, html (interactive: zoom, pan), "
                        "comma-separated")
    parser.add_argument("--svg", action="store_true", help="with --plot: SVG files too "
                        "(as --plot-format png,svg)")
    parser.add_argument("--plot-window", metavar="T0:T1", default=None,
                        help="with --plot: draw only this span, from each connection's first "
                        "packet: seconds (0.5:1.5) or with a unit (10ms:20ms, 300us:)")
    parser.add_argument("--pmtu", type=int, default=None, metavar="BYTES",
                        help="path MTU for READ PSN ranges (default: learnt from the traffic)")
    parser.add_argument("--cnp-scope", choices=SCOPES, default="qp",
                        help="CNP pacing scope the check expects (default qp)")
    parser.add_argument("--cnp-interval-us", type=float, default=4.0, metavar="US",
                        help="minimum time between CNPs of one scope (default 4)")
    parser.add_argument("--stall-ms", type=float, default=STALL_NS / 1e6, metavar="MS",
                        help="a connection with no packet (CNPs aside) for longer stalls "
                        f"(default {STALL_NS / 1e6:g}): stalls, stall_ns, longest_stalls")
    parser.add_argument("--wide", action="store_true",
                        help="the table with every column and whole addresses, however wide "
                        "(else it fits the terminal, saying what it left out)")
    parser.add_argument("--manifest", metavar="M.json", default=None,
                        help="judge each fault of this manifest (ibwire gen's or ibwire "
                        "impair's): one line per fault, pass/fail/not-seen/not-applicable/"
                        "not-implemented with the rule and the records that show it (--json: "
                        "one object per fault); exit 1 when an endpoint broke a rule")
    parser.add_argument("--columns", metavar="A,B,...", default=None,
                        help="the table's columns, in this order, of: "
                        + ", ".join(NAMES).replace("%", "%%"))


#: Keys of a connection's ``cm`` object (CSV columns ``cm.<key>``; empty without CM).
CM_KEYS = ("service_id", "local_comm_id", "remote_comm_id", "state", "reason")


def _flat(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k == "cm" and v is None:
            continue
        if isinstance(v, dict):
            out.update({f"{k}.{sub}": x for sub, x in v.items()})
        elif k == "longest_stalls" and isinstance(v, list):
            out[k] = " ".join(f"{s['start_ns']}:{s['duration_ns']}:{s['cause'] or ''}"
                              for s in v)
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


def columns_of(text: str) -> list[int]:
    """The columns ``--columns a,b,c`` names, in its order; ValueError naming the known
    ones for another name."""
    picked = []
    for name in (n.strip() for n in text.split(",")):
        if name not in NAMES:
            raise ValueError(f"no column {name!r}; the columns are {', '.join(NAMES)}")
        picked.append(NAMES[name])
    return picked


def table(results: list[dict[str, Any]], width: int | None,
          columns: list[int] | None = None) -> list[str]:
    """The rows as text lines: ``columns`` (default all) no wider than ``width`` (None: as
    wide as they are). To fit, the long addresses are shortened first, then the columns of
    least priority left out; a last line then says so, naming them (none is left out
    silently). Rows that still do not fit are not cut."""
    keep = list(range(len(_COLUMNS))) if columns is None else list(columns)
    cells = [[get(i, d) for _, get, _ in _COLUMNS] for i, d in enumerate(results)]

    def widths() -> list[int]:
        return [max([len(_COLUMNS[c][0])] + [len(row[c]) for row in cells]) for c in keep]

    def too_wide() -> bool:
        return width is not None and sum(widths()) + 2 * (len(keep) - 1) > width

    shortened = False
    if too_wide():
        ends = [NAMES["requester"], NAMES["responder"]]
        short = [[_shorten(cell) if c in ends else cell for c, cell in enumerate(row)]
                 for row in cells]
        shortened, cells = short != cells, short
    left_out = []
    while too_wide():
        droppable = [c for c in keep if _COLUMNS[c][2] > 0]
        if not droppable:
            break
        dropped = max(droppable, key=lambda c: (_COLUMNS[c][2], c))
        keep.remove(dropped)
        left_out.append(dropped)
    w = widths()
    lines = ["  ".join(_COLUMNS[c][0].ljust(x) for c, x in zip(keep, w, strict=True)).rstrip()]
    for row in cells:
        lines.append("  ".join(row[c].rjust(x) if c > NAMES["responder"] else row[c].ljust(x)
                               for c, x in zip(keep, w, strict=True)).rstrip())
    said = []
    if left_out:
        said.append("left out " + ", ".join(_COLUMNS[c][0].split()[0] for c in sorted(left_out)))
    if shortened:
        said.append("addresses shortened")
    if said:
        lines.append(f"(to fit {width} columns: {'; '.join(said)}; --wide shows all, "
                     f"--columns picks)")
    return lines


def cm_lines(dicts: list[dict[str, Any]]) -> list[str]:
    """The CM sessions of the connections (the table's ``cm`` column has their state): one
    line per service ID, the connections with their states (a rejection's reason)."""
    by_service: dict[int | None, list[str]] = {}
    for i, d in enumerate(dicts):
        cm = d["cm"]
        if cm is not None:
            state = cm["state"] + (f" ({cm['reason']})" if cm.get("reason") else "")
            by_service.setdefault(cm["service_id"], []).append(f"#{i} {state}")
    return [f"CM service ID {'?' if sid is None else f'0x{sid:016x}'}: {', '.join(states)}"
            for sid, states in by_service.items()]


#: Records a findings line lists of its kind, at most (``--json`` has them all).
FIRST_RECORDS = 8


def finding_lines(dicts: list[dict[str, Any]]) -> list[str]:
    """The findings, one line per connection and kind: a kind found once says what was
    found; a kind found more often how often (the packets or events its findings count),
    with the first records of them."""
    lines, summarised = [], False
    for i, d in enumerate(dicts):
        kinds: dict[str, list[dict[str, Any]]] = {}
        for f in d["findings"]:
            kinds.setdefault(f["kind"], []).append(f)
        for kind, found in kinds.items():
            records = list(dict.fromkeys(r for f in found for r in f["records"]))
            shown = ", ".join(map(str, records[:FIRST_RECORDS]))
            more = " ..." if len(records) > FIRST_RECORDS else ""
            what = found[0]["detail"] if len(found) == 1 else str(sum(f["count"] for f in found))
            lines.append(f"#{i} {kind}: {what} (records {shown}{more})")
            summarised |= len(found) > 1 or bool(more)
    if summarised:
        lines.append("(qp --json lists every finding)")
    return lines


def run_verdict(args: argparse.Namespace) -> int:
    """``qp --manifest``: the verdict on each fault (:mod:`ibwire.analysis.verdict`)."""
    from ibwire.analysis.verdict import judge
    from ibwire.cli.common import json_line

    for option in ("csv", "plot", "columns"):
        if getattr(args, option):
            print(f"ibwire qp: --{option} does not go with --manifest", file=sys.stderr)
            return 2
    verdict = judge(args.file, args.manifest, count=args.count)
    if args.json:
        for d in verdict.as_dicts():
            sys.stdout.write(json_line(d))
    else:
        for line in verdict.lines():
            print(line)
    return 1 if verdict.broken else 0


def run(args: argparse.Namespace) -> int:
    from ibwire.analysis import analyse
    from ibwire.cli.common import json_line

    if args.manifest is not None:
        return run_verdict(args)

    for option in ("svg", "plot_format", "plot_window"):
        if getattr(args, option) and not args.plot:
            print(f"ibwire qp: --{option.replace('_', '-')} goes with --plot DIR",
                  file=sys.stderr)
            return 2
    formats: list[str] = []
    window = None
    if args.plot:
        from ibwire.analysis.plot import FORMATS
        from ibwire.analysis.plot.units import parse_window

        formats = [f.strip().lower() for f in (args.plot_format or "png").split(",")]
        formats += ["svg"] if args.svg and "svg" not in formats else []
        unknown = [f for f in formats if f not in FORMATS]
        if unknown:
            print(f"ibwire qp: --plot-format: no format {', '.join(unknown)}; the formats are "
                  f"{', '.join(FORMATS)}", file=sys.stderr)
            return 2
        if args.plot_window:
            try:
                window = parse_window(args.plot_window)
            except ValueError as exc:
                print(f"ibwire qp: --plot-window: {exc}", file=sys.stderr)
                return 2
    if not args.stall_ms >= 0:  # (NaN too)
        print(f"ibwire qp: --stall-ms {args.stall_ms:g}: not a time (0 or more ms)",
              file=sys.stderr)
        return 2
    columns = None
    if args.columns is not None:
        try:
            columns = columns_of(args.columns)
        except ValueError as exc:
            print(f"ibwire qp: --columns: {exc}", file=sys.stderr)
            return 2
    if args.plot:
        from ibwire.analysis.plot import require

        require(formats)  # say it is missing before reading the capture
    result = analyse(args.file, pmtu=args.pmtu, cnp_scope=args.cnp_scope,
                     cnp_interval_us=args.cnp_interval_us, count=args.count,
                     trace=bool(args.plot), stall_ms=args.stall_ms)
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

        for line in table(dicts, None if args.wide else terminal_columns(), columns):
            print(line, file=out)
        for line in (*cm_lines(dicts), *finding_lines(dicts)):
            print(line, file=out)
        cut = [(i, d["cut_packets"]) for i, d in enumerate(dicts) if d["cut_packets"]]
        if cut:
            which = ", ".join(f"#{i} {n}" for i, n in cut)
            print(f"packets cut by the capture (snap length: headers only): {which}; counted "
                  f"whole from their length fields, their CRCs and payloads not checked",
                  file=out)
        print(f"{len(dicts)} connections in {result.records} records", file=out)
    if args.plot:
        from ibwire.analysis.plot import plot_analysis

        for path in plot_analysis(result, args.plot, formats, window):
            print(f"wrote {path}", file=sys.stderr)
    return 1 if any(d["findings"] for d in dicts) else 0

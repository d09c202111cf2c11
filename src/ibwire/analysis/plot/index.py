"""``index.html`` of a plot directory: the connections, most trouble first (retransmitted
packets, then time in stalls, then packets), each with its numbers and links to its figures."""

from __future__ import annotations

import html
from typing import Any

from ibwire.analysis.plot.series import MIN_STALL, STALL_FACTOR, Series, describe
from ibwire.analysis.plot.units import duration_text, utc_text

_STYLE = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
          "td,th{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:right}"
          "td.l,th.l{text-align:left}tr.trouble{background:#fff3e6}")
COLUMNS = ("#", "requester", "responder", "tr", "first packet (UTC)", "span", "packets",
           "retransmitted", "nak/timeout/rnr", "stalls", "stall time", "longest stall",
           "figures")


def ranked(listed: list[tuple[int, Any, Series, list[str]]]
           ) -> list[tuple[int, Any, Series, list[str]]]:
    """``listed`` most trouble first: retransmissions, stall time, packets."""
    def trouble(item: tuple[int, Any, Series, list[str]]) -> tuple[int, int, int, int]:
        d = describe(item[2])
        return (-d["retransmissions"], -d["stall_ns"], -d["packets"], item[0])

    return sorted(listed, key=trouble)


def write_index(path: str, listed: list[tuple[int, Any, Series, list[str]]]) -> str:
    """Write the index of ``listed`` (connection number, report, series, figure files)."""
    from ibwire.analysis.plot import write_atomically

    def end(side: dict[str, Any]) -> str:
        qpn = side["qpn"]
        return f"{side['address']}/{'?' if qpn is None else f'0x{qpn:x}'}"

    lines = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
             "<title>ibwire qp plots</title>", f"<style>{_STYLE}</style></head><body>",
             "<h1>Connections, most trouble first</h1>", "<table><tr>" +
             "".join(f"<th class='{'l' if c in ('requester', 'responder', 'figures') else ''}'>"
                     f"{c}</th>" for c in COLUMNS) + "</tr>"]
    for index, report, s, files in ranked(listed):
        d = describe(s)
        cells = [str(index), end(report.requester), end(report.responder), report.transport,
                 utc_text(s.t0), duration_text(d["span_ns"]), f"{d['packets']:,}",
                 f"{d['retransmissions']:,}",
                 f"{report.nak_retransmissions}/{report.timeout_retransmissions}/"
                 f"{report.rnr_retransmissions}", str(len(s.stalls)),
                 duration_text(d["stall_ns"]), duration_text(d["longest_stall_ns"])]
        row = "".join(f"<td class='{'l' if i in (1, 2) else ''}'>{html.escape(c)}</td>"
                      for i, c in enumerate(cells))
        links = " ".join(f"<a href='{html.escape(f)}'>{html.escape(f.rsplit('.', 1)[1])}</a>"
                         for f in files)
        trouble = " class='trouble'" if d["retransmissions"] or s.stalls else ""
        lines.append(f"<tr{trouble}>{row}<td class='l'>{links}</td></tr>")
    lines += ["</table>", f"<p>Stalls: gaps between packets of a connection over "
              f"{STALL_FACTOR} times its median gap and {duration_text(MIN_STALL)}. "
              "nak/timeout/rnr: retransmitted packets by the cause of their round.</p>",
              "</body></html>"]
    text = "\n".join(lines) + "\n"

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    write_atomically(path, write)
    return path

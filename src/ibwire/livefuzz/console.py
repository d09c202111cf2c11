"""Reading a kernel's console for the signs of a bug: warnings, BUGs, oopses, refcount
saturation, general protection faults, lockups, hung tasks, sanitizer reports.

:func:`scan` takes console text and returns one :class:`Sign` per report, with a signature
that names the kind and where the kernel says it happened (``file:line`` of a ``WARNING: ...
at`` line, else the function of the first ``RIP:``/``Call Trace`` frame), so that the same
bug met twice is one finding. Patterns follow the lines Linux prints (kernel/panic.c
``__warn``, lib/refcount.c, arch/x86/kernel/traps.c, kernel/watchdog.c, kernel/hung_task.c).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(text)) for kind, text in (
        ("warning", r"WARNING: (?:CPU: \d+ PID: \d+ )?at "),
        ("bug", r"\bBUG: |kernel BUG at "),
        ("oops", r"\bOops\b"),
        ("refcount", r"refcount_t: "),
        ("general-protection", r"general protection fault"),
        ("soft-lockup", r"soft lockup"),
        ("hung-task", r"blocked for more than \d+ seconds"),
        ("rcu-stall", r"rcu: INFO: rcu_\w+ (?:self-)?detected stall"),
        ("kasan", r"KASAN: "),
        ("ubsan", r"UBSAN: "),
        ("list-corruption", r"list_(?:add|del) corruption"),
        ("panic", r"Kernel panic"),
    ))
#: Lines that continue a report (the page fault's cause, the oops line of a BUG, registers,
#: code, the call trace, its end marker).
_CONTINUATION = re.compile(
    r"^(?:\s|RIP:|RSP:|R[A-Z0-9]{2}:|R\d+:|FS:|CS:|CR2:|Code:|Call Trace|Modules linked in|"
    r"CPU:|Hardware name|Workqueue:|Tainted|<|\?|---\[ end trace|WARNING: .* at lib/refcount|"
    r"#PF:|PGD |Oops: )")
#: The panic an oops ends in (kernel/panic.c via oops_end): part of the report before it.
_FATAL = re.compile(r"Kernel panic - not syncing: Fatal exception")
_AT = re.compile(r" at ([\w./-]+:\d+)")
_FRAME = re.compile(r"(?:RIP: \S+:|^\s+)([A-Za-z_][\w.]*)\+0x")
#: Lines kept after the line that matched.
EXCERPT_LINES = 40


@dataclass(frozen=True)
class Sign:
    kind: str
    signature: str
    line: str
    excerpt: str


def _strip(line: str) -> str:
    """The line without its printk timestamp (``[   12.345678] ``)."""
    return re.sub(r"^\[\s*\d+\.\d+\]\s?", "", line.rstrip("\r"))


def scan(text: str) -> list[Sign]:
    """The reports in ``text``, in order (one per matching line that starts a report: lines
    inside an excerpt already taken do not start another)."""
    lines = text.splitlines()
    out: list[Sign] = []
    skip_until = -1
    for i, raw in enumerate(lines):
        if i <= skip_until:
            continue
        line = _strip(raw)
        if out and out[-1].kind in ("bug", "oops", "general-protection") and \
                _FATAL.search(line):
            continue  # the oops's own end, not a second report
        for kind, pattern in PATTERNS:
            if pattern.search(line):
                block = [_strip(x) for x in lines[i:i + EXCERPT_LINES]]
                out.append(Sign(kind, f"{kind}|{_where(line, block)}", line,
                                "\n".join(block)))
                skip_until = i + _report_length(block)
                break
    return out


def _where(line: str, block: list[str]) -> str:
    at = _AT.search(line)
    if at:
        return at.group(1)
    for b in block[1:]:
        frame = _FRAME.search(b)
        if frame:
            return frame.group(1)
    return re.sub(r"\d+", "N", line)[:80]


def _report_length(block: list[str]) -> int:
    """Lines of ``block`` after its first that belong to the report it starts: its
    continuation lines, up to its end marker."""
    n = 0
    for n, b in enumerate(block[1:], 1):
        if "---[ end trace" in b:
            return n
        if not _CONTINUATION.match(b):
            return n - 1
    return n

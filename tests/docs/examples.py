"""The examples of the docs pages, as the test suite runs them.

A small collector of our own rather than Sybil or pytest-examples: the pages hold shell
sessions whose output is compared (``console`` blocks: ``$ command`` lines, each followed by
what it prints), shell scripts (``sh``), Python snippets with or without their printed output,
and files an example reads (a scenario in ``yaml``); a page's examples share one working
directory in order (``gen -o out.pcap`` then ``check out.pcap``), beside the shipped captures.
Sybil would need a parser of our own for all but the Python blocks, and pytest-examples
handles Python only.

A block is preceded by an optional directive, an HTML comment that the site does not show:

* ``<!-- test: skip REASON -->``: not run (needs root, a network interface, QEMU); counted;
* ``<!-- test: exit=N -->``: each command of the block exits with N (default 0);
* ``<!-- test: file=NAME -->``: the block (yaml, json, text) is written to NAME for the
  examples after it.

In expected output a line ``...`` stands for any number of lines, and a line ending in ``...``
for any line that starts with the text before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: Languages of the blocks that are examples to run; every other block is text.
SHELL = ("console", "sh", "bash", "shell")
PYTHON = ("python", "py", "pycon")

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<info>[^\n]*)$")
_DIRECTIVE = re.compile(r"^<!-- test: (?P<what>[^>]*?) -->$")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, from 1
    lang: str
    info: str
    text: str
    directive: str = ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skipped(self) -> str | None:
        return self.directive[5:] if self.directive.startswith("skip ") else None

    @property
    def exit_status(self) -> int:
        found = re.search(r"exit=(\d+)", self.directive)
        return int(found.group(1)) if found else 0

    @property
    def file(self) -> str | None:
        found = re.search(r"file=(\S+)", self.directive)
        return found.group(1) if found else None

    @property
    def is_output(self) -> bool:
        return self.lang == "text" and 'title="Output"' in self.info


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order, with the directive just above each."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent = len(fence["indent"])
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        j = start - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        directive = _DIRECTIVE.match(lines[j].strip()) if j >= 0 else None
        found.append(Block(page, start + 1, fence["lang"], fence["info"].strip(),
                           "\n".join(body) + "\n", directive["what"] if directive else ""))
        i += 1
    return found


def pages() -> list[Path]:
    """The docs site's pages, and README.md (whose examples are run the same way)."""
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


@dataclass
class Command:
    command: str
    output: list[str] | None  # None: not shown, not compared


def commands(block: Block) -> list[Command]:
    """The commands of a shell block: a ``console`` block's ``$`` lines with the output shown
    under each (continued by a trailing backslash); a ``sh`` block is one script."""
    if block.lang != "console":
        return [Command(block.text, None)]
    found: list[Command] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            found.append(Command(line[2:], []))
        elif found and found[-1].command.endswith("\\") and not found[-1].output:
            found[-1].command += "\n" + line
        elif found:
            assert found[-1].output is not None
            found[-1].output.append(line)
        else:
            raise AssertionError(f"{block.where}: output before any '$ ' command")
    return found


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` lines against ``expected``, where ``...`` alone is any lines and a trailing
    ``...`` any rest of a line; trailing spaces ignored."""
    expected = [ln.rstrip() for ln in expected]
    actual = [ln.rstrip() for ln in actual]
    while expected and not expected[-1]:
        expected.pop()
    while actual and not actual[-1]:
        actual.pop()

    def match(e: int, a: int) -> bool:
        if e == len(expected):
            return a == len(actual)
        if expected[e] == "...":
            return any(match(e + 1, k) for k in range(a, len(actual) + 1))
        if a == len(actual):
            return False
        line = expected[e]
        if line.endswith("...") and line != "...":
            ok = actual[a].startswith(line[:-3])
        else:
            ok = actual[a] == line
        return ok and match(e + 1, a + 1)

    return match(0, 0)

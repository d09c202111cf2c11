"""Text from columns: one text per row, each from its row's template, in one C pass.

A template is a list of ops (see :data:`LITERAL` ...): literal text, and values of the row
from integer columns (decimal, hex, seconds) or text columns. :class:`Templates` collects
them as they are compiled; :func:`fill` writes every row of a batch, in row order, with the C
engine (``_text``) or its pure-Python twin (``_text_python``), which give the same text
(``IBWIRE_NO_EXTENSIONS=1`` forces the twin). ``ibwire show`` writes its lines, JSON objects
and header trees this way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from ibwire._twins import load_twin
from ibwire.scan._text_python import HEX, LITERAL, NUMBER, PREFIX, SECONDS, SMALL, TEXT

__all__ = ["HEX", "LITERAL", "Block", "NUMBER", "PREFIX", "SECONDS", "SMALL", "TEXT", "Templates",
           "check", "fill", "number_op"]

Op = tuple[int, Any, int, int]
"""(kind, literal text or column name, width, flags) as a template holds it."""


class Block(tuple):  # type: ignore[type-arg]
    """Ops that many templates share (a header's fields): :class:`Templates` compiles a
    block once; it must live as long as the templates (keep it in a cache)."""

_SPEC = re.compile(r"\{:?(#?)(0?)(\d*)([dxf]?)\}")


@cache
def number_op(fmt: str, name: str) -> tuple[Op, ...]:
    """The ops of a format string with one integer field (``"QP={:#08x}"``, ``"{:6d}"``,
    ``"0x{:x}"``, ``"{}"``) applied to column ``name``. Only these forms: anything else
    raises ValueError (a new format then needs its op here, and both twins)."""
    found = list(_SPEC.finditer(fmt))
    if len(found) != 1:
        raise ValueError(f"{fmt!r}: one integer field wanted")
    spec = found[0]
    prefix, zero, width, kind = spec.groups()
    ops: list[Op] = [(LITERAL, fmt[:spec.start()], 0, 0)] if spec.start() else []
    if kind == "x":
        ops.append((HEX, name, int(width or 0), PREFIX if prefix else 0))
    elif kind in ("", "d") and not prefix and not zero:
        ops.append((NUMBER, name, int(width or 0), 0))
    else:
        raise ValueError(f"{fmt!r}: no text op for this integer format")
    if spec.end() < len(fmt):
        ops.append((LITERAL, fmt[spec.end():], 0, 0))
    return tuple(ops)


class Templates:
    """Templates compiled so far, numbered from 0, with the columns they read."""

    def __init__(self) -> None:
        self.ints: dict[str, int] = {}
        self.strs: dict[str, int] = {}
        self.pool = bytearray()
        self.reads: list[tuple[frozenset[str], frozenset[str]]] = []
        self._literals: dict[str, tuple[int, int, int, int]] = {}
        self._blocks: dict[int, tuple[Block, list[tuple[int, int, int, int]], set[str],
                                      set[str]]] = {}
        self._rows: list[tuple[int, int, int, int]] = []
        self._starts = [0]
        self._done: list[np.ndarray] = []
        self._flat: tuple[np.ndarray, np.ndarray] | None = None

    def _literal(self, text: str) -> tuple[int, int, int, int]:
        row = self._literals.get(text)
        if row is None:
            data = text.encode("utf-8")
            row = self._literals[text] = (LITERAL, len(self.pool), len(data), 0)
            self.pool += data
        return row

    def add(self, ops: Sequence[Op | Block]) -> int:
        """Number a template (literals merged; new columns registered)."""
        rows: list[tuple[int, int, int, int]] = []
        ints: set[str] = set()
        strs: set[str] = set()
        self._compile(ops, rows, ints, strs)
        self._rows.extend(rows)
        self.reads.append((frozenset(ints), frozenset(strs)))
        self._starts.append(self._starts[-1] + len(rows))
        self._flat = None
        return len(self._starts) - 2

    def _compile(self, ops: Sequence[Op | Block], rows: list[tuple[int, int, int, int]],
                 ints: set[str], strs: set[str]) -> None:
        texts: list[str] = []
        for op in ops:
            if isinstance(op, Block):
                made = self._blocks.get(id(op))
                if made is None:
                    made = (op, [], set(), set())  # the block is kept: its id stays its own
                    self._compile(op, made[1], made[2], made[3])
                    self._blocks[id(op)] = made
                if texts:
                    rows.append(self._literal("".join(texts)))
                    texts.clear()
                rows.extend(made[1])
                ints |= made[2]
                strs |= made[3]
                continue
            kind, arg, width, flags = op
            if kind == LITERAL:
                texts.append(arg)
                continue
            if texts:
                rows.append(self._literal("".join(texts)))
                texts.clear()
            if kind == TEXT:
                strs.add(arg)
                rows.append((TEXT, self.strs.setdefault(arg, len(self.strs)), 0, 0))
            else:
                ints.add(arg)
                rows.append((kind, self.ints.setdefault(arg, len(self.ints)), width, flags))
        if texts:
            rows.append(self._literal("".join(texts)))

    def flat(self) -> tuple[np.ndarray, np.ndarray, bytes]:
        """(starts, ops, pool) for :func:`fill`."""
        if self._flat is None:
            if self._rows:  # only the rows added since the last call are converted
                self._done.append(np.array(self._rows, np.int32).reshape(-1, 4))
                self._rows = []
            self._flat = (np.array(self._starts, np.int32),
                          np.concatenate(self._done) if self._done
                          else np.zeros((0, 4), np.int32))
        return (*self._flat, bytes(self.pool))

    def columns_of(self, numbers: Sequence[int]) -> tuple[set[str], set[str]]:
        """(integer columns, text columns) the templates ``numbers`` read."""
        ints: set[str] = set()
        strs: set[str] = set()
        for n in numbers:
            ints.update(self.reads[n][0])
            strs.update(self.reads[n][1])
        return ints, strs


def check(template: np.ndarray, starts: np.ndarray, ops: np.ndarray, pool: bytes,
          ints: Sequence[np.ndarray | None], strs: Sequence[Sequence[str] | None]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Refuse what would make the C engine read out of bounds (ValueError): every row's
    template, every op's column and literal, every column long enough. Returns the arrays
    as the engine reads them."""
    template = np.ascontiguousarray(template, np.int32)
    starts = np.ascontiguousarray(starts, np.int32)
    ops = np.ascontiguousarray(ops, np.int32).reshape(-1, 4)
    rows = len(template)
    if len(starts) < 1 or starts[0] != 0 or np.any(np.diff(starts) < 0) \
            or starts[-1] > len(ops):
        raise ValueError("template starts out of order or past the ops")
    if rows and (template.min() < 0 or template.max() >= len(starts) - 1):
        raise ValueError("a row names no template")
    used = np.zeros(len(ops), bool)
    present = np.zeros(len(starts) - 1, bool)
    present[template] = True  # (np.unique would load numpy.ma: 70 ms at start-up)
    for t in np.flatnonzero(present).tolist():
        used[starts[t]:starts[t + 1]] = True
    kinds, args, widths = (ops[used, i].astype(np.int64) for i in range(3))
    literal = kinds == LITERAL
    if np.any(literal & ((args < 0) | (widths < 0) | (args + widths > len(pool)))):
        raise ValueError("a literal text op reads outside the pool")
    if np.any((kinds < LITERAL) | (kinds > SECONDS)):
        raise ValueError("unknown text op")
    if np.any(~literal & ((widths < 0) | (widths > 64))):
        raise ValueError("a text op's width is outside 0..64")
    for arg in sorted(set(args[kinds == TEXT].tolist())):
        column = strs[arg] if 0 <= arg < len(strs) else None
        if not isinstance(column, list) or len(column) < rows:
            raise ValueError(f"text column {arg} is not a list of {rows} texts")
    for arg in sorted(set(args[~literal & (kinds != TEXT)].tolist())):
        values = ints[arg] if 0 <= arg < len(ints) else None
        if (not isinstance(values, np.ndarray) or values.ndim != 1
                or values.dtype.itemsize != 8 or values.dtype.kind not in "iu"
                or len(values) < rows):
            raise ValueError(f"integer column {arg} is not {rows} 8-byte integers")
    return template, starts, ops


_engine, implementation = load_twin("ibwire.scan._text", "ibwire.scan._text_python")


def fill(template: np.ndarray, starts: np.ndarray, ops: np.ndarray, pool: bytes,
         ints: Sequence[np.ndarray | None], strs: Sequence[list[str] | None],
         end: str) -> bytes:
    """Each row's text (its template filled with its values), each followed by ``end``, in
    UTF-8."""
    if implementation == "python":
        check(template, starts, ops, pool, ints, strs)
    return _engine.fill(template, starts, ops, pool, ints, strs, end)  # type: ignore[no-any-return]

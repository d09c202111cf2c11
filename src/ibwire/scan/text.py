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
from typing import Any

import numpy as np

from ibwire._twins import load_twin
from ibwire.scan._text_python import HEX, LITERAL, NUMBER, PREFIX, SECONDS, SMALL, TEXT

__all__ = ["HEX", "LITERAL", "NUMBER", "PREFIX", "SECONDS", "SMALL", "TEXT", "Templates",
           "check", "fill", "number_op"]

Op = tuple[int, Any, int, int]
"""(kind, literal text or column name, width, flags) as a template holds it."""

_SPEC = re.compile(r"\{:?(#?)(0?)(\d*)([dxf]?)\}")


def number_op(fmt: str, name: str) -> list[Op]:
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
    return ops


class Templates:
    """Templates compiled so far, numbered from 0, with the columns they read."""

    def __init__(self) -> None:
        self.ops: list[list[Op]] = []
        self.ints: dict[str, int] = {}
        self.strs: dict[str, int] = {}
        self.pool = bytearray()
        self._rows: list[list[tuple[int, int, int, int]]] = []
        self._flat: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, ops: Sequence[Op]) -> int:
        """Number a template (literals merged; unknown columns registered)."""
        rows: list[tuple[int, int, int, int]] = []
        for kind, arg, width, flags in ops:
            if kind == LITERAL:
                data = str(arg).encode("utf-8")
                if not data:
                    continue
                if rows and rows[-1][0] == LITERAL \
                        and rows[-1][1] + rows[-1][2] == len(self.pool):
                    rows[-1] = (LITERAL, rows[-1][1], rows[-1][2] + len(data), 0)
                else:
                    rows.append((LITERAL, len(self.pool), len(data), 0))
                self.pool += data
            elif kind == TEXT:
                rows.append((TEXT, self.strs.setdefault(arg, len(self.strs)), 0, 0))
            else:
                rows.append((kind, self.ints.setdefault(arg, len(self.ints)), width, flags))
        self.ops.append(list(ops))
        self._rows.append(rows)
        self._flat = None
        return len(self._rows) - 1

    def flat(self) -> tuple[np.ndarray, np.ndarray, bytes]:
        """(starts, ops, pool) for :func:`fill`."""
        if self._flat is None:
            sizes = [len(r) for r in self._rows]
            starts = np.zeros(len(sizes) + 1, np.int32)
            np.cumsum(sizes, out=starts[1:])
            ops = np.array([op for r in self._rows for op in r] or np.zeros((0, 4)),
                           np.int32).reshape(-1, 4)
            self._flat = (starts, ops)
        return (*self._flat, bytes(self.pool))

    def columns_of(self, numbers: Sequence[int]) -> tuple[set[str], set[str]]:
        """(integer columns, text columns) the templates ``numbers`` read."""
        ints, strs = set(), set()
        for n in numbers:
            for kind, arg, _w, _f in self.ops[n]:
                if kind == TEXT:
                    strs.add(arg)
                elif kind != LITERAL:
                    ints.add(arg)
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
    for t in np.unique(template).tolist():
        used[starts[t]:starts[t + 1]] = True
    for kind, arg, width, _flags in ops[used].tolist():
        if kind == LITERAL:
            bad = not (0 <= arg and 0 <= width and arg + width <= len(pool))
        elif kind == TEXT:
            column = strs[arg] if 0 <= arg < len(strs) else None
            bad = not isinstance(column, list) or len(column) < rows
        elif kind in (NUMBER, HEX, SMALL, SECONDS):
            values = ints[arg] if 0 <= arg < len(ints) else None
            bad = (not isinstance(values, np.ndarray) or values.ndim != 1
                   or values.dtype.itemsize != 8 or values.dtype.kind not in "iu"
                   or len(values) < rows or not 0 <= width <= 64)
        else:
            bad = True
        if bad:
            raise ValueError(f"text op {(kind, arg, width)} reads outside its column or pool")
    return template, starts, ops


_engine, implementation = load_twin("ibwire.scan._text", "ibwire.scan._text_python")


def fill(template: np.ndarray, starts: np.ndarray, ops: np.ndarray, pool: bytes,
         ints: Sequence[np.ndarray | None], strs: Sequence[list[str] | None],
         end: str) -> str:
    """Each row's text (its template filled with its values), each followed by ``end``."""
    if implementation == "python":
        check(template, starts, ops, pool, ints, strs)
    return _engine.fill(template, starts, ops, pool, ints, strs, end)  # type: ignore[no-any-return]

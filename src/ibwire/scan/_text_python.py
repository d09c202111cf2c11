"""Pure-Python twin of the text filler (``ibwire.scan._text``): the same name, the same text.

``fill`` writes one text per row from templates and columns (see ``ibwire.scan.text``): row
``r`` follows template ``template[r]``, the ops ``ops[starts[t]:starts[t + 1]]``, each a
row ``(kind, arg, width, flags)``:

* LITERAL: ``pool[arg:arg + width]`` (UTF-8);
* NUMBER: ``ints[arg][r]`` (uint64) in decimal, right-aligned in ``width`` spaces;
* HEX: ``ints[arg][r]`` in lower-case hex, ``0x`` first if ``flags`` & PREFIX, zero-padded
  to ``width`` characters (the prefix counted), as ``format(v, "#08x")`` does;
* SMALL: ``ints[arg][r]`` as a HEX with prefix if above 9, else in decimal;
* TEXT: ``strs[arg][r]`` (a str);
* SECONDS: ``ints[arg][r]`` (int64 nanoseconds) as ``f"{ns / 1e9:{width}.6f}"``.

``end`` follows every row's text; the whole is returned in UTF-8.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

LITERAL, NUMBER, HEX, SMALL, TEXT, SECONDS = range(6)
PREFIX = 1

__all__ = ["fill"]


def fill(template: np.ndarray, starts: np.ndarray, ops: np.ndarray, pool: bytes,
         ints: Sequence[np.ndarray | None], strs: Sequence[Sequence[str] | None],
         end: str) -> bytes:
    all_ops = ops.tolist()
    first = starts.tolist()
    # the column's 8 bytes as the C engine reads them: unsigned, and signed for SECONDS
    unsigned: list[list[Any] | None] = [None if a is None else a.view(np.uint64).tolist()
                                        for a in ints]
    signed: list[list[Any] | None] = [None if a is None else a.view(np.int64).tolist()
                                      for a in ints]
    out: list[str] = []
    for r, t in enumerate(template.tolist()):
        for kind, arg, width, flags in all_ops[first[t]:first[t + 1]]:
            if kind == LITERAL:
                out.append(pool[arg:arg + width].decode("utf-8"))
            elif kind == TEXT:
                out.append(strs[arg][r])  # type: ignore[index]
            else:
                v = (signed if kind == SECONDS else unsigned)[arg][r]  # type: ignore[index]
                if kind == NUMBER:
                    out.append(f"{v:{width}d}" if width else str(v))
                elif kind == SECONDS:
                    out.append(f"{v / 1e9:{width}.6f}")
                elif kind == SMALL and v <= 9:
                    out.append(str(v))
                else:
                    prefix = "#" if flags & PREFIX or kind == SMALL else ""
                    out.append(f"{v:{prefix}0{width}x}" if width else f"{v:{prefix}x}")
        out.append(end)
    return "".join(out).encode("utf-8")

"""Arrow arrays made from numpy buffers directly.

``pyarrow.array`` asks pandas whether its argument is a pandas object, and importing pandas
for that costs more than half a second of an export's start; these builders hand Arrow the
numpy buffers themselves (no copy for numbers of the column's width), so an export never
imports pandas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _validity(valid: np.ndarray | None) -> Any:
    import pyarrow as pa

    if valid is None or valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def numeric(values: np.ndarray, arrow_type: Any, valid: np.ndarray | None = None) -> Any:
    """``values`` as an Arrow array of ``arrow_type`` (an integer type or bool), null where
    ``valid`` is False."""
    import pyarrow as pa

    if arrow_type == pa.bool_():
        data = pa.py_buffer(np.packbits(values.astype(bool, copy=False), bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values, np.dtype(str(arrow_type))))
    return pa.Array.from_buffers(arrow_type, len(values), [_validity(valid), data])


def strings(texts: Sequence[str]) -> Any:
    """``texts`` as an Arrow string array."""
    import pyarrow as pa

    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def distinct(values: np.ndarray) -> Any:
    """The distinct values of a column (unsigned numbers, or rows of 16 bytes) and each
    value's index among them: an Arrow ``DictionaryArray`` (hashed in Arrow, no sort)."""
    import pyarrow as pa

    if values.ndim == 2:
        data = pa.py_buffer(np.ascontiguousarray(values, np.uint8))
        column = pa.Array.from_buffers(pa.binary(values.shape[1]), len(values), [None, data])
    else:
        column = numeric(values, pa.uint64())
    return column.dictionary_encode()


def pick(texts: Sequence[str] | Any, indices: np.ndarray | Any,
         valid: np.ndarray | None = None) -> Any:
    """``texts[indices[i]]`` for each i (null where ``valid`` is False); ``texts`` a sequence
    of str or an Arrow string array, ``indices`` numbers or an Arrow int32 array."""
    import pyarrow as pa

    table = texts if isinstance(texts, pa.Array) else strings(texts)
    if isinstance(indices, pa.Array):
        data = indices.buffers()[1].slice(indices.offset * 4)
        taken = pa.Array.from_buffers(pa.int32(), len(indices), [_validity(valid), data])
    else:
        taken = numeric(indices.astype(np.int32, copy=False), pa.int32(), valid)
    return table.take(taken)

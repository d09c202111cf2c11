"""Arrow arrays made from numpy buffers directly.

``pyarrow.array`` asks pandas whether its argument is a pandas object, and importing pandas
for that costs more than half a second of an export's start; these builders hand Arrow the
numpy buffers themselves (no copy for numbers of the column's width), so an export never
imports pandas. A text column's distinct values are found by ibwire's row grouping, and
for Parquet it stays a dictionary array, so that a Parquet export never calls Arrow's
compute functions: ``pyarrow.compute`` costs a tenth of a second to import (it writes the
docstrings of its functions then).
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


_zeros: list[Any] = []  # one shared buffer of zero bytes, grown as asked


def _zero_bytes(size: int) -> Any:
    """A read-only Arrow buffer of ``size`` zero bytes, a slice of one shared buffer."""
    import pyarrow as pa

    if not _zeros or _zeros[0].size < size:
        _zeros[:] = [pa.py_buffer(bytes(max(size, 1 << 16)))]
    return _zeros[0].slice(0, size)


def nulls(n: int, arrow_type: Any) -> Any:
    """An array of ``n`` nulls of ``arrow_type`` (a number, bool, string, or dictionary of
    strings) whose buffers are slices of one shared buffer of zeros: a column whose header
    no row of a batch has costs no memory (``pyarrow.nulls`` makes zeroed buffers for each,
    half of a partition of every column on RoCEv2 traffic)."""
    import pyarrow as pa

    validity = _zero_bytes((n + 7) // 8)
    if pa.types.is_dictionary(arrow_type):
        index = arrow_type.index_type
        indices = pa.Array.from_buffers(index, n, [validity, _zero_bytes(index.bit_width // 8 * n)],
                                        null_count=n)
        return pa.DictionaryArray.from_arrays(indices, strings([]), safe=False)
    if pa.types.is_string(arrow_type):
        return pa.Array.from_buffers(arrow_type, n, [validity, _zero_bytes(4 * (n + 1)),
                                                     _zero_bytes(0)], null_count=n)
    width = (n + 7) // 8 if pa.types.is_boolean(arrow_type) else arrow_type.bit_width // 8 * n
    return pa.Array.from_buffers(arrow_type, n, [validity, _zero_bytes(width)], null_count=n)


def strings(texts: Sequence[str]) -> Any:
    """``texts`` as an Arrow string array."""
    import pyarrow as pa

    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a column (unsigned numbers, or rows of 16 bytes) in the order
    they first appear, and each row's index among them (int32), hashed by the analysis's
    row grouping (``ibwire.analysis.connections.group_numbers``)."""
    from ibwire.analysis.connections import group_numbers

    if values.ndim == 2:
        words = np.ascontiguousarray(values, np.uint8).view(np.uint64)
        keys = tuple(words[:, i] for i in range(words.shape[1]))
    else:
        keys = (values.astype(np.uint64, copy=False),)
    if not len(values):
        return values[:0], np.zeros(0, np.int32)
    first, group = group_numbers(keys)
    return values[first], group


def _unique(texts: Sequence[str], indices: np.ndarray) -> tuple[Sequence[str], np.ndarray]:
    """``texts`` without repeats and ``indices`` moved onto them: the Parquet writer
    (``ibwire.export.parquet``) takes a dictionary array's indices as they are only where
    its dictionary's values are distinct, and otherwise moves every row's index onto the
    distinct ones (a table of 256 names such as the opcodes' has many repeats)."""
    first = dict.fromkeys(texts)
    if len(first) == len(texts):
        return texts, indices
    place = {t: i for i, t in enumerate(first)}
    moved = np.array([place[t] for t in texts], np.int32)
    return list(first), moved[indices]


def pick(texts: Sequence[str], indices: np.ndarray, valid: np.ndarray | None = None,
         dictionary: bool = False) -> Any:
    """``texts[indices[i]]`` for each i (null where ``valid`` is False): with
    ``dictionary``, as an Arrow dictionary array of ``texts`` (nothing gathered, no compute
    function: what the Parquet writer takes fastest), else a string array (taken in Arrow)."""
    import pyarrow as pa

    if dictionary:
        texts, indices = _unique(texts, indices)
    taken = numeric(indices.astype(np.int32, copy=False), pa.int32(), valid)
    if dictionary:
        return pa.DictionaryArray.from_arrays(taken, strings(texts), safe=False)
    return strings(texts).take(taken)

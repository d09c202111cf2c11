"""Rows grouped by equal keys, with numpy: the pure-Python twin of
``ibwire.analysis._streams`` (same names, same results)."""

from __future__ import annotations

import numpy as np

__all__ = ["group_rows"]

_MIX = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
        0x27D4EB2F165667C5, 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53)
MAX_KEYS = 16


def group_rows(columns: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows with equal values in every column (equal-length uint64 arrays), grouped: (first
    row of each group, groups in the order they first appear; every row, grouped: each
    group's rows in order, groups in that order; where each group starts in it, then the
    number of rows). Grouped through a 64-bit hash of the row, then checked."""
    if not 0 < len(columns) <= MAX_KEYS:
        raise ValueError(f"group_rows takes 1 to {MAX_KEYS} key columns, not {len(columns)}")
    columns = tuple(np.asarray(c, dtype=np.uint64) for c in columns)
    n = len(columns[0])
    if any(c.ndim != 1 or len(c) != n for c in columns):
        raise ValueError("group_rows: key columns of different lengths")
    if not n:
        empty = np.zeros(0, np.intp)
        return empty, empty, np.zeros(1, np.intp)
    h = np.zeros(n, np.uint64)
    for c, k in zip(columns, _MIX * 3, strict=False):
        x = c * np.uint64(k)
        h ^= x ^ (x >> np.uint64(29))
    perm = np.argsort(h, kind="stable")
    hs = h[perm]
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(hs[1:], hs[:-1], out=new[1:])
    group = np.cumsum(new) - 1
    first = perm[np.flatnonzero(new)]
    if not all((c[perm] == c[first][group]).all() for c in columns):  # a hash collision
        key = np.ascontiguousarray(np.stack(columns, axis=1))
        _, first, inverse = np.unique(key.view(np.dtype((np.void, 8 * len(columns)))).ravel(),
                                      return_index=True, return_inverse=True)
        group = inverse.ravel()
    else:
        row_group = np.empty(n, np.intp)
        row_group[perm] = group
        group = row_group
    # number the groups as they first appear
    rank = np.empty(len(first), np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    group = rank[group]
    order = np.argsort(group, kind="stable").astype(np.intp)
    starts = np.searchsorted(group[order], np.arange(len(first) + 1)).astype(np.intp)
    return np.sort(first).astype(np.intp), order, starts

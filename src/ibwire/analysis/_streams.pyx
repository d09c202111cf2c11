# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Rows grouped by equal keys in one pass over a hash table: the C twin of
``ibwire.analysis._streams_python`` (same names, same results; IBWIRE_NO_EXTENSIONS=1 picks
the twin). ``ibwire.analysis.connections`` groups each batch's rows into streams with it."""

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc

cimport numpy as cnp

import numpy as np

cnp.import_array()

__all__ = ["group_rows"]

cdef enum:
    MAX_KEYS = 16


cdef inline uint64_t _mix(uint64_t h, uint64_t x) noexcept nogil:
    h ^= x + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2)
    h *= 0xFF51AFD7ED558CCDULL
    return h ^ (h >> 33)


cdef int64_t _group(const uint64_t **cols, int k, int64_t n, int64_t *group,
                    int64_t *first) noexcept nogil:
    """Group of every row (numbered as groups first appear) and each group's first row;
    returns the number of groups, -1 when out of memory."""
    cdef int64_t size = 64, groups = 0, i, g, slot, j
    cdef int64_t *table = <int64_t *>malloc(size * sizeof(int64_t))
    cdef int64_t *bigger
    cdef uint64_t *hashes = <uint64_t *>malloc((n if n > 0 else 1) * sizeof(uint64_t))
    cdef uint64_t h
    cdef int c, same
    if table == NULL or hashes == NULL:
        free(table)
        free(hashes)
        return -1
    for slot in range(size):
        table[slot] = -1
    for i in range(n):
        if i > 0:  # the same stream as the row before (runs are common): no hashing
            same = 1
            for c in range(k):
                if cols[c][i] != cols[c][i - 1]:
                    same = 0
                    break
            if same:
                hashes[i] = hashes[i - 1]
                group[i] = group[i - 1]
                continue
        h = 0
        for c in range(k):
            h = _mix(h, cols[c][i])
        hashes[i] = h
        slot = <int64_t>(h & <uint64_t>(size - 1))
        while True:
            g = table[slot]
            if g < 0:
                break
            j = first[g]
            if hashes[j] == h:
                same = 1
                for c in range(k):
                    if cols[c][j] != cols[c][i]:
                        same = 0
                        break
                if same:
                    break
            slot = (slot + 1) & (size - 1)
        if g < 0:
            g = groups
            groups += 1
            first[g] = i
            table[slot] = g
            if 2 * groups > size:  # keep the table at most half full
                bigger = <int64_t *>malloc(2 * size * sizeof(int64_t))
                if bigger == NULL:
                    free(table)
                    free(hashes)
                    return -1
                size *= 2
                for slot in range(size):
                    bigger[slot] = -1
                for j in range(groups):
                    slot = <int64_t>(hashes[first[j]] & <uint64_t>(size - 1))
                    while bigger[slot] >= 0:
                        slot = (slot + 1) & (size - 1)
                    bigger[slot] = j
                free(table)
                table = bigger
        group[i] = g
    free(table)
    free(hashes)
    return groups


def group_rows(tuple columns):
    """Rows with equal values in every column (equal-length uint64 arrays), grouped: (first
    row of each group, groups in the order they first appear; every row, grouped: each
    group's rows in order, groups in that order; where each group starts in it, then the
    number of rows)."""
    cdef int k = len(columns)
    if not 0 < k <= MAX_KEYS:
        raise ValueError(f"group_rows takes 1 to {MAX_KEYS} key columns, not {k}")
    arrays = [np.ascontiguousarray(column, dtype=np.uint64) for column in columns]
    cdef int64_t n = arrays[0].shape[0]
    if any(a.ndim != 1 or a.shape[0] != n for a in arrays):
        raise ValueError("group_rows: key columns of different lengths")
    cdef const uint64_t *cols[MAX_KEYS]
    cdef int c
    for c in range(k):
        cols[c] = <const uint64_t *>cnp.PyArray_DATA(arrays[c])
    cdef cnp.ndarray group = np.empty(n, np.int64)
    cdef cnp.ndarray first = np.empty(n, np.int64)
    cdef int64_t *p_group = <int64_t *>cnp.PyArray_DATA(group)
    cdef int64_t *p_first = <int64_t *>cnp.PyArray_DATA(first)
    cdef int64_t groups
    with nogil:
        groups = _group(cols, k, n, p_group, p_first)
    if groups < 0:
        raise MemoryError()
    # a counting sort: each group's rows in order
    cdef cnp.ndarray starts = np.zeros(groups + 1, np.int64)
    cdef cnp.ndarray order = np.empty(n, np.int64)
    cdef int64_t *p_starts = <int64_t *>cnp.PyArray_DATA(starts)
    cdef int64_t *p_order = <int64_t *>cnp.PyArray_DATA(order)
    cdef int64_t *at = <int64_t *>calloc(groups + 1, sizeof(int64_t))
    cdef int64_t i, g
    if at == NULL:
        raise MemoryError()
    with nogil:
        for i in range(n):
            p_starts[p_group[i] + 1] += 1
        for g in range(groups):
            p_starts[g + 1] += p_starts[g]
            at[g] = p_starts[g]
        for i in range(n):
            g = p_group[i]
            p_order[at[g]] = i
            at[g] += 1
    free(at)
    return (first[:groups].astype(np.intp), order.astype(np.intp, copy=False),
            starts.astype(np.intp, copy=False))

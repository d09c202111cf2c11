# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""C text filler: the same name and text as the pure-Python twin (``ibwire.scan._text_python``,
whose docstring says what the ops do). One pass over the rows into one UTF-8 buffer."""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_ITEM
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdio cimport snprintf
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

from ibwire.scan.text import check

cimport numpy as cnp

import numpy as np

cnp.import_array()

__all__ = ["fill"]

# the twin's op kinds (a test runs both on every kind)
cdef enum:
    LITERAL = 0
    NUMBER = 1
    HEX = 2
    SMALL = 3
    TEXT = 4
    SECONDS = 5
    PREFIX = 1

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL


cdef struct Out:
    char *data
    Py_ssize_t size
    Py_ssize_t cap


cdef int grow(Out *o, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap
    cdef char *data
    if o.size + more <= o.cap:
        return 0
    cap = max(o.cap * 2, o.size + more + 4096)
    data = <char *>realloc(o.data, cap)
    if data == NULL:
        raise MemoryError()
    o.data, o.cap = data, cap
    return 0


cdef inline int put(Out *o, const char *text, Py_ssize_t n) except -1:
    grow(o, n)
    memcpy(o.data + o.size, text, n)
    o.size += n
    return 0


cdef int number(Out *o, uint64_t v, int width, int hexa, int prefix) except -1:
    """v in decimal or hex, zero-padded (hex) or space-padded (decimal) to width."""
    cdef char digits[24]
    cdef int n = 0, body, pad, i
    cdef const char *alphabet = b"0123456789abcdef"
    if hexa:
        while True:
            digits[n] = alphabet[v & 15]
            v >>= 4
            n += 1
            if v == 0:
                break
    else:
        while True:
            digits[n] = alphabet[v % 10]
            v //= 10
            n += 1
            if v == 0:
                break
    body = n + (2 if prefix else 0)
    pad = width - body if width > body else 0
    grow(o, body + pad)
    if not hexa:
        for i in range(pad):
            o.data[o.size + i] = b' '
        o.size += pad
    if prefix:
        o.data[o.size] = b'0'
        o.data[o.size + 1] = b'x'
        o.size += 2
    if hexa:
        for i in range(pad):
            o.data[o.size + i] = b'0'
        o.size += pad
    for i in range(n):
        o.data[o.size + i] = digits[n - 1 - i]
    o.size += n
    return 0


cdef int put_seconds(Out *o, int64_t ns, int width) except -1:
    """ns / 1e9 (a double) with 6 decimals, right-aligned in width, as Python writes it.

    Below 2**52 ns the double is within 0.47 ns of ns / 10**9 (its ulp is at most 2**-30 s),
    and a rounding boundary (an odd multiple of 500 ns) is at least 1 ns away unless ns ends
    in 500: then the microseconds are ns / 1000 rounded, in integers. Otherwise C's %f, which
    like Python rounds the double's exact value correctly."""
    cdef char text[128]  # width <= 64 (text.check) and at most 21 more characters
    cdef int written
    cdef int64_t micro
    cdef int i, fraction
    if 0 <= ns < (<int64_t>1 << 52) and ns % 1000 != 500:
        micro = (ns + 500) // 1000
        number(o, <uint64_t>(micro // 1000000), width - 7 if width > 7 else 0, 0, 0)
        grow(o, 7)
        o.data[o.size] = b'.'
        fraction = <int>(micro % 1000000)
        for i in range(6, 0, -1):
            o.data[o.size + i] = <char>(48 + fraction % 10)
            fraction //= 10
        o.size += 7
        return 0
    written = snprintf(text, sizeof(text), "%*.6f", <int>width, <double>ns / 1e9)
    put(o, text, written)
    return 0


def fill(cnp.ndarray template, cnp.ndarray starts, cnp.ndarray ops, bytes pool, ints, strs,
         str end):
    """See the twin."""
    cdef Py_ssize_t rows = template.shape[0], r, k, n_ints = len(ints), length
    cdef const int32_t *tpl
    cdef const int32_t *first
    cdef const int32_t *op
    cdef const int32_t *all_ops
    cdef const uint64_t **columns = <const uint64_t **>malloc(sizeof(void *) * max(1, n_ints))
    cdef const char *literal = pool
    cdef const char *text
    cdef Py_ssize_t end_len
    cdef const char *end_text = PyUnicode_AsUTF8AndSize(end, &end_len)
    cdef Out o
    cdef int32_t kind, arg, width, flags, t
    cdef uint64_t v
    cdef list column_text
    if columns == NULL:
        raise MemoryError()
    o.data, o.size, o.cap = NULL, 0, 0
    template, starts, ops = check(template, starts, ops, pool, ints, strs)
    held = []
    try:
        for k in range(n_ints):
            if ints[k] is None:
                columns[k] = NULL
            else:
                column = np.ascontiguousarray(ints[k]).view(np.uint64)
                held.append(column)
                columns[k] = <const uint64_t *>cnp.PyArray_DATA(column)
        tpl = <const int32_t *>cnp.PyArray_DATA(template)
        first = <const int32_t *>cnp.PyArray_DATA(starts)
        all_ops = <const int32_t *>cnp.PyArray_DATA(ops)
        grow(&o, rows * 64)
        for r in range(rows):
            t = tpl[r]
            for k in range(first[t], first[t + 1]):
                op = all_ops + 4 * k
                kind, arg, width, flags = op[0], op[1], op[2], op[3]
                if kind == LITERAL:
                    put(&o, literal + arg, width)
                elif kind == TEXT:
                    column_text = strs[arg]
                    text = PyUnicode_AsUTF8AndSize(<object>PyList_GET_ITEM(column_text, r),
                                                   &length)
                    put(&o, text, length)
                else:
                    v = columns[arg][r]
                    if kind == NUMBER:
                        number(&o, v, width, 0, 0)
                    elif kind == HEX:
                        number(&o, v, width, 1, flags & PREFIX)
                    elif kind == SMALL:
                        if v <= 9:
                            number(&o, v, 0, 0, 0)
                        else:
                            number(&o, v, 0, 1, 1)
                    else:
                        put_seconds(&o, <int64_t>v, width)
            put(&o, end_text, end_len)
        return PyBytes_FromStringAndSize(o.data, o.size)
    finally:
        free(o.data)
        free(columns)

# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""C text filler: the same name and text as the pure-Python twin (``ibwire.scan._text_python``,
whose docstring says what the ops do). One pass over the rows into one UTF-8 buffer."""

from cpython.bytes cimport PyBytes_AS_STRING, _PyBytes_Resize
from cpython.list cimport PyList_GET_ITEM
from cpython.ref cimport Py_XDECREF, PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdio cimport snprintf
from libc.stdlib cimport free, malloc
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
    # a new reference, as a pointer: the text is written into the bytes object itself
    PyObject *new_bytes "PyBytes_FromStringAndSize"(const char *v, Py_ssize_t size) except NULL


cdef struct Out:
    PyObject *text     # the bytes object written into (no copy at the end: each copy of
    char *data         # a batch's megabytes is as many fresh pages to fault in)
    Py_ssize_t size
    Py_ssize_t cap


cdef int grow(Out *o, Py_ssize_t more) except -1:
    cdef Py_ssize_t cap
    if o.size + more <= o.cap:
        return 0
    cap = max(o.cap * 2, o.size + more + 4096)
    _PyBytes_Resize(&o.text, cap)  # a big one by realloc (mremap): no copy either
    o.data, o.cap = PyBytes_AS_STRING(<object>o.text), cap
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


cdef inline Py_ssize_t most(int32_t kind, int32_t width) noexcept:
    """The most bytes a non-text op writes (20 digits of a uint64, "0x", 21 of %f)."""
    if kind == LITERAL:
        return width
    return (width if width > 32 else 32) + 32


def fill(cnp.ndarray template, cnp.ndarray starts, cnp.ndarray ops, bytes pool, ints, strs,
         str end):
    """See the twin."""
    cdef Py_ssize_t rows = template.shape[0], r, k, n_ints = len(ints), length
    cdef Py_ssize_t n_strs = len(strs), n_templates
    cdef const int32_t *tpl
    cdef const int32_t *first
    cdef const int32_t *op
    cdef const int32_t *all_ops
    cdef const uint64_t **columns = NULL
    cdef PyObject **texts = NULL
    cdef Py_ssize_t *room = NULL
    cdef const char *literal = pool
    cdef const char *text
    cdef Py_ssize_t end_len
    cdef const char *end_text = PyUnicode_AsUTF8AndSize(end, &end_len)
    cdef Out o
    cdef int32_t kind, arg, width, flags, t
    cdef uint64_t v
    template, starts, ops = check(template, starts, ops, pool, ints, strs)
    o.text = NULL  # nothing allocated before the check: refused input leaks nothing
    held = []
    try:
        columns = <const uint64_t **>malloc(sizeof(void *) * max(1, n_ints))
        texts = <PyObject **>malloc(sizeof(void *) * max(1, n_strs))
        if columns == NULL or texts == NULL:
            raise MemoryError()
        o.text = new_bytes(NULL, 0)
        o.data, o.size, o.cap = PyBytes_AS_STRING(<object>o.text), 0, 0
        for k in range(n_ints):
            if ints[k] is None:
                columns[k] = NULL
            else:
                column = np.ascontiguousarray(ints[k]).view(np.uint64)
                held.append(column)
                columns[k] = <const uint64_t *>cnp.PyArray_DATA(column)
        for k in range(n_strs):  # borrowed: ``strs`` holds them (check: the read ones lists)
            texts[k] = <PyObject *>strs[k]
        tpl = <const int32_t *>cnp.PyArray_DATA(template)
        first = <const int32_t *>cnp.PyArray_DATA(starts)
        all_ops = <const int32_t *>cnp.PyArray_DATA(ops)
        # each template's most bytes but its texts': one reservation a row
        n_templates = starts.shape[0] - 1
        room = <Py_ssize_t *>malloc(sizeof(Py_ssize_t) * max(1, n_templates))
        if room == NULL:
            raise MemoryError()
        for t in range(n_templates):
            room[t] = end_len
            for k in range(first[t], first[t + 1]):
                op = all_ops + 4 * k
                if op[0] != TEXT:
                    room[t] += most(op[0], op[2])
        grow(&o, rows * 64)
        for r in range(rows):
            t = tpl[r]
            grow(&o, room[t])
            for k in range(first[t], first[t + 1]):
                op = all_ops + 4 * k
                kind, arg, width, flags = op[0], op[1], op[2], op[3]
                if kind == LITERAL:
                    memcpy(o.data + o.size, literal + arg, width)
                    o.size += width
                elif kind == TEXT:
                    text = PyUnicode_AsUTF8AndSize(
                        <object>PyList_GET_ITEM(<object>texts[arg], r), &length)
                    # the text and, after it, the row's reservation again: the ops after
                    # it write unchecked into what the text would otherwise have used up
                    grow(&o, length + room[t])
                    memcpy(o.data + o.size, text, length)
                    o.size += length
                else:
                    v = columns[arg][r]
                    if kind == NUMBER:
                        number(&o, v, width, 0, 0)
                    elif kind == HEX:
                        number(&o, v, width, 1, flags & PREFIX)
                    elif kind == SMALL:
                        if v <= 9:
                            o.data[o.size] = <char>(48 + v)
                            o.size += 1
                        else:
                            number(&o, v, 0, 1, 1)
                    else:
                        put_seconds(&o, <int64_t>v, width)
            memcpy(o.data + o.size, end_text, end_len)
            o.size += end_len
        _PyBytes_Resize(&o.text, o.size)
        return <object>o.text
    finally:
        Py_XDECREF(o.text)
        free(columns)
        free(texts)
        free(room)

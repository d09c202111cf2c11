# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""C engine: the same names as the pure-Python twin (``ibwire.crc._python``), over kernel.c.

Per-packet calls take any C-contiguous buffer without copying; ``verify_batch`` runs the
whole batch in one C call with the GIL released.
"""

from cpython.buffer cimport (
    PyBUF_SIMPLE,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from libc.stdint cimport int8_t, int64_t, uint8_t, uint16_t, uint32_t

cimport numpy as cnp

cnp.import_array()

from ibwire.crc._common import (
    ERROR_NAMES,
    KIND_NAMES,
    LINK_CODES,
    BatchVerdict,
    CrcVerdict,
    IcrcSpan,
    batch_arrays,
    fault,
    link_code,
    no_icrc,
    no_vcrc,
    outside_error,
)

__all__ = [
    "ERROR_NAMES", "KIND_NAMES", "LINK_CODES", "BatchVerdict", "CrcVerdict", "IcrcSpan",
    "crc16", "crc32", "fix", "fix_batch", "icrc", "locate", "vcrc", "verify", "verify_batch",
]


cdef extern from "kernel.h" nogil:
    enum:
        IBW_MAX_MASKS
        IBW_SITE_COUNT

    ctypedef struct ibw_span:
        int64_t start, bth, icrc, vcrc, where
        int kind, error, site, pseudo_lrh, nmask
        int64_t mask_off[8]
        uint8_t mask_or[8]

    ctypedef struct ibw_check:
        int8_t icrc_ok, vcrc_ok
        uint8_t error, kind
        uint32_t icrc_wire, icrc_computed
        uint16_t vcrc_wire, vcrc_computed

    const char *ibw_site_header[]
    const char *ibw_site_field[]

    void ibw_init()
    const char *ibw_crc32_backend()
    int ibw_crc32_set_backend(const char *name)
    uint32_t ibw_crc32(uint32_t crc, const uint8_t *p, size_t n)
    uint16_t ibw_crc16(const uint8_t *p, size_t n)
    int ibw_locate(const uint8_t *p, int64_t n, int link, ibw_span *s)
    uint32_t ibw_icrc_of(const uint8_t *p, const ibw_span *s)
    uint16_t ibw_vcrc_of(const uint8_t *p, const ibw_span *s)
    int ibw_verify(const uint8_t *p, int64_t n, int link, ibw_span *s, ibw_check *c)
    int ibw_fix(uint8_t *p, int64_t n, int link, int placed, ibw_span *s)
    int64_t ibw_check_records(int64_t buflen, const int64_t *offs, const int64_t *lens,
                              int64_t count)
    void ibw_verify_batch(const uint8_t *buf, int64_t buflen, const int64_t *offs,
                          const int64_t *lens, const uint8_t *links, int64_t link_stride,
                          int64_t count, int8_t *icrc_ok, int8_t *vcrc_ok, uint8_t *error,
                          uint8_t *kind)
    void ibw_fix_batch(uint8_t *buf, int64_t buflen, const int64_t *offs, const int64_t *lens,
                       const uint8_t *links, int64_t link_stride, int64_t count,
                       int8_t *was_right)


ibw_init()

SITES = tuple(
    (ibw_site_header[i].decode(), ibw_site_field[i].decode()) for i in range(IBW_SITE_COUNT)
)


def crc32_backend():
    """The CRC-32 code path in use: "vpclmulqdq", "pclmulqdq" or "slice-by-8"."""
    return ibw_crc32_backend().decode()


def set_crc32_backend(name):
    """Forces a CRC-32 code path (tests, benchmarks); False if this CPU lacks it."""
    return bool(ibw_crc32_set_backend(name.encode()))


cdef inline int _link(object link) except -1:
    if link.__class__ is str and link == "ethernet":
        return 0
    return link_code(link)


cdef inline void _acquire(object obj, Py_buffer *view, int flags) except *:
    PyObject_GetBuffer(obj, view, flags)


cdef object _raise(ibw_span *s):
    raise fault(s.error, s.site, s.where)


def crc32(data, value=0):
    """CRC-32 with zlib's parameters (the ICRC CRC); ``value`` continues a previous result."""
    cdef Py_buffer v
    cdef uint32_t r = <uint32_t>(value & 0xFFFFFFFF)
    _acquire(data, &v, PyBUF_SIMPLE)
    if v.len < 65536:
        r = ibw_crc32(r, <const uint8_t *>v.buf, <size_t>v.len)
    else:
        with nogil:
            r = ibw_crc32(r, <const uint8_t *>v.buf, <size_t>v.len)
    PyBuffer_Release(&v)
    return r


def crc16(data):
    """The VCRC CRC-16: poly 0x100B reflected, init 0xFFFF, xorout 0xFFFF."""
    cdef Py_buffer v
    cdef uint16_t r
    _acquire(data, &v, PyBUF_SIMPLE)
    r = ibw_crc16(<const uint8_t *>v.buf, <size_t>v.len)
    PyBuffer_Release(&v)
    return r


def locate(frame, link="ethernet"):
    """Where the ICRC region of ``frame`` is; raises an ibwire error if it has none."""
    cdef Py_buffer v
    cdef ibw_span s
    cdef int code = _link(link)
    _acquire(frame, &v, PyBUF_SIMPLE)
    ibw_locate(<const uint8_t *>v.buf, v.len, code, &s)
    PyBuffer_Release(&v)
    if s.error:
        _raise(&s)
    masks = tuple((s.mask_off[i], s.mask_or[i]) for i in range(s.nmask))
    return IcrcSpan(KIND_NAMES[s.kind], s.start, bool(s.pseudo_lrh), masks, s.bth, s.icrc,
                    s.vcrc)


def icrc(frame, link="ethernet"):
    """The ICRC value of ``frame``; on the wire it is ``value.to_bytes(4, "little")``."""
    cdef Py_buffer v
    cdef ibw_span s
    cdef uint32_t r = 0
    cdef int code = _link(link)
    _acquire(frame, &v, PyBUF_SIMPLE)
    if ibw_locate(<const uint8_t *>v.buf, v.len, code, &s) == 0 and s.icrc >= 0:
        r = ibw_icrc_of(<const uint8_t *>v.buf, &s)
    PyBuffer_Release(&v)
    if s.error:
        _raise(&s)
    if s.icrc < 0:
        raise no_icrc()
    return r


def vcrc(frame, link="infiniband"):
    """The VCRC value of a native InfiniBand frame (LRH .. ICRC); LSB first on the wire."""
    cdef Py_buffer v
    cdef ibw_span s
    cdef uint16_t r = 0
    cdef int code = _link(link)
    _acquire(frame, &v, PyBUF_SIMPLE)
    if ibw_locate(<const uint8_t *>v.buf, v.len, code, &s) == 0 and s.vcrc >= 0:
        r = ibw_vcrc_of(<const uint8_t *>v.buf, &s)
    PyBuffer_Release(&v)
    if s.error:
        _raise(&s)
    if s.vcrc < 0:
        raise no_vcrc()
    return r


def verify(frame, link="ethernet", *, lenient=False):
    """Checks the ICRC (and the VCRC on native IB) against the bytes on the wire; see the
    twin for ``lenient``."""
    cdef Py_buffer v
    cdef ibw_span s
    cdef ibw_check c
    cdef int code = _link(link)
    _acquire(frame, &v, PyBUF_SIMPLE)
    ibw_verify(<const uint8_t *>v.buf, v.len, code, &s, &c)
    PyBuffer_Release(&v)
    if c.error and not (lenient and (s.icrc >= 0 or s.vcrc >= 0)):
        _raise(&s)
    if c.icrc_ok < 0:
        icrc_part = (None, None, None)
    else:
        icrc_part = (c.icrc_ok == 1, c.icrc_wire, c.icrc_computed)
    if c.vcrc_ok < 0:
        return CrcVerdict(icrc_part[0], None, icrc_part[1], icrc_part[2], None, None)
    return CrcVerdict(icrc_part[0], c.vcrc_ok == 1, icrc_part[1], icrc_part[2],
                      c.vcrc_wire, c.vcrc_computed)


def fix(buf, link="ethernet", *, lenient=False):
    """Writes the correct ICRC, and on native IB then the VCRC, into ``buf`` in place; see
    the twin for ``lenient``."""
    cdef Py_buffer v
    cdef ibw_span s
    cdef int code = _link(link)
    cdef int placed = 1 if lenient else 0
    try:
        _acquire(buf, &v, PyBUF_WRITABLE)
    except BufferError:
        raise TypeError("fix() needs a writable buffer such as a bytearray") from None
    ibw_fix(<uint8_t *>v.buf, v.len, code, placed, &s)
    PyBuffer_Release(&v)
    if s.error and not (placed and (s.icrc >= 0 or s.vcrc >= 0)):
        _raise(&s)


def verify_batch(buf, offsets, lengths, links="ethernet"):
    """Verifies many records of one buffer in one C call without the GIL.

    ``offsets``/``lengths`` are int64 arrays; ``links`` is a link name or a uint8 array of
    LINK_CODES. Per-record problems become error codes (ERROR_NAMES), never exceptions; a
    problem that leaves the CRCs placed (see ``verify(lenient=True)``) has their verdicts too.
    """
    cdef Py_buffer v
    cdef cnp.npy_intp n
    cdef int64_t bad, stride
    cdef const int64_t *po
    cdef const int64_t *pl
    cdef const uint8_t *pc
    cdef int8_t *out_icrc
    cdef int8_t *out_vcrc
    cdef uint8_t *out_error
    cdef uint8_t *out_kind
    offs, lens, codes = batch_arrays(offsets, lengths, links)
    n = offs.shape[0]
    stride = 1 if codes.shape[0] == n else 0
    icrc_ok = cnp.PyArray_EMPTY(1, &n, cnp.NPY_INT8, 0)
    vcrc_ok = cnp.PyArray_EMPTY(1, &n, cnp.NPY_INT8, 0)
    error = cnp.PyArray_EMPTY(1, &n, cnp.NPY_UINT8, 0)
    kind = cnp.PyArray_EMPTY(1, &n, cnp.NPY_UINT8, 0)
    po = <const int64_t *>cnp.PyArray_DATA(offs)
    pl = <const int64_t *>cnp.PyArray_DATA(lens)
    pc = <const uint8_t *>cnp.PyArray_DATA(codes)
    out_icrc = <int8_t *>cnp.PyArray_DATA(icrc_ok)
    out_vcrc = <int8_t *>cnp.PyArray_DATA(vcrc_ok)
    out_error = <uint8_t *>cnp.PyArray_DATA(error)
    out_kind = <uint8_t *>cnp.PyArray_DATA(kind)
    _acquire(buf, &v, PyBUF_SIMPLE)
    try:
        bad = ibw_check_records(v.len, po, pl, n)
        if bad >= 0:
            raise outside_error(bad, po[bad], pl[bad], v.len)
        with nogil:
            ibw_verify_batch(<const uint8_t *>v.buf, v.len, po, pl, pc, stride, n,
                             out_icrc, out_vcrc, out_error, out_kind)
    finally:
        PyBuffer_Release(&v)
    return BatchVerdict(icrc_ok, vcrc_ok, error, kind)


def fix_batch(buf, offsets, lengths, links="ethernet"):
    """Writes the ICRC (and the VCRC after it) of many records of one writable buffer in
    place, in one C call without the GIL; see the twin for the result."""
    cdef Py_buffer v
    cdef cnp.npy_intp n
    cdef int64_t bad, stride
    cdef const int64_t *po
    cdef const int64_t *pl
    cdef const uint8_t *pc
    cdef int8_t *out
    offs, lens, codes = batch_arrays(offsets, lengths, links)
    n = offs.shape[0]
    stride = 1 if codes.shape[0] == n else 0
    was_right = cnp.PyArray_EMPTY(1, &n, cnp.NPY_INT8, 0)
    po = <const int64_t *>cnp.PyArray_DATA(offs)
    pl = <const int64_t *>cnp.PyArray_DATA(lens)
    pc = <const uint8_t *>cnp.PyArray_DATA(codes)
    out = <int8_t *>cnp.PyArray_DATA(was_right)
    try:
        _acquire(buf, &v, PyBUF_WRITABLE)
    except BufferError:
        raise TypeError("fix_batch() needs a writable buffer such as a bytearray") from None
    try:
        bad = ibw_check_records(v.len, po, pl, n)
        if bad >= 0:
            raise outside_error(bad, po[bad], pl[bad], v.len)
        with nogil:
            ibw_fix_batch(<uint8_t *>v.buf, v.len, po, pl, pc, stride, n, out)
    finally:
        PyBuffer_Release(&v)
    return was_right

# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""C walk of the pcap layer: the same names as the pure-Python twin (``ibwire.pcap._python``),
over pcapng_walk.c. ``pcapng_epbs`` walks a run of common-case pcapng Enhanced Packet Blocks
with the GIL released; the index and the scanner's windows take it through
``PcapngWalker.bulk`` (``ibwire.pcap.index._Columns.epb_hook``).
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

cimport numpy as cnp

import numpy as np

cnp.import_array()

from ibwire.pcap.pcapng import check_clock

__all__ = ["erf_block", "pcapng_epbs"]


cdef extern from "pcapng_walk.h" nogil:
    ctypedef struct ibw_pcapng_iface:
        uint64_t param
        int64_t offset_s
        uint32_t snaplen
        uint8_t kind
        uint8_t direct
    int64_t ibw_pcapng_epbs(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                            uint32_t max_len, const ibw_pcapng_iface *ifaces, int64_t n_iface,
                            int64_t cap, int64_t *offs, int64_t *caplen, uint32_t *orig_len,
                            int64_t *ts, uint32_t *iface, int64_t *next)


def pcapng_epbs(buffer, Py_ssize_t pos, Py_ssize_t end, bint swapped, uint32_t max_len,
                interfaces, Py_ssize_t cap):
    """The run of common-case pcapng EPBs at ``buffer[pos:end]`` (see pcapng_walk.h): frame offsets
    int64, caplens int64, orig lengths uint32, timestamps int64 ns, interface ids uint32, and
    where the run stopped. ``interfaces``: per interface (kind, param, offset_s, snaplen,
    direct), as ``ibwire.pcap.pcapng.timestamp_rule`` and the link table give them."""
    cdef Py_buffer view
    cdef Py_ssize_t n = len(interfaces), i
    cdef int64_t next_pos = pos, rows = 0
    cdef int64_t *p_offs
    cdef int64_t *p_caplen
    cdef uint32_t *p_orig
    cdef int64_t *p_ts
    cdef uint32_t *p_iface
    cdef ibw_pcapng_iface *ifaces = <ibw_pcapng_iface *>malloc(
        sizeof(ibw_pcapng_iface) * max(1, n))
    if ifaces == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            kind, param, offset_s, snaplen, direct = interfaces[i]
            check_clock(kind, param)
            ifaces[i].kind, ifaces[i].param, ifaces[i].offset_s = kind, param, offset_s
            ifaces[i].snaplen, ifaces[i].direct = snaplen, direct
        PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
        try:
            if not 0 <= pos <= end <= view.len:
                raise ValueError(f"EPB window {pos}..{end} outside the {view.len}-byte buffer")
            cap = max(0, min(cap, (end - pos) // 32))
            offs, caplen, orig, ts, iface = (np.empty(cap, np.int64), np.empty(cap, np.int64),
                                             np.empty(cap, np.uint32), np.empty(cap, np.int64),
                                             np.empty(cap, np.uint32))
            p_offs = <int64_t *>cnp.PyArray_DATA(offs)
            p_caplen = <int64_t *>cnp.PyArray_DATA(caplen)
            p_orig = <uint32_t *>cnp.PyArray_DATA(orig)
            p_ts = <int64_t *>cnp.PyArray_DATA(ts)
            p_iface = <uint32_t *>cnp.PyArray_DATA(iface)
            with nogil:
                rows = ibw_pcapng_epbs(<const uint8_t *>view.buf, pos, end, swapped, max_len,
                                       ifaces, n, cap, p_offs, p_caplen, p_orig, p_ts, p_iface,
                                       &next_pos)
        finally:
            PyBuffer_Release(&view)
    finally:
        free(ifaces)
    return offs[:rows], caplen[:rows], orig[:rows], ts[:rows], iface[:rows], next_pos


def erf_block(const uint8_t[::1] octets, int64_t[::1] offsets, uint32_t[::1] lengths,
              int64_t[::1] timestamps, uint8_t[::1] codes, uint32_t[::1] wire,
              const uint8_t[::1] type_codes, const int64_t[::1] pads):
    """See the twin: the ERF records of a block of rows moved to their frames in place, in
    one C loop; the positions of the rows left to the per-record locator."""
    cdef Py_ssize_t n = offsets.shape[0], i, kept = 0, size = octets.shape[0]
    cdef int64_t start, held, header_len, rlen, wlen, declared, frame_len
    cdef uint64_t stamp, fraction
    cdef uint64_t low = 0xFFFFFFFF, billion = 1000000000, half = 0x80000000
    cdef const uint8_t *head
    cdef uint8_t kind
    if lengths.shape[0] != n or timestamps.shape[0] != n or codes.shape[0] != n \
            or wire.shape[0] != n or type_codes.shape[0] != 128 or pads.shape[0] != 128:
        raise ValueError("erf_block: columns of different lengths, or tables not of 128")
    left = np.empty(n, np.int64)
    cdef int64_t[::1] out = left
    with nogil:
        for i in range(n):
            start = offsets[i]
            held = lengths[i]
            if held < 16 or start < 0 or start + 16 > size:
                out[kept] = i
                kept += 1
                continue
            head = &octets[start]
            kind = head[8] & 0x7F
            header_len = 16 + pads[kind]
            rlen = (<int64_t>head[10] << 8) | head[11]
            wlen = (<int64_t>head[14] << 8) | head[15]
            declared = min(rlen - header_len, wlen)
            if head[8] & 0x80 or rlen < header_len or held < header_len \
                    or held - header_len < declared:
                out[kept] = i
                kept += 1
                continue
            frame_len = min(min(held, rlen) - header_len, wlen)
            stamp = (<uint64_t>head[0] | <uint64_t>head[1] << 8 | <uint64_t>head[2] << 16
                     | <uint64_t>head[3] << 24 | <uint64_t>head[4] << 32
                     | <uint64_t>head[5] << 40 | <uint64_t>head[6] << 48
                     | <uint64_t>head[7] << 56)
            fraction = ((stamp & low) * billion + half) >> 32   # 32.32 seconds, rounded
            timestamps[i] = <int64_t>(stamp >> 32) * 1000000000 + <int64_t>fraction
            codes[i] = type_codes[kind]
            wire[i] = <uint32_t>wlen
            offsets[i] = start + header_len
            lengths[i] = <uint32_t>frame_len
    return left[:kept]

# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""C scanner: the same names as the pure-Python twin (``ibwire.scan._python``), over scan.c.

``scan_frames`` fills every column in one C call with the GIL released.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

cimport numpy as cnp

import numpy as np

cnp.import_array()

from ibwire.scan import program as _program
from ibwire.scan._frames import frame_arrays, wire_arrays

__all__ = ["pcap_records", "scan_frames", "scan_pcap"]


include "_layout.pxi"


cdef extern from "scan.h" nogil:
    void ibw_scan(const uint8_t *buf, int64_t buflen, const int64_t *offs, const int64_t *lens,
                  const int64_t *wires, const uint8_t *links, int64_t count,
                  const ibw_scan_prog *prog, const ibw_scan_out *out)
    int64_t ibw_pcap_records(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                             int64_t fraction_ns, uint32_t max_caplen, int64_t cap,
                             int64_t *offs, int64_t *caplen, uint32_t *orig_len, int64_t *ts,
                             int64_t *next, int *status)
    int64_t ibw_scan_pcap(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                          int64_t fraction_ns, uint32_t max_caplen, int64_t cap, int link,
                          const ibw_scan_prog *prog, const ibw_scan_out *out, int64_t *offs,
                          int64_t *caplen, uint32_t *orig_len, int64_t *ts, int64_t *next,
                          int *status, int64_t release_every)


ibw_init()
_columns = _program.columns()


cdef class _Compiled:
    """The C program for one selection of columns: only their instructions are run."""

    cdef ibw_scan_prog prog
    cdef ibw_scan_instr *instr

    def __cinit__(self, tuple selected, bint verdicts):
        fill_layout(&self.prog)
        set_extents(&self.prog, _program.view_extents())
        self.prog.verdicts = verdicts
        instructions = [_program.instructions()[i] for i in selected]
        self.instr = <ibw_scan_instr *>malloc(sizeof(ibw_scan_instr) * max(1, len(instructions)))
        if self.instr == NULL:
            raise MemoryError()
        for i, ins in enumerate(instructions):  # in slot order, as columns() lists them
            if self.prog.slot_count[ins.slot] == 0:
                self.prog.slot_first[ins.slot] = i
            self.prog.slot_count[ins.slot] += 1
            self.instr[i].mask = ins.mask
            self.instr[i].column = ins.column
            self.instr[i].at = ins.at
            self.instr[i].load = ins.load
            self.instr[i].shift = ins.shift
            self.instr[i].width = ins.width
            self.instr[i].pad_ = 0
        self.prog.instr = self.instr

    def __dealloc__(self):
        free(self.instr)


_compiled: dict = {}


cdef void *_data(dict cols, str name):
    return cnp.PyArray_DATA(cols[name])


cdef _Compiled _program_for(tuple selected, bint verdicts):
    compiled = _compiled.get((selected, verdicts))
    if compiled is None:
        compiled = _compiled[selected, verdicts] = _Compiled(selected, verdicts)
    return compiled


cdef void **_outputs(dict cols, tuple selected, ibw_scan_out *out) except NULL:
    """Point ``out`` at the columns; returns the column pointer array, to free."""
    # per call, not global: another thread may be scanning while this one has no GIL
    cdef void **pointers = <void **>malloc(sizeof(void *) * max(1, len(_columns)))
    cdef Py_ssize_t i
    if pointers == NULL:
        raise MemoryError()
    for i in selected:
        pointers[i] = cnp.PyArray_DATA(cols[_columns[i].name])
    out.cols = pointers
    out.encapsulation = <uint8_t *>_data(cols, "encapsulation")
    out.headers = <uint32_t *>_data(cols, "headers")
    out.vlan_count = <uint8_t *>_data(cols, "vlan.count")
    out.ecn = <int8_t *>_data(cols, "ecn")
    out.off_network = <int32_t *>_data(cols, "offset.network")
    out.off_bth = <int32_t *>_data(cols, "offset.bth")
    out.off_payload = <int32_t *>_data(cols, "offset.payload")
    out.payload_len = <int32_t *>_data(cols, "payload.length")
    out.off_icrc = <int32_t *>_data(cols, "offset.icrc")
    out.off_vcrc = <int32_t *>_data(cols, "offset.vcrc")
    out.icrc = <uint32_t *>_data(cols, "icrc")
    out.vcrc = <uint16_t *>_data(cols, "vcrc")
    out.icrc_ok = <int8_t *>_data(cols, "icrc_ok")
    out.vcrc_ok = <int8_t *>_data(cols, "vcrc_ok")
    out.error = <uint8_t *>_data(cols, "error")
    out.site = <uint8_t *>_data(cols, "error.site")
    out.error_off = <int32_t *>_data(cols, "error.offset")
    out.cut = <uint8_t *>_data(cols, "cut")
    return pointers


def scan_frames(buffer, offsets, lengths, links, fields=None, wires=None):
    """Columns (see ``ibwire.scan.program``) for the frames ``buffer[offsets[i]:][:lengths[i]]``
    starting at ``links[i]`` (``ibwire.crc.LINK_CODES``, 255: not a link ibwire reads).
    Header fields (``fields``: only these keys or headers, see ``program.select``), offsets,
    CRC verdicts and errors; not record, timestamp or link type. ``wires``: each frame's
    length on the wire where a snap length may have cut it (None: none was cut)."""
    cdef cnp.ndarray offs, lens, codes, wire_lens
    offs, lens, codes = frame_arrays(offsets, lengths, links)
    wire_lens = wire_arrays(wires, lens)
    cdef int64_t count = offs.shape[0]
    selected = _program.select(fields)
    cdef _Compiled program = _program_for(selected, _program.verdicts(fields))
    cols = _program.empty_columns(count, selected)
    cdef ibw_scan_out out
    cdef Py_buffer view
    cdef void **pointers = _outputs(cols, selected, &out)
    cdef const int64_t *p_offs = <const int64_t *>cnp.PyArray_DATA(offs)
    cdef const int64_t *p_lens = <const int64_t *>cnp.PyArray_DATA(lens)
    cdef const uint8_t *p_codes = <const uint8_t *>cnp.PyArray_DATA(codes)
    cdef const int64_t *p_wires = <const int64_t *>cnp.PyArray_DATA(wire_lens)
    try:
        PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
        try:
            with nogil:
                ibw_scan(<const uint8_t *>view.buf, view.len, p_offs, p_lens, p_wires, p_codes,
                         count, &program.prog, &out)
        finally:
            PyBuffer_Release(&view)
    finally:
        free(pointers)
    cols["frame.offset"][:] = offs
    cols["frame.len"][:] = lens
    cols["link"][:] = codes
    return cols


def _record_arrays(Py_ssize_t cap):
    return (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.uint32),
            np.empty(cap, np.int64))


def pcap_records(buffer, Py_ssize_t pos, Py_ssize_t end, bint swapped, int64_t fraction_ns,
                 uint32_t max_caplen, Py_ssize_t cap):
    """Classic pcap records in ``buffer[pos:end]``: (frame offsets int64, caplens int64, orig
    lengths uint32, timestamps int64 ns, where the walk stopped, status) with status 0 end of
    data or ``cap`` rows, 1 absurd caplen at the stop, 2 a record not all in the buffer."""
    return _walk(buffer, pos, end, swapped, fraction_ns, max_caplen, cap, -1, None)[:6]


def scan_pcap(buffer, Py_ssize_t pos, Py_ssize_t end, bint swapped, int64_t fraction_ns,
              uint32_t max_caplen, Py_ssize_t cap, int link, fields=None,
              int64_t release_every=0):
    """``pcap_records`` and ``scan_frames`` in one pass over the records (frames starting at
    ``link``): the same six values, then the columns. ``release_every`` > 0: ``buffer`` is
    a read-only map of a file, whose pages the walk lets go of (``madvise``
    MADV_DONTNEED) every that many bytes it passes: they stay in the page cache, and a
    later read of them faults them in again."""
    return _walk(buffer, pos, end, swapped, fraction_ns, max_caplen, cap, link, fields,
                 release_every)


def _walk(buffer, Py_ssize_t pos, Py_ssize_t end, bint swapped, int64_t fraction_ns,
          uint32_t max_caplen, Py_ssize_t cap, int link, fields, int64_t release_every=0):
    cdef Py_buffer view
    cdef int64_t next_pos = pos, rows = 0
    cdef int status = 0
    cdef ibw_scan_out out
    cdef void **pointers = NULL
    cdef _Compiled program = None
    cdef int64_t *p_offs
    cdef int64_t *p_caplen
    cdef uint32_t *p_orig
    cdef int64_t *p_ts
    cols = None
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    try:
        if not 0 <= pos <= end <= view.len:
            raise ValueError(f"records window {pos}..{end} outside the {view.len}-byte buffer")
        cap = max(0, min(cap, (end - pos) // 16))
        offs, caplen, orig, ts = _record_arrays(cap)
        p_offs = <int64_t *>cnp.PyArray_DATA(offs)
        p_caplen = <int64_t *>cnp.PyArray_DATA(caplen)
        p_orig = <uint32_t *>cnp.PyArray_DATA(orig)
        p_ts = <int64_t *>cnp.PyArray_DATA(ts)
        if link < 0:
            with nogil:
                rows = ibw_pcap_records(<const uint8_t *>view.buf, pos, end, swapped,
                                        fraction_ns, max_caplen, cap, p_offs, p_caplen, p_orig,
                                        p_ts, &next_pos, &status)
            return offs[:rows], caplen[:rows], orig[:rows], ts[:rows], next_pos, status
        selected = _program.select(fields)
        program = _program_for(selected, _program.verdicts(fields))
        cols = _program.empty_columns(cap, selected)
        pointers = _outputs(cols, selected, &out)
        with nogil:
            rows = ibw_scan_pcap(<const uint8_t *>view.buf, pos, end, swapped, fraction_ns,
                                 max_caplen, cap, link, &program.prog, &out, p_offs, p_caplen,
                                 p_orig, p_ts, &next_pos, &status, release_every)
    finally:
        PyBuffer_Release(&view)
        free(pointers)
    cols = {name: col[:rows] for name, col in cols.items()}
    cols["frame.offset"][:] = offs[:rows]
    cols["frame.len"][:] = caplen[:rows]
    cols["link"][:] = link
    return offs[:rows], caplen[:rows], orig[:rows], ts[:rows], next_pos, status, cols

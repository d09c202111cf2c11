# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""C counting scan of classic pcap records (``ibwire check``): the same names as the
pure-Python twin ``ibwire.scan._tally_python``. Imports neither numpy nor Construct."""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdlib cimport free, malloc

include "_layout.pxi"

__all__ = ["TALLY", "check_pcap", "pcap_sync"]


cdef extern from "scan.h" nogil:
    ctypedef struct ibw_tally:
        int64_t records, ib, other, failed, icrc_bad, vcrc_bad, errors

    int64_t ibw_check_pcap(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                           uint32_t max_caplen, uint32_t snaplen, int link,
                           const ibw_scan_prog *prog, ibw_tally *tally, int64_t *flagged,
                           int64_t cap_flagged, int64_t *next, int *status)
    int64_t ibw_pcap_sync(const uint8_t *buf, int64_t start, int64_t end, int swapped,
                          uint32_t max_caplen, uint32_t fraction_limit, int depth,
                          int64_t search)


TALLY = ("records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors")
"""The counts of ``check_pcap``, in order."""

ibw_init()
cdef ibw_scan_prog _prog
fill_layout(&_prog)


cdef Py_buffer _view(buffer, Py_ssize_t pos, Py_ssize_t end) except *:
    cdef Py_buffer view
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    if not 0 <= pos <= end <= view.len:
        PyBuffer_Release(&view)
        raise ValueError(f"records window {pos}..{end} outside the {view.len}-byte buffer")
    return view


def check_pcap(buffer, Py_ssize_t pos, Py_ssize_t end, bint swapped, uint32_t max_caplen,
               uint32_t snaplen, int link, Py_ssize_t cap_flagged):
    """Scan and count the classic pcap records of ``buffer[pos:end]`` (frames starting at
    ``link``, 255: not a link ibwire reads), verdicts only, without the GIL: (counts in
    ``TALLY`` order, the records to look at again as (record from the first one walked here,
    frame offset): failed, or caplen above ``snaplen`` (0: none) or orig_len; where the walk
    stopped; status as ``pcap_records``). The walk stops after the ``cap_flagged``-th record
    listed."""
    cdef ibw_tally tally
    cdef int64_t next_pos = pos, listed = 0
    cdef int status = 0
    cdef Py_buffer view = _view(buffer, pos, end)
    cdef int64_t *flagged = <int64_t *>malloc(2 * sizeof(int64_t) * max(1, cap_flagged))
    tally.records = tally.ib = tally.other = tally.failed = 0
    tally.icrc_bad = tally.vcrc_bad = tally.errors = 0
    try:
        if flagged == NULL:
            raise MemoryError()
        with nogil:
            listed = ibw_check_pcap(<const uint8_t *>view.buf, pos, end, swapped, max_caplen,
                                    snaplen, link, &_prog, &tally, flagged, max(1, cap_flagged),
                                    &next_pos, &status)
        counts = (tally.records, tally.ib, tally.other, tally.failed, tally.icrc_bad,
                  tally.vcrc_bad, tally.errors)
        return counts, [(flagged[2 * i], flagged[2 * i + 1]) for i in range(listed)], next_pos, status
    finally:
        PyBuffer_Release(&view)
        free(flagged)


def pcap_sync(buffer, Py_ssize_t start, Py_ssize_t end, bint swapped, uint32_t max_caplen,
              uint32_t fraction_limit, int depth, Py_ssize_t search):
    """Where ``depth`` plausible whole records in a row start in ``buffer[start:start +
    search]`` (all within ``end``), -1 if nowhere: a guess, to be confirmed by a walk."""
    cdef int64_t found
    cdef Py_buffer view = _view(buffer, start, end)
    try:
        with nogil:
            found = ibw_pcap_sync(<const uint8_t *>view.buf, start, end, swapped, max_caplen,
                                  fraction_limit, depth, search)
        return found
    finally:
        PyBuffer_Release(&view)

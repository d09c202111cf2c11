# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""C counting scan of classic pcap records and pcapng Enhanced Packet Blocks (``ibwire
check``): the same names as the pure-Python twin ``ibwire.scan._tally_python``. Imports
neither numpy nor Construct."""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdlib cimport free, malloc

include "_layout.pxi"

from ibwire.pcap.linktypes import sll_link_codes

__all__ = ["HEADERS", "TALLY", "check_pcap", "check_pcapng", "pcap_sync", "pcapng_sync"]


cdef extern from "scan.h" nogil:
    ctypedef struct ibw_tally:
        int64_t records, ib, other, failed, icrc_bad, vcrc_bad, errors, cut, cut_kept

    ctypedef struct ibw_record_link:
        int32_t header, code

    ctypedef struct ibw_sll_links:
        const uint32_t *keys
        const uint8_t *codes
        int64_t count

    ctypedef struct ibw_count_iface:
        uint32_t snaplen
        int32_t header, code

    int64_t ibw_check_pcap(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                           uint32_t max_caplen, uint32_t snaplen, ibw_record_link link,
                           const ibw_sll_links *sll, const ibw_scan_prog *prog,
                           ibw_tally *tally, int64_t *flagged, int64_t cap_flagged,
                           int64_t *next, int *status)
    int64_t ibw_check_pcapng(const uint8_t *buf, int64_t pos, int64_t end, int swapped,
                             uint32_t max_len, const ibw_count_iface *ifaces, int64_t n_iface,
                             const ibw_sll_links *sll, const ibw_scan_prog *prog,
                             ibw_tally *tally, int64_t *flagged, int64_t cap_flagged,
                             int64_t *next, int *status)
    int64_t ibw_pcap_sync(const uint8_t *buf, int64_t start, int64_t end, int swapped,
                          uint32_t max_caplen, uint32_t fraction_limit, int depth,
                          int64_t search)
    int64_t ibw_pcapng_sync(const uint8_t *buf, int64_t start, int64_t end, int swapped,
                            uint32_t max_len, int depth, int64_t search)


TALLY = ("records", "ib", "other", "failed", "icrc_bad", "vcrc_bad", "errors", "cut",
         "cut_kept")
"""The counts of ``check_pcap``, in order."""
HEADERS = (None, "sll", "sll2")
"""Where a record's frame starts (``header`` of ``check_pcap`` and of pcapng interfaces): at
the record, or after a Linux cooked header (``ibwire.pcap.linktypes.header_kind``)."""

ibw_init()
cdef ibw_scan_prog _prog
fill_layout(&_prog)

_sll_pairs = sorted(sll_link_codes().items())
cdef uint32_t _sll_keys[64]
cdef uint8_t _sll_codes[64]
if len(_sll_pairs) > 64:
    raise ImportError(f"{len(_sll_pairs)} Linux cooked header links, room for 64")
for _i, ((_arphrd, _protocol), _code) in enumerate(_sll_pairs):
    _sll_keys[_i], _sll_codes[_i] = _arphrd << 16 | _protocol, _code
cdef ibw_sll_links _sll
_sll.keys, _sll.codes, _sll.count = _sll_keys, _sll_codes, len(_sll_pairs)


cdef tuple _counts(ibw_tally *tally):
    return (tally.records, tally.ib, tally.other, tally.failed, tally.icrc_bad, tally.vcrc_bad,
            tally.errors, tally.cut, tally.cut_kept)


cdef void _zero(ibw_tally *tally) noexcept nogil:
    tally.records = tally.ib = tally.other = tally.failed = 0
    tally.icrc_bad = tally.vcrc_bad = tally.errors = tally.cut = tally.cut_kept = 0


cdef Py_buffer _view(buffer, Py_ssize_t pos, Py_ssize_t end) except *:
    cdef Py_buffer view
    PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE)
    if not 0 <= pos <= end <= view.len:
        PyBuffer_Release(&view)
        raise ValueError(f"records window {pos}..{end} outside the {view.len}-byte buffer")
    return view


def check_pcap(buffer, Py_ssize_t pos, Py_ssize_t end, bint swapped, uint32_t max_caplen,
               uint32_t snaplen, int link, int header, Py_ssize_t cap_flagged):
    """Scan and count the classic pcap records of ``buffer[pos:end]``, verdicts only, without
    the GIL; frames start at the record, at ``link`` (255: not a link ibwire reads), or after
    the Linux cooked header ``HEADERS[header]``. Returns (counts in ``TALLY`` order, the
    records to look at again as (record from the first one walked here, offset of its data):
    failed, or caplen above ``snaplen`` (0: none) or orig_len; where the walk stopped; status
    as ``pcap_records``). The walk stops after the ``cap_flagged``-th record listed."""
    cdef ibw_tally tally
    cdef ibw_record_link frames
    cdef int64_t next_pos = pos, listed = 0
    cdef int status = 0
    cdef Py_buffer view
    cdef int64_t *flagged
    if not 0 <= header < len(HEADERS):
        raise ValueError(f"no record header {header}")
    frames.header, frames.code = header, link
    view = _view(buffer, pos, end)
    flagged = <int64_t *>malloc(2 * sizeof(int64_t) * max(1, cap_flagged))
    _zero(&tally)
    try:
        if flagged == NULL:
            raise MemoryError()
        with nogil:
            listed = ibw_check_pcap(<const uint8_t *>view.buf, pos, end, swapped, max_caplen,
                                    snaplen, frames, &_sll, &_prog, &tally, flagged,
                                    max(1, cap_flagged), &next_pos, &status)
        return (_counts(&tally), [(flagged[2 * i], flagged[2 * i + 1]) for i in range(listed)],
                next_pos, status)
    finally:
        PyBuffer_Release(&view)
        free(flagged)


def check_pcapng(buffer, Py_ssize_t pos, Py_ssize_t end, bint swapped, uint32_t max_len,
                 interfaces, Py_ssize_t cap_flagged):
    """``check_pcap`` over the run of plain pcapng Enhanced Packet Blocks at
    ``buffer[pos:end]`` (see scan.h); ``interfaces``: per interface of the section (snaplen,
    link, header), header -1 for one whose packets are not counted here. Returns (counts,
    failed records as (record from the first one walked here, block offset), where the run
    stopped, status: 0 a block it does not take or the end, 1 paused after the
    ``cap_flagged``-th record listed, 2 the data may end inside the block there)."""
    cdef ibw_tally tally
    cdef int64_t next_pos = pos, listed = 0
    cdef int status = 0
    cdef Py_ssize_t n = len(interfaces), i
    cdef Py_buffer view
    cdef int64_t *flagged = NULL
    cdef ibw_count_iface *ifaces = <ibw_count_iface *>malloc(sizeof(ibw_count_iface) * max(1, n))
    if ifaces == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            snaplen, link, header = interfaces[i]
            if not -1 <= header < len(HEADERS):
                raise ValueError(f"no record header {header}")
            ifaces[i].snaplen, ifaces[i].code, ifaces[i].header = snaplen, link, header
        view = _view(buffer, pos, end)
        try:
            flagged = <int64_t *>malloc(2 * sizeof(int64_t) * max(1, cap_flagged))
            if flagged == NULL:
                raise MemoryError()
            _zero(&tally)
            with nogil:
                listed = ibw_check_pcapng(<const uint8_t *>view.buf, pos, end, swapped, max_len,
                                          ifaces, n, &_sll, &_prog, &tally, flagged,
                                          max(1, cap_flagged), &next_pos, &status)
            return (_counts(&tally),
                    [(flagged[2 * i], flagged[2 * i + 1]) for i in range(listed)], next_pos,
                    status)
        finally:
            PyBuffer_Release(&view)
    finally:
        free(ifaces)
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


def pcapng_sync(buffer, Py_ssize_t start, Py_ssize_t end, bint swapped, uint32_t max_len,
                int depth, Py_ssize_t search):
    """Where ``depth`` Enhanced Packet Blocks in a row start, at every 4th byte of
    ``buffer[start:start + search]`` (all within ``end``), -1 if nowhere: a guess, to be
    confirmed by a walk."""
    cdef int64_t found
    cdef Py_buffer view = _view(buffer, start, end)
    try:
        with nogil:
            found = ibw_pcapng_sync(<const uint8_t *>view.buf, start, end, swapped, max_len,
                                    depth, search)
        return found
    finally:
        PyBuffer_Release(&view)

# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""C twin of ``ibwire.rewrite.vector``: :func:`edit_frames` and :func:`record_headers` with
the same arguments and the same results, byte for byte, in one pass over each frame.

Where the numpy twin applies each edit to every frame of the window in turn, this walks each
frame once: Ethernet MACs and VLAN tags, the IPv4 or IPv6 header (class, TTL/hop limit, flow
label, address maps), the TCP/UDP ports, the BTH and DETH of RoCE frames, the ICRC (and
VCRC) through the CRC engine's kernel (``ibwire/crc/kernel.c``, linked in) where a covered
field changed or it was bad, then the TCP/UDP checksum (RFC 768/793, RFC 8200 §8.1: it
covers the ICRC) and the IPv4 header checksum (RFC 791, RFC 1071). Frames it does not
handle are marked ``fallback`` exactly where the numpy twin marks them.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

cimport numpy as cnp

import numpy as np

cnp.import_array()

from ibwire.rewrite.edit import SOURCE_QP_AT
from ibwire.rewrite.vector import FIELDS, LABELS, PAD, FrameResults, batchable

__all__ = ["FIELDS", "LABELS", "PAD", "FrameResults", "batchable", "edit_frames",
           "record_headers"]


cdef extern from "kernel.h" nogil:
    ctypedef struct ibw_span:
        int64_t icrc, vcrc
        int error
    ctypedef struct ibw_check:
        int8_t icrc_ok
        uint8_t error
    void ibw_init()
    int ibw_locate(const uint8_t *p, int64_t n, int link, ibw_span *s)
    uint32_t ibw_icrc_of(const uint8_t *p, const ibw_span *s)
    uint16_t ibw_vcrc_of(const uint8_t *p, const ibw_span *s)
    int ibw_verify(const uint8_t *p, int64_t n, int link, ibw_span *s, ibw_check *c)

ibw_init()

# Bits of ``changed``, in vector.FIELDS order.
cdef enum:
    ETH_DST = 1 << 0
    ETH_SRC = 1 << 1
    IP_TOS = 1 << 2
    IP_TTL = 1 << 3
    V6_TCF = 1 << 4
    V6_HLIM = 1 << 5
    IP_SRC = 1 << 6
    IP_DST = 1 << 7
    L4_SPORT = 1 << 8
    L4_DPORT = 1 << 9
    BTH_PKEY = 1 << 10
    BTH_PSN = 1 << 11
    BTH_DQPN = 1 << 12
    DETH_SQPN = 1 << 13
    PORT_BITS = L4_SPORT | L4_DPORT
    L4_BITS = IP_SRC | IP_DST | PORT_BITS
    COVERED = L4_BITS | BTH_PKEY | BTH_PSN | BTH_DQPN | DETH_SQPN
    # the fields the ICRC covers; the others are outside it (MACs) or masked in it (IPv4 TOS
    # and TTL, IPv6 traffic class, flow label and hop limit: IBA 1.4 §7.8.1)

# ICRC labels (vector.LABELS).
cdef enum:
    NONE = 0
    KEPT = 1
    RECOMPUTED = 2
    BAD_FIXED = 3
    BAD_KEPT = 4

cdef enum:
    TTL_NONE = 0
    TTL_SET = 1
    TTL_UP = 2
    TTL_DOWN = 3


cdef struct Plan:
    int has_dmac, has_smac
    uint8_t dmac[6]
    uint8_t smac[6]
    int class4, class6      # any of --tos/--dscp/--ecn; of --tclass/--flowlabel/--dscp/--ecn
    int tos, tclass, dscp, ecn  # -1: not given
    int64_t flowlabel
    int ttl_mode, ttl_value
    # address maps: v4 rows (mask, net, new net, host mask) as uint64; v6 rows of 8 halves
    const uint64_t *src4
    const uint64_t *dst4
    const uint64_t *pnat4
    const uint64_t *src6
    const uint64_t *dst6
    const uint64_t *pnat6
    int nsrc4, ndst4, npnat4, nsrc6, ndst6, npnat6
    int src_any, dst_any    # the numpy twin skips an address whose maps and --pnat are empty
    const int64_t *ports    # (low, high, new) rows
    int nports
    const int64_t *qp_keys
    const int64_t *qp_values
    int nqp
    int64_t pkey            # -1: not given
    uint32_t psn_offset
    int64_t mtu_trunc       # -1: not given
    const uint8_t *sqpn_at  # opcode -> offset of DETH's source QP from the BTH (0: none)
    int base_fix, keep_bad, dscp_or_ecn, bth_edits


include "_kernel_bytes.pxi"
include "_kernel_plan.pxi"
include "_kernel_icrc.pxi"


cdef void edit_one(const Plan *o, uint8_t *p, int64_t n, int link, int error, int icrc_ok,
                   int64_t bth, int64_t icrc_at, uint32_t *changed_out, uint8_t *label_out,
                   uint8_t *edited_out, uint8_t *fallback_out) noexcept nogil:
    cdef uint32_t changed = 0, old, nv, etype, first, tclass, total, frag, dq, opcode
    cdef int touched = 0, fallback = link == 1, label = NONE, version = 0, tcp
    cdef int64_t l3 = -1, at, ihl = 0, l4 = 0, l4_len = 0, where, proto = -1
    cdef int fix_ip, fix_l4, roce, right
    cdef uint8_t *q
    cdef uint8_t *h
    cdef uint64_t total_sum
    cdef ibw_span span
    cdef ibw_check check
    cdef uint8_t was_ip[40]   # the covered fields as read (for the ICRC by linearity)
    cdef uint8_t was_bth[24]   # BTH, RDETH, DETH (RD's source QP ends at byte 24)
    cdef int64_t sqpn = 0
    # Ethernet (edit._link)
    if link == 0 and n >= 14:
        if o.has_dmac and memcmp(p, o.dmac, 6) != 0:
            memcpy(p, o.dmac, 6)
            changed |= ETH_DST
        if o.has_smac and memcmp(p + 6, o.smac, 6) != 0:
            memcpy(p + 6, o.smac, 6)
            changed |= ETH_SRC
        at = 12
        etype = be16(p + 12)
        while (etype == 0x8100 or etype == 0x88A8) and n >= at + 6:
            at += 4
            etype = be16(p + at)
        if etype == 0x0800 or etype == 0x86DD:
            l3 = at + 2
    elif link == 2:
        l3 = 0
    # IP (edit._ip)
    if l3 >= 0 and l3 + 20 <= n:
        q = p + l3
        memcpy(was_ip, q, 40 if l3 + 40 <= n else 20)
        if q[0] >> 4 == 4:
            ihl = (q[0] & 0x0F) * 4
            total = be16(q + 2)
            if ihl >= 20 and l3 + ihl <= n and total >= ihl:
                if o.class4:
                    nv = class_byte(o, q[1], o.tos)
                    if nv != q[1]:
                        q[1] = <uint8_t>nv
                        changed |= IP_TOS
                if o.ttl_mode != TTL_NONE:
                    nv = ttl(o, q[8])
                    if nv != q[8]:
                        q[8] = <uint8_t>nv
                        changed |= IP_TTL
                if o.src_any and address4(o, q + 12, o.src4, o.nsrc4):
                    changed |= IP_SRC
                if o.dst_any and address4(o, q + 16, o.dst4, o.ndst4):
                    changed |= IP_DST
                frag = be16(q + 6) & 0x1FFF
                version = 4
                proto = q[9] if frag == 0 else -1
                l4 = l3 + ihl
                l4_len = <int64_t>total - ihl
        elif q[0] >> 4 == 6 and l3 + 40 <= n:
            if o.class6:
                first = be32(q)
                tclass = class_byte(o, (first >> 20) & 0xFF, o.tclass)
                nv = (<uint32_t>6 << 28) | (tclass << 20) | (
                    <uint32_t>o.flowlabel if o.flowlabel >= 0 else first & 0xFFFFF)
                if nv != first:
                    put32(q, nv)
                    changed |= V6_TCF
            if o.ttl_mode != TTL_NONE:
                nv = ttl(o, q[7])
                if nv != q[7]:
                    q[7] = <uint8_t>nv
                    changed |= V6_HLIM
            if o.src_any and address6(o, q + 8, o.src6, o.nsrc6):
                changed |= IP_SRC
            if o.dst_any and address6(o, q + 24, o.dst6, o.ndst6):
                changed |= IP_DST
            version = 6
            proto = q[6]
            l4 = l3 + 40
            l4_len = be16(q + 4)
            if proto == 0 or proto == 43 or proto == 44 or proto == 51 or proto == 60:
                fallback = 1  # extension headers: edit_frame walks them (rewrite.ipv6)
    # TCP/UDP ports
    if o.nports and (proto == 6 or proto == 17) and l4 + 4 <= n:
        old = be16(p + l4)
        nv = port(o, old)
        if nv != old:
            put16(p + l4, nv)
            changed |= L4_SPORT
        old = be16(p + l4 + 2)
        nv = port(o, old)
        if nv != old:
            put16(p + l4 + 2, nv)
            changed |= L4_DPORT
    if o.mtu_trunc >= 0 and version != 0 and n - l3 > o.mtu_trunc:
        fallback = 1
    fix_ip = o.base_fix or changed != 0
    fix_l4 = o.base_fix or (changed & L4_BITS) != 0
    roce = error == 0 and not fallback and (link == 0 or link == 2 or link == 3)
    if roce and (changed & PORT_BITS):
        fallback, roce = 1, 0  # may no longer be RoCE
    if roce and o.dscp_or_ecn and version == 0:
        fallback, roce = 1, 0  # RoCEv1: its GRH's class (edit._grh_class)
    if roce and (bth < 0 or bth + 12 > n):
        fallback, roce = 1, 0  # (the scanner places a whole BTH where it found no fault)
    # BTH, DETH (edit._bth)
    if roce and o.bth_edits:
        h = p + bth
        memcpy(was_bth, h, 24 if bth + 24 <= n else n - bth)
        opcode = h[0]
        if o.pkey >= 0:
            old = be16(h + 2)
            if old != <uint32_t>o.pkey:
                put16(h + 2, <uint32_t>o.pkey)
                changed |= BTH_PKEY
        dq = be24(h + 5)
        if o.psn_offset:
            old = be24(h + 9)
            nv = (old + (o.psn_offset if opcode != 0x81 else 0)) & 0xFFFFFF
            if nv != old:
                put24(h + 9, nv)
                changed |= BTH_PSN
        if o.nqp:
            nv = qpn(o, dq)
            if nv != dq:
                put24(h + 5, nv)
                changed |= BTH_DQPN
        sqpn = o.sqpn_at[opcode]   # UD and RD: DETH's source QP
        if sqpn and bth + sqpn + 3 <= n:
            if o.nqp:
                old = be24(h + sqpn)
                nv = qpn(o, old)
                if nv != old:
                    put24(h + sqpn, nv)
                    changed |= DETH_SQPN
            if (opcode & 0xE0) == 0x60 and dq == 1 and (o.nqp or o.psn_offset):
                fallback, roce = 1, 0  # a CM REQ/REP may hold a QPN or PSN (edit._cm)
    # ICRC (and VCRC)
    if roce:
        label = KEPT
        if changed != 0 or icrc_ok == 0:
            if icrc_ok == 0 and o.keep_bad:
                if ibw_verify(p, n, link, &span, &check) != 0:
                    fallback = 1
                else:
                    label = BAD_FIXED if check.icrc_ok == 1 else BAD_KEPT
            elif icrc_ok == 1 and (changed & COVERED) == 0:
                pass  # right before, and no covered byte changed: still right (KEPT)
            else:
                right = -1
                if icrc_ok == 1 and 0 <= icrc_at and icrc_at + 4 <= n:
                    right = linear_icrc(p, icrc_at, changed, version, l3, bth, was_ip, was_bth,
                                        sqpn)
                if right < 0:
                    right = fix_crcs(p, n, link)
                if right < 0:
                    fallback = 1
                else:
                    if right == 0:
                        touched = 1
                    label = BAD_FIXED if icrc_ok == 0 else (KEPT if right == 1 else RECOMPUTED)
    if label == RECOMPUTED or label == BAD_FIXED:
        fix_l4 = 1
    if not fallback:
        # TCP/UDP checksum (checksum.transport), after the ICRC it covers
        if fix_l4 and (proto == 6 or proto == 17):
            tcp = proto == 6
            where = l4 + (16 if tcp else 6)
            if where + 2 <= n and l4 + l4_len <= n:
                old = be16(p + where)
                if tcp or old != 0:
                    put16(p + where, 0)
                    total_sum = ones(p + l4, l4_len)
                    if version == 4:
                        total_sum += ones(p + l3 + 12, 8)
                    else:
                        total_sum += ones(p + l3 + 8, 32) + (<uint64_t>l4_len >> 16)
                    total_sum += <uint64_t>proto + (<uint64_t>l4_len & 0xFFFF)
                    nv = finish(total_sum)
                    if nv == 0 and not tcp:
                        nv = 0xFFFF
                    put16(p + where, nv)
                    if nv != old:
                        touched = 1
        # IPv4 header checksum (checksum.ipv4_header)
        if version == 4 and (fix_ip or fix_l4):
            q = p + l3
            old = be16(q + 10)
            put16(q + 10, 0)
            nv = finish(ones(q, ihl))
            put16(q + 10, nv)
            if nv != old:
                touched = 1
    else:
        label = NONE
    changed_out[0] = changed
    label_out[0] = <uint8_t>label
    edited_out[0] = touched or changed != 0
    fallback_out[0] = fallback


def edit_frames(buf, offsets, lengths, links, before_error, before_icrc, bth, icrc_at, o):
    """Edits the frames of ``buf`` in place, as ``ibwire.rewrite.vector.edit_frames`` does
    (same arguments, same ``FrameResults``); a right ICRC whose covered fields changed is
    updated by CRC linearity from ``icrc_at`` (the scanner's ICRC offsets)."""
    cdef _Tables tables = _Tables(o)
    cdef cnp.ndarray data = buf
    cdef cnp.ndarray offs = np.ascontiguousarray(offsets, np.int64)
    cdef cnp.ndarray lens = np.ascontiguousarray(lengths, np.int64)
    cdef cnp.ndarray codes = np.ascontiguousarray(links, np.uint8)
    cdef cnp.ndarray errors = np.ascontiguousarray(before_error, np.uint8)
    cdef cnp.ndarray icrcs = np.ascontiguousarray(before_icrc, np.int8)
    cdef cnp.ndarray bths = np.ascontiguousarray(bth, np.int64)
    cdef cnp.ndarray icrcs_at = np.ascontiguousarray(icrc_at, np.int64)
    cdef Py_ssize_t n = offs.shape[0], i
    if not (data.flags.c_contiguous and data.flags.writeable and data.dtype == np.uint8):
        raise TypeError("edit_frames() needs a writable contiguous uint8 array")
    if n and (offs.min() < 0 or lens.min() < 0 or (offs + lens).max() > data.shape[0]):
        raise ValueError("edit_frames(): a frame lies outside the buffer")
    changed = np.zeros(n, np.uint32)
    label = np.zeros(n, np.uint8)
    edited = np.zeros(n, bool)
    fallback = np.zeros(n, bool)
    cdef uint8_t *base = <uint8_t *>cnp.PyArray_DATA(data)
    cdef const int64_t *po = <const int64_t *>cnp.PyArray_DATA(offs)
    cdef const int64_t *pl = <const int64_t *>cnp.PyArray_DATA(lens)
    cdef const uint8_t *pc = <const uint8_t *>cnp.PyArray_DATA(codes)
    cdef const uint8_t *pe = <const uint8_t *>cnp.PyArray_DATA(errors)
    cdef const int8_t *pi = <const int8_t *>cnp.PyArray_DATA(icrcs)
    cdef const int64_t *pb = <const int64_t *>cnp.PyArray_DATA(bths)
    cdef const int64_t *pa = <const int64_t *>cnp.PyArray_DATA(icrcs_at)
    cdef uint32_t *out_changed = <uint32_t *>cnp.PyArray_DATA(changed)
    cdef uint8_t *out_label = <uint8_t *>cnp.PyArray_DATA(label)
    cdef uint8_t *out_edited = <uint8_t *>cnp.PyArray_DATA(edited)
    cdef uint8_t *out_fallback = <uint8_t *>cnp.PyArray_DATA(fallback)
    cdef const Plan *plan = &tables.plan
    with nogil:
        for i in range(n):
            edit_one(plan, base + po[i], pl[i], pc[i], pe[i], pi[i], pb[i], pa[i],
                     out_changed + i, out_label + i, out_edited + i, out_fallback + i)
    return FrameResults(changed, label, edited, fallback)


def record_headers(buf, offsets, lengths, timestamps, orig_len, nanoseconds, big_endian):
    """The pcap record header before each frame, as ``vector.record_headers`` writes it."""
    cdef cnp.ndarray data = buf
    cdef cnp.ndarray offs = np.ascontiguousarray(offsets, np.int64)
    cdef cnp.ndarray lens = np.ascontiguousarray(lengths, np.int64)
    cdef cnp.ndarray ts = np.ascontiguousarray(timestamps, np.int64)
    cdef cnp.ndarray wire = np.ascontiguousarray(orig_len, np.int64)
    cdef Py_ssize_t n = offs.shape[0], i
    cdef int big = bool(big_endian), ns = bool(nanoseconds)
    cdef uint32_t unit = 1000000000 if ns else 1000000
    cdef uint8_t *base
    cdef uint8_t *h
    cdef const int64_t *po
    cdef const int64_t *pl
    cdef const int64_t *pt
    cdef const int64_t *pw
    cdef int64_t t, sec, rest
    if not (data.flags.c_contiguous and data.flags.writeable and data.dtype == np.uint8):
        raise TypeError("record_headers() needs a writable contiguous uint8 array")
    if n and (offs.min() < 16 or (offs + lens).max() > data.shape[0]):
        raise ValueError("record_headers(): a record lies outside the buffer")
    base = <uint8_t *>cnp.PyArray_DATA(data)
    po = <const int64_t *>cnp.PyArray_DATA(offs)
    pl = <const int64_t *>cnp.PyArray_DATA(lens)
    pt = <const int64_t *>cnp.PyArray_DATA(ts)
    pw = <const int64_t *>cnp.PyArray_DATA(wire)
    with nogil:
        for i in range(n):
            h = base + po[i] - 16
            if load32(h + 4, big) < unit and pw[i] >= pl[i]:
                continue
            t = pt[i]
            sec = t // 1000000000
            rest = t - sec * 1000000000
            if t < 0 and rest != 0:  # floor division, as numpy's
                sec -= 1
                rest += 1000000000
            store32(h, <uint32_t>sec, big)
            store32(h + 4, <uint32_t>(rest if ns else rest // 1000), big)
            store32(h + 8, <uint32_t>pl[i], big)
            store32(h + 12, <uint32_t>(pw[i] if pw[i] > pl[i] else pl[i]), big)

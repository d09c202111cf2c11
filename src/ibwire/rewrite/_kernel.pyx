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

# CRC-32 (reflected, polynomial 0xEDB88320: the ICRC's, IBA 1.4 §7.8.1) by linearity: for two
# messages of one length, CRC(A) ^ CRC(B) is the CRC register, started at 0 with no final
# inversion, of A ^ B. Where only a few covered fields changed and the ICRC was right, the
# new ICRC is the old one XOR that register over the changed bytes, carried over the bytes
# after them by a multiplication by x^(8z) mod P (zlib's crc32_combine does the same).
cdef enum:
    SHIFTS = 16384
cdef uint32_t POLY = <uint32_t>0xEDB88320
cdef uint32_t CRC_TABLE[256]
cdef uint32_t X8[SHIFTS]  # X8[z] = x^(8z) mod P (reflected)


cdef void _crc_tables() noexcept nogil:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = <uint32_t>i
        for k in range(8):
            c = (c >> 1) ^ POLY if c & 1 else c >> 1
        CRC_TABLE[i] = c
    X8[0] = 0x80000000  # x^0
    for i in range(1, SHIFTS):
        X8[i] = CRC_TABLE[X8[i - 1] & 0xFF] ^ (X8[i - 1] >> 8)


_crc_tables()


cdef inline uint32_t multmodp(uint32_t a, uint32_t b) noexcept nogil:
    """a * b mod P, reflected (zlib's multmodp)."""
    cdef uint32_t m = 0x80000000, prod = 0
    while m != 0:
        if a & m:
            prod ^= b
            if (a & (m - 1)) == 0:
                break
        m >>= 1
        b = (b >> 1) ^ POLY if b & 1 else b >> 1
    return prod


cdef inline uint32_t delta_bytes(uint32_t c, const uint8_t *old, const uint8_t *nv, int64_t w,
                                 int64_t *pos, int64_t at) noexcept nogil:
    """The register ``c`` carried over zero bytes from ``pos[0]`` to ``at``, then over the
    ``w`` bytes ``old ^ nv``; ``pos[0]`` moves past them."""
    cdef int64_t i
    for i in range(pos[0], at):
        c = CRC_TABLE[c & 0xFF] ^ (c >> 8)
    for i in range(w):
        c = CRC_TABLE[(c ^ old[i] ^ nv[i]) & 0xFF] ^ (c >> 8)
    pos[0] = at + w
    return c

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
    # address maps: v4 rows (mask, net, nv net, host mask) as uint64; v6 rows of 8 halves
    const uint64_t *src4
    const uint64_t *dst4
    const uint64_t *pnat4
    const uint64_t *src6
    const uint64_t *dst6
    const uint64_t *pnat6
    int nsrc4, ndst4, npnat4, nsrc6, ndst6, npnat6
    int src_any, dst_any    # the numpy twin skips an address whose maps and --pnat are empty
    const int64_t *ports    # (low, high, nv) rows
    int nports
    const int64_t *qp_keys
    const int64_t *qp_values
    int nqp
    int64_t pkey            # -1: not given
    uint32_t psn_offset
    int64_t mtu_trunc       # -1: not given
    int base_fix, keep_bad, dscp_or_ecn, bth_edits


cdef inline uint32_t be16(const uint8_t *p) nogil:
    return (<uint32_t>p[0] << 8) | p[1]


cdef inline uint32_t be24(const uint8_t *p) nogil:
    return (<uint32_t>p[0] << 16) | (<uint32_t>p[1] << 8) | p[2]


cdef inline uint32_t be32(const uint8_t *p) nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline uint64_t be64(const uint8_t *p) nogil:
    return (<uint64_t>be32(p) << 32) | be32(p + 4)


cdef inline void put16(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v


cdef inline void put24(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 16)
    p[1] = <uint8_t>(v >> 8)
    p[2] = <uint8_t>v


cdef inline void put32(uint8_t *p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void put64(uint8_t *p, uint64_t v) noexcept nogil:
    put32(p, <uint32_t>(v >> 32))
    put32(p + 4, <uint32_t>v)


cdef inline uint64_t ones(const uint8_t *p, int64_t n) nogil:
    """The unfolded sum of the big-endian 16-bit words of n bytes (an odd last byte padded
    with zero, RFC 1071)."""
    cdef uint64_t total = 0
    cdef int64_t i = 0
    while i + 1 < n:
        total += (<uint32_t>p[i] << 8) | p[i + 1]
        i += 2
    if n & 1:
        total += <uint32_t>p[n - 1] << 8
    return total


cdef inline uint32_t finish(uint64_t total) nogil:
    cdef int k
    for k in range(4):
        total = (total & 0xFFFF) + (total >> 16)
    return <uint32_t>(~total & 0xFFFF)


cdef inline uint32_t class_byte(const Plan *o, uint32_t old, int whole) nogil:
    cdef uint32_t nv = old if whole < 0 else <uint32_t>whole
    if o.dscp >= 0:
        nv = (nv & 0x03) | (<uint32_t>o.dscp << 2)
    if o.ecn >= 0:
        nv = (nv & 0xFC) | <uint32_t>o.ecn
    return nv


cdef inline uint32_t ttl(const Plan *o, uint32_t old) nogil:
    cdef int64_t v
    if o.ttl_mode == TTL_UP:
        v = <int64_t>old + o.ttl_value
        return 255 if v > 255 else <uint32_t>v
    if o.ttl_mode == TTL_DOWN:
        v = <int64_t>old - o.ttl_value
        return 1 if v < 1 else <uint32_t>v
    return <uint32_t>o.ttl_value


cdef inline int map4(const uint64_t *m, int k, uint64_t a, uint64_t *out) nogil:
    cdef int i
    for i in range(k):
        if (a & m[4 * i]) == m[4 * i + 1]:
            out[0] = m[4 * i + 2] | (a & m[4 * i + 3])
            return 1
    return 0


cdef inline int map6(const uint64_t *m, int k, uint64_t hi, uint64_t lo, uint64_t *out) nogil:
    cdef int i
    cdef const uint64_t *r
    for i in range(k):
        r = m + 8 * i
        if (hi & r[0]) == r[2] and (lo & r[1]) == r[3]:
            out[0] = r[4] | (hi & r[6])
            out[1] = r[5] | (lo & r[7])
            return 1
    return 0


cdef inline uint32_t address4(const Plan *o, uint8_t *at, const uint64_t *maps, int n) nogil:
    """Maps the IPv4 address at ``at`` (the maps, else --pnat); the changed bit or 0."""
    cdef uint64_t a = be32(at), nv = 0
    if not map4(maps, n, a, &nv) and not map4(o.pnat4, o.npnat4, a, &nv):
        return 0
    if nv == a:
        return 0
    put32(at, <uint32_t>nv)
    return 1


cdef inline uint32_t address6(const Plan *o, uint8_t *at, const uint64_t *maps, int n) nogil:
    cdef uint64_t hi = be64(at), lo = be64(at + 8)
    cdef uint64_t moved[2]
    if not map6(maps, n, hi, lo, moved) and not map6(o.pnat6, o.npnat6, hi, lo, moved):
        return 0
    if moved[0] == hi and moved[1] == lo:
        return 0
    put64(at, moved[0])
    put64(at + 8, moved[1])
    return 1


cdef inline uint32_t port(const Plan *o, uint32_t old) nogil:
    cdef int i
    for i in range(o.nports):
        if o.ports[3 * i] <= old <= o.ports[3 * i + 1]:
            return <uint32_t>o.ports[3 * i + 2]
    return old


cdef inline uint32_t qpn(const Plan *o, uint32_t old) nogil:
    cdef int i
    for i in range(o.nqp):
        if o.qp_keys[i] == old:
            return <uint32_t>o.qp_values[i]
    return old


cdef inline int fix_crcs(uint8_t *p, int64_t n, int link) nogil:
    """``ibw_fix_batch`` of one frame: 1 its CRCs were already right, 0 rewritten, -1 a
    fault (nothing written)."""
    cdef ibw_span s
    cdef int same = 1, k
    cdef uint32_t v
    cdef uint16_t w
    if ibw_locate(p, n, link, &s) != 0:
        return -1
    if s.icrc >= 0:
        v = ibw_icrc_of(p, &s)
        same = (p[s.icrc] | (<uint32_t>p[s.icrc + 1] << 8) | (<uint32_t>p[s.icrc + 2] << 16) |
                (<uint32_t>p[s.icrc + 3] << 24)) == v
        for k in range(4):
            p[s.icrc + k] = <uint8_t>(v >> (8 * k))
    if s.vcrc >= 0:
        w = ibw_vcrc_of(p, &s)
        same = same and (p[s.vcrc] | (<uint16_t>p[s.vcrc + 1] << 8)) == w
        p[s.vcrc] = <uint8_t>w
        p[s.vcrc + 1] = <uint8_t>(w >> 8)
    return same


cdef int linear_icrc(uint8_t *p, int64_t icrc_at, uint32_t changed, int version, int64_t l3,
                     int64_t bth, const uint8_t *was_ip, const uint8_t *was_bth) noexcept nogil:
    """A right ICRC updated for the covered fields that changed (``was_ip``/``was_bth``:
    the IP header and BTH/DETH as read), as ``fix_crcs`` would rewrite it: 1 it stays, 0 it
    was rewritten, -1 not done here (a field after the ICRC, a jumbo frame: ``fix_crcs``).
    The CRC engine places the ICRC by lengths and opcodes only, so these edits do not move
    it."""
    cdef uint32_t reg = 0, wire
    cdef int64_t pos = 0, at, size = 4 if version == 4 else 16
    if changed & IP_SRC:
        at = l3 + (12 if version == 4 else 8)
        pos = at
        reg = delta_bytes(reg, was_ip + (at - l3), p + at, size, &pos, at)
    if changed & IP_DST:
        at = l3 + (16 if version == 4 else 24)
        pos = at if pos == 0 else pos
        reg = delta_bytes(reg, was_ip + (at - l3), p + at, size, &pos, at)
    if changed & BTH_PKEY:
        pos = bth + 2 if pos == 0 else pos
        reg = delta_bytes(reg, was_bth + 2, p + bth + 2, 2, &pos, bth + 2)
    if changed & BTH_DQPN:
        pos = bth + 5 if pos == 0 else pos
        reg = delta_bytes(reg, was_bth + 5, p + bth + 5, 3, &pos, bth + 5)
    if changed & BTH_PSN:
        pos = bth + 9 if pos == 0 else pos
        reg = delta_bytes(reg, was_bth + 9, p + bth + 9, 3, &pos, bth + 9)
    if changed & DETH_SQPN:
        pos = bth + 17 if pos == 0 else pos
        reg = delta_bytes(reg, was_bth + 17, p + bth + 17, 3, &pos, bth + 17)
    if pos == 0 or pos > icrc_at or icrc_at - pos >= SHIFTS or (changed & PORT_BITS):
        return -1
    reg = multmodp(X8[icrc_at - pos], reg)
    if reg == 0:
        return 1
    wire = (p[icrc_at] | (<uint32_t>p[icrc_at + 1] << 8) | (<uint32_t>p[icrc_at + 2] << 16) |
            (<uint32_t>p[icrc_at + 3] << 24)) ^ reg
    p[icrc_at] = <uint8_t>wire
    p[icrc_at + 1] = <uint8_t>(wire >> 8)
    p[icrc_at + 2] = <uint8_t>(wire >> 16)
    p[icrc_at + 3] = <uint8_t>(wire >> 24)
    return 0


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
    cdef uint8_t was_bth[20]
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
        memcpy(was_bth, h, 20 if bth + 20 <= n else 12)
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
        if (opcode & 0xE0) == 0x60 and bth + 20 <= n:
            if o.nqp:
                old = be24(h + 17)
                nv = qpn(o, old)
                if nv != old:
                    put24(h + 17, nv)
                    changed |= DETH_SQPN
            if dq == 1 and (o.nqp or o.psn_offset):
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
                    right = linear_icrc(p, icrc_at, changed, version, l3, bth, was_ip, was_bth)
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


def _v4_rows(pairs):
    rows = [(int(old.netmask), int(old.network_address), int(new.network_address),
             int(new.hostmask)) for old, new in pairs if old.max_prefixlen == 32]
    return np.array(rows or [(0, 0, 0, 0)], np.uint64).ravel(), len(rows)


def _v6_rows(pairs):
    rows = []
    mask64 = (1 << 64) - 1
    for old, new in pairs:
        if old.max_prefixlen != 128:
            continue
        values = (int(old.netmask), int(old.network_address), int(new.network_address),
                  int(new.hostmask))
        rows.append((values[0] >> 64, values[0] & mask64, values[1] >> 64, values[1] & mask64,
                     values[2] >> 64, values[2] & mask64, values[3] >> 64, values[3] & mask64))
    return np.array(rows or [(0,) * 8], np.uint64).ravel(), len(rows)


cdef class _Tables:
    """The options as C tables (the arrays that the Plan's pointers point into)."""
    cdef Plan plan
    cdef object keep

    def __init__(self, o):
        cdef Plan *p = &self.plan
        cdef cnp.ndarray arr
        keep = []
        p.has_dmac = o.enet_dmac is not None
        p.has_smac = o.enet_smac is not None
        if p.has_dmac:
            memcpy(p.dmac, <const char *>o.enet_dmac, 6)
        if p.has_smac:
            memcpy(p.smac, <const char *>o.enet_smac, 6)
        p.tos = -1 if o.tos is None else o.tos
        p.tclass = -1 if o.tclass is None else o.tclass
        p.dscp = -1 if o.dscp is None else o.dscp
        p.ecn = -1 if o.ecn is None else o.ecn
        p.flowlabel = -1 if o.flowlabel is None else o.flowlabel
        p.class4 = o.tos is not None or o.dscp is not None or o.ecn is not None
        p.class6 = (o.tclass is not None or o.flowlabel is not None or o.dscp is not None or
                    o.ecn is not None)
        p.dscp_or_ecn = o.dscp is not None or o.ecn is not None
        p.ttl_mode, p.ttl_value = TTL_NONE, 0
        if o.ttl is not None:
            sign, value = o.ttl
            p.ttl_mode = TTL_UP if sign == "+" else TTL_DOWN if sign == "-" else TTL_SET
            p.ttl_value = value
        p.src_any = bool(o.srcipmap or o.pnat)
        p.dst_any = bool(o.dstipmap or o.pnat)
        tables = []
        for pairs in (o.srcipmap, o.dstipmap, o.pnat):
            tables.append(_v4_rows(pairs))
            tables.append(_v6_rows(pairs))
        keep.extend(t[0] for t in tables)
        arr = tables[0][0]; p.src4 = <const uint64_t *>cnp.PyArray_DATA(arr); p.nsrc4 = tables[0][1]
        arr = tables[1][0]; p.src6 = <const uint64_t *>cnp.PyArray_DATA(arr); p.nsrc6 = tables[1][1]
        arr = tables[2][0]; p.dst4 = <const uint64_t *>cnp.PyArray_DATA(arr); p.ndst4 = tables[2][1]
        arr = tables[3][0]; p.dst6 = <const uint64_t *>cnp.PyArray_DATA(arr); p.ndst6 = tables[3][1]
        arr = tables[4][0]; p.pnat4 = <const uint64_t *>cnp.PyArray_DATA(arr)
        p.npnat4 = tables[4][1]
        arr = tables[5][0]; p.pnat6 = <const uint64_t *>cnp.PyArray_DATA(arr)
        p.npnat6 = tables[5][1]
        arr = np.array(o.portmap or [(0, 0, 0)], np.int64).ravel()
        keep.append(arr)
        p.ports, p.nports = <const int64_t *>cnp.PyArray_DATA(arr), len(o.portmap)
        qp = dict(o.qpmap)
        arr = np.array(list(qp) or [0], np.int64)
        keep.append(arr)
        p.qp_keys = <const int64_t *>cnp.PyArray_DATA(arr)
        arr = np.array(list(qp.values()) or [0], np.int64)
        keep.append(arr)
        p.qp_values, p.nqp = <const int64_t *>cnp.PyArray_DATA(arr), len(qp)
        p.pkey = -1 if o.pkey is None else o.pkey
        p.psn_offset = o.psn_offset or 0
        p.mtu_trunc = -1 if o.mtu_trunc is None else o.mtu_trunc
        p.base_fix = bool(o.fixcsum or o.edits)
        p.keep_bad = bool(o.keep_bad_icrc)
        p.bth_edits = o.pkey is not None or bool(o.psn_offset) or bool(qp)
        self.keep = keep


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


cdef inline uint32_t load32(const uint8_t *p, int big) nogil:
    if big:
        return be32(p)
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline void store32(uint8_t *p, uint32_t v, int big) noexcept nogil:
    if big:
        put32(p, v)
    else:
        p[0] = <uint8_t>v
        p[1] = <uint8_t>(v >> 8)
        p[2] = <uint8_t>(v >> 16)
        p[3] = <uint8_t>(v >> 24)


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

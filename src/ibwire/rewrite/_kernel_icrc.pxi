# The ICRC of an edited frame for ``_kernel.pyx`` (included): rewritten through the CRC
# engine (``fix_crcs``), or updated from a right one by CRC linearity (``linear_icrc``).

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
                     int64_t bth, const uint8_t *was_ip, const uint8_t *was_bth,
                     int64_t sqpn) noexcept nogil:
    """A right ICRC updated for the covered fields that changed (``was_ip``/``was_bth``:
    the IP header and BTH/RDETH/DETH as read; ``sqpn``: where DETH's source QP is from the
    BTH), as ``fix_crcs`` would rewrite it: 1 it stays, 0 it
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
        pos = bth + sqpn if pos == 0 else pos
        reg = delta_bytes(reg, was_bth + sqpn, p + bth + sqpn, 3, &pos, bth + sqpn)
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

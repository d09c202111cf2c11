# Big-endian fields, RFC 1071 sums and pcap header words for ``_kernel.pyx`` (included).

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

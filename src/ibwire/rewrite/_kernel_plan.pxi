# The rewrite options as C tables, and the value maps over them, for ``_kernel.pyx``
# (included): class byte, TTL, address pairs, port ranges, QPN map.

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
        arr = np.ascontiguousarray(SOURCE_QP_AT, np.uint8)
        keep.append(arr)
        p.sqpn_at = <const uint8_t *>cnp.PyArray_DATA(arr)
        p.pkey = -1 if o.pkey is None else o.pkey
        p.psn_offset = o.psn_offset or 0
        p.mtu_trunc = -1 if o.mtu_trunc is None else o.mtu_trunc
        p.base_fix = bool(o.fixcsum or o.edits)
        p.keep_bad = bool(o.keep_bad_icrc)
        p.bth_edits = o.pkey is not None or bool(o.psn_offset) or bool(qp)
        self.keep = keep

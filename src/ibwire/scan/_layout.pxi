# The scan.h declarations and the layout half of a scanner program (header sizes, opcode
# chains, MAD classes, fault sites: ibwire.scan._layout), for _engine.pyx and _tally.pyx.

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from ibwire.scan import _layout

cdef extern from "kernel.h" nogil:
    void ibw_init()


cdef extern from "scan.h" nogil:
    enum:
        IBW_SCAN_MAX_SLOTS
        IBW_SCAN_MAX_VIEWS

    ctypedef struct ibw_scan_instr:
        uint64_t mask
        int32_t column, at, load, shift, width, pad_

    ctypedef struct ibw_scan_prog:
        int32_t nslots
        int32_t slot_size[32]
        int32_t slot_first[32]
        int32_t slot_count[32]
        const ibw_scan_instr *instr
        const uint8_t *chain
        const uint8_t *chain_len
        const uint8_t *op_flags
        const uint8_t *rmpp
        int32_t nviews
        uint32_t view_key[32]
        int32_t view_slot[32]
        int32_t view_extent[32]
        int32_t eth, vlan, ip, ipv6, udp, lrh, grh, bth, deth, mad, rmpp_slot
        int32_t site_slot_base, site_padcnt
        int32_t verdicts

    ctypedef struct ibw_scan_out:
        void *const *cols
        uint8_t *encapsulation
        uint32_t *headers
        uint8_t *vlan_count
        int8_t *ecn
        int32_t *off_network
        int32_t *off_bth
        int32_t *off_payload
        int32_t *payload_len
        int32_t *off_icrc
        int32_t *off_vcrc
        uint32_t *icrc
        uint16_t *vcrc
        int8_t *icrc_ok
        int8_t *vcrc_ok
        uint8_t *error
        uint8_t *site
        int32_t *error_off
        uint8_t *cut



cdef int set_extents(ibw_scan_prog *prog, dict extents) except -1:
    """The bytes each view's fields are read from (``program.view_extents``): a view is then
    put where the capture kept those, not only the whole attribute."""
    for i in range(prog.nviews):
        prog.view_extent[i] = extents.get(prog.view_slot[i], prog.view_extent[i])
    return 0


cdef int fill_layout(ibw_scan_prog *prog) except -1:
    """Everything of ``prog`` but the instructions (none selected: slot_count 0)."""
    cdef const char *table
    sizes = _layout.SLOT_SIZES
    if len(sizes) > IBW_SCAN_MAX_SLOTS:
        raise ValueError("too many header slots for the C scanner")
    if _layout.WELL_KNOWN_QPS != (0, 1):
        raise ValueError("scan.c takes QP0 and QP1 as the well-known QPs")
    prog.nslots = len(sizes)
    for s in range(len(sizes)):
        prog.slot_size[s] = sizes[s]
        prog.slot_first[s] = 0
        prog.slot_count[s] = 0
    prog.instr = NULL
    prog.verdicts = 1
    # the tables are bytes constants of _layout: they live as long as the process
    table = _layout.CHAIN
    prog.chain = <const uint8_t *>table
    table = _layout.CHAIN_LEN
    prog.chain_len = <const uint8_t *>table
    table = _layout.OP_FLAGS
    prog.op_flags = <const uint8_t *>table
    table = _layout.RMPP
    prog.rmpp = <const uint8_t *>table
    views = _layout.MAD_VIEWS
    if len(views) > IBW_SCAN_MAX_VIEWS:
        raise ValueError("too many MAD views for the C scanner")
    prog.nviews = len(views)
    for i in range(len(views)):
        prog.view_key[i] = views[i][0]
        prog.view_slot[i] = views[i][1]
        prog.view_extent[i] = sizes[views[i][1]]  # the whole attribute (see set_extents)
    slot = _layout.SLOT
    prog.eth, prog.vlan, prog.ip, prog.ipv6 = slot["eth"], slot["vlan"], slot["ip"], slot["ipv6"]
    prog.udp, prog.lrh, prog.grh, prog.bth = slot["udp"], slot["lrh"], slot["grh"], slot["bth"]
    prog.deth, prog.mad, prog.rmpp_slot = slot["deth"], slot["mad"], slot["rmpp"]
    prog.site_slot_base = _layout.SITE_SLOT_BASE
    prog.site_padcnt = _layout.SITE_PADCNT
    return 0

"""Management datagrams: the 24-byte common MAD header and the 12-byte RMPP header.

Layout: IBA Vol. 1 13.4.3 (common MAD header) and 13.6.2 (RMPP), as Linux declares them in
include/rdma/ib_mad.h (struct ib_mad_hdr, struct ib_rmpp_hdr). MADs ride in UD SENDs to or from
QP0 (SMPs) and QP1 (GMPs); ``specs/mad_classes.tsv`` says which classes carry RMPP.
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Header, Record, bits, octets

MAD = Header("mad", "MAD", cs.BitStruct(
    "baseversion" / bits(8),
    "mgmtclass" / bits(8),
    "classversion" / bits(8),
    "method" / bits(8),      # bit 7 is the response bit (R)
    "status" / bits(16),
    "classspecific" / bits(16),
    "transactionid" / bits(64),
    "attributeid" / bits(16),
    "reserved" / bits(16),
    "attributemodifier" / bits(32),
))

RMPP = Header("rmpp", "RMPP", cs.BitStruct(
    "rmppversion" / bits(8),
    "rmpptype" / bits(8),
    "rresptime" / bits(5),
    "rmppflags" / bits(3),
    "rmppstatus" / bits(8),
    "data1" / bits(32),      # SegmentNumber (DATA) / reserved
    "data2" / bits(32),      # PayloadLength (DATA) / NewWindowLast (ACK)
))



def carries_mad(transport: str, destqp: int, srcqp: int | None) -> bool:
    """A UD packet to or from QP0/QP1 (``specs/well_known_qps.tsv``) carries a MAD: to them
    for requests, from them for the responses to a requester on another QP (as Wireshark
    decides). ``srcqp`` is the DETH source QP (None if there is none)."""
    if transport != "UD":
        return False
    from ibwire.tables import well_known_qps

    qps = well_known_qps()
    return destqp in qps or srcqp in qps


# -- attributes every class may carry (IBA 13.4.8) ------------------------------------------
# Field names: Wireshark's infiniband.classportinfo.* and infiniband.notice.*; rdma-core
# libibmad/fields.c (IB_CPI_*, IB_NOTICE_*) gives the same bit layout.

CLASS_PORT_INFO = Record("classportinfo", "ClassPortInfo", cs.BitStruct(
    "classportinfo.baseversion" / bits(8),
    "classportinfo.classversion" / bits(8),
    "classportinfo.capabilitymask" / bits(16),
    "classportinfo.capabilitymask2" / bits(27),
    "classportinfo.resptimevalue" / bits(5),
    "classportinfo.redirectgid" / octets(16),
    "classportinfo.redirecttc" / bits(8),
    "classportinfo.redirectsl" / bits(4),
    "classportinfo.redirectfl" / bits(20),
    "classportinfo.redirectlid" / bits(16),
    "classportinfo.redirectpkey" / bits(16),
    "classportinfo.reserved" / bits(8),
    "classportinfo.redirectqp" / bits(24),
    "classportinfo.redirectqkey" / bits(32),
    "classportinfo.trapgid" / octets(16),
    "classportinfo.traptc" / bits(8),
    "classportinfo.trapsl" / bits(4),
    "classportinfo.trapfl" / bits(20),
    "classportinfo.traplid" / bits(16),
    "classportinfo.trappkey" / bits(16),
    "classportinfo.traphl" / bits(8),
    "classportinfo.trapqp" / bits(24),
    "classportinfo.trapqkey" / bits(32),
), formats={"classportinfo.redirectgid": "ipv6", "classportinfo.trapgid": "ipv6"})

#: Notice as an SMP carries it (14.2.5.1: 64 bytes, no IssuerGID).
NOTICE = Record("notice", "Notice", cs.BitStruct(
    "notice.isgeneric" / bits(1),
    "notice.type" / bits(7),
    "notice.producertypevendorid" / bits(24),
    "notice.trapnumberdeviceid" / bits(16),
    "notice.issuerlid" / bits(16),
    "notice.noticetoggle" / bits(1),
    "notice.noticecount" / bits(15),
    "notice.datadetails" / octets(54),
))

#: Notice as a GMP (SA) carries it (13.4.8.2: 80 bytes, the IssuerGID after the details).
NOTICE_GS = Record("notice_gs", "Notice", cs.BitStruct(
    *NOTICE.declaration.subcon.subcons,
    "notice.issuergid" / octets(16),
), formats={"notice.issuergid": "ipv6"})



# -- a generic Notice's DataDetails, by trap number (IBA 14.2.5.1 table 155) ----------------
# The 54 bytes as Linux lays them out (drivers/infiniband/hw/qib/qib_mad.h and hfi1's mad.h,
# struct ib_mad_notice_attr: ntc_129_131, ntc_144, ntc_145, ntc_256, ntc_257_258), field names
# Wireshark's (infiniband.trap.*). Reserved bits are trap.reserved*.
_GID_FORMATS = {"trap.gidaddr": "ipv6", "trap.gidaddr1": "ipv6", "trap.gidaddr2": "ipv6"}

#: 64-67: GID in / out of service, multicast group created / deleted.
TRAP_GID = Record("trap.gid", "Trap details (GID)", cs.BitStruct(
    "trap.reserved0" / octets(6),
    "trap.gidaddr" / octets(16),
    "trap.reserved1" / octets(32),
), formats=_GID_FORMATS)

#: 68-69 (IBA 1.2.1): paths no longer / again valid, their PathRecord ComponentMask.
TRAP_PATHS = Record("trap.paths", "Trap details (paths)", cs.BitStruct(
    "trap.comp_mask" / bits(64),
    "trap.wait_for_repath" / bits(1),
    "trap.reserved0" / bits(7),
    "trap.reserved1" / octets(45),
))

#: 128: link state of a switch port changed.
TRAP_LINK_STATE = Record("trap.linkstate", "Trap details (link state)", cs.BitStruct(
    "trap.lidaddr" / bits(16),
    "trap.reserved0" / octets(52),
))

#: 129-131: local link integrity, excessive buffer overrun, flow control update (ntc_129_131).
TRAP_PORT = Record("trap.port", "Trap details (port)", cs.BitStruct(
    "trap.reserved0" / bits(16),
    "trap.lidaddr" / bits(16),
    "trap.portno" / bits(8),
    "trap.reserved1" / octets(49),
))

#: 144: capability mask (or other local things) changed (ntc_144: local_changes low bit,
#: change_flags IB_NOTICE_TRAP_LSE_CHG 0x04, LWE_CHG 0x02, NODE_DESC_CHG 0x01).
TRAP_CAPABILITY = Record("trap.capability", "Trap details (capability mask)", cs.BitStruct(
    "trap.reserved0" / bits(16),
    "trap.lidaddr" / bits(16),
    "trap.reserved1" / bits(15),
    "trap.otherlocalchanges" / bits(1),
    "trap.capabilitymask" / bits(32),
    "trap.reserved2" / bits(13),
    "trap.linkspeecenabledchange" / bits(1),    # sic: Wireshark's name
    "trap.linkwidthenabledchange" / bits(1),
    "trap.nodedescriptionchange" / bits(1),
    "trap.reserved3" / octets(42),
))

#: 145: system image GUID changed (ntc_145).
TRAP_SYSTEM_IMAGE_GUID = Record("trap.sysguid", "Trap details (system image GUID)",
                                cs.BitStruct(
    "trap.reserved0" / bits(16),
    "trap.lidaddr" / bits(16),
    "trap.reserved1" / bits(16),
    "trap.systemimageguid" / bits(64),
    "trap.reserved2" / octets(40),
))

#: 256: bad M_Key (ntc_256: dr_trunc_hop's IB_NOTICE_TRAP_DR_NOTICE 0x80, DR_TRUNC 0x40 and
#: the hop count, then the directed-route return path).
TRAP_BAD_MKEY = Record("trap.badmkey", "Trap details (bad M_Key)", cs.BitStruct(
    "trap.reserved0" / bits(16),
    "trap.lidaddr" / bits(16),
    "trap.drslid" / bits(16),
    "trap.method" / bits(8),
    "trap.reserved1" / bits(8),
    "trap.attributeid" / bits(16),
    "trap.attributemodifier" / bits(32),
    "trap.mkey" / bits(64),
    "trap.reserved2" / bits(8),
    "trap.drnotice" / bits(1),
    "trap.drpathtruncated" / bits(1),
    "trap.drhopcount" / bits(6),
    "trap.drnoticereturnpath" / octets(30),
))

#: 257-258: bad P_Key, bad Q_Key (ntc_257_258: SL in the high 4 bits of sl_qp1).
TRAP_BAD_KEY = Record("trap.badkey", "Trap details (bad P_Key / Q_Key)", cs.BitStruct(
    "trap.reserved0" / bits(16),
    "trap.lidaddr1" / bits(16),
    "trap.lidaddr2" / bits(16),
    "trap.key" / bits(32),
    "trap.sl" / bits(4),
    "trap.reserved1" / bits(4),
    "trap.qp1" / bits(24),
    "trap.reserved2" / bits(8),
    "trap.qp2" / bits(24),
    "trap.gidaddr1" / octets(16),
    "trap.gidaddr2" / octets(16),
    "trap.reserved3" / octets(4),
), formats=_GID_FORMATS)

#: 259: bad P_Key at a switch external port (IBA 14.2.5.1 table 155: DataValid, then as
#: 257-258 with a P_Key for the key, then the switch's LID and port).
TRAP_BAD_PKEY_SWITCH = Record("trap.badpkeyswitch", "Trap details (switch bad P_Key)",
                              cs.BitStruct(
    "trap.datavalid" / bits(16),
    "trap.lidaddr1" / bits(16),
    "trap.lidaddr2" / bits(16),
    "trap.pkey" / bits(16),
    "trap.sl" / bits(4),
    "trap.reserved0" / bits(4),
    "trap.qp1" / bits(24),
    "trap.reserved1" / bits(8),
    "trap.qp2" / bits(24),
    "trap.gidaddr1" / octets(16),
    "trap.gidaddr2" / octets(16),
    "trap.swlidaddr" / bits(16),
    "trap.portno" / bits(8),
    "trap.reserved2" / octets(3),
), formats=_GID_FORMATS)

#: Trap number -> the layout of a generic Notice's DataDetails.
TRAP_DETAILS: dict[int, Record] = {
    **dict.fromkeys((64, 65, 66, 67), TRAP_GID), 68: TRAP_PATHS, 69: TRAP_PATHS,
    128: TRAP_LINK_STATE, **dict.fromkeys((129, 130, 131), TRAP_PORT), 144: TRAP_CAPABILITY,
    145: TRAP_SYSTEM_IMAGE_GUID, 256: TRAP_BAD_MKEY, 257: TRAP_BAD_KEY, 258: TRAP_BAD_KEY,
    259: TRAP_BAD_PKEY_SWITCH}

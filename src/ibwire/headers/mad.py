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

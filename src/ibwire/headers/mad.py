"""Management datagrams: the 24-byte common MAD header and the 12-byte RMPP header.

Layout: IBA Vol. 1 13.4.3 (common MAD header) and 13.6.2 (RMPP), as Linux declares them in
include/rdma/ib_mad.h (struct ib_mad_hdr, struct ib_rmpp_hdr). MADs ride in UD SENDs to or from
QP0 (SMPs) and QP1 (GMPs); ``specs/mad_classes.tsv`` says which classes carry RMPP.
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Header, bits

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

MAD_SIZE = 256


def carries_mad(transport: str, destqp: int, srcqp: int | None) -> bool:
    """A UD packet to or from QP0/QP1 (``specs/well_known_qps.tsv``) carries a MAD: to them
    for requests, from them for the responses to a requester on another QP (as Wireshark
    decides). ``srcqp`` is the DETH source QP (None if there is none)."""
    from ibwire.tables import well_known_qps

    qps = well_known_qps()
    return transport == "UD" and (destqp in qps or srcqp in qps)

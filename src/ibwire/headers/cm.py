"""Communication Management (MAD class 0x07): the CM messages and ClassPortInfo.

Layouts: IBA Vol. 1 12.6 (tables 106-120) as Linux declares them bit by bit in
include/rdma/ibta_vol1_c12.h (CM_REQ_LOCAL_QPN ...) and drivers/infiniband/core/cm_msgs.h.
Every message fills the 232 bytes after the common MAD header. Field names are Wireshark's
(``infiniband.cm.*`` without the prefix, packet-infiniband.c), Wireshark's own oddities
included (a REQ's local communication ID is ``cm.req``, a DREQ's remote QPN is
``cm.req.remoteqpneecn``, DREP is ``cm.drsp``); where Wireshark has no field the name
follows its style (``cm.mra.*``, ``cm.lap.*``, ``cm.apr.*``, ``cm.sidr_req.*``).

The RDMA-CM IP private data of a REQ (RDMA-CM ``struct cma_hdr``, Linux
drivers/infiniband/core/cma.c; IBA Annex A11) is :data:`IP_CM`, read over the REQ's private
data when its service ID is in the RDMA IP CM range (prefix 0x0000000001, A11.2.2).
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Record, bits, octets

_GID = "ipv6"

CM_REQ = Record("cm.req", "CM ConnectRequest", cs.BitStruct(
    "cm.req" / bits(32),                        # Local Communication ID
    "cm.req.reserved4" / bits(8),
    "cm.req.vendorid" / bits(24),
    "cm.req.serviceid" / bits(64),
    "cm.req.localcaguid" / bits(64),
    "cm.req.reserved24" / bits(32),
    "cm.req.localqkey" / bits(32),
    "cm.req.localqpn" / bits(24),
    "cm.req.responderres" / bits(8),
    "cm.req.localeecn" / bits(24),
    "cm.req.initdepth" / bits(8),
    "cm.req.remoteeecn" / bits(24),
    "cm.req.remoteresptout" / bits(5),
    "cm.req.transpsvctype" / bits(2),
    "cm.req.e2eflowctrl" / bits(1),
    "cm.req.startpsn" / bits(24),
    "cm.req.localresptout" / bits(5),
    "cm.req.retrcount" / bits(3),
    "cm.req.pkey" / bits(16),
    "cm.req.pppmtu" / bits(4),
    "cm.req.rdcexist" / bits(1),
    "cm.req.rnrretrcount" / bits(3),
    "cm.req.maxcmretr" / bits(4),
    "cm.req.srq" / bits(1),
    "cm.req.ext_transport" / bits(3),
    "cm.req.prim_locallid" / bits(16),
    "cm.req.prim_remotelid" / bits(16),
    "cm.req.prim_localgid" / octets(16),
    "cm.req.prim_remotegid" / octets(16),
    "cm.req.prim_flowlabel" / bits(20),
    "cm.req.prim_reserved0" / bits(6),
    "cm.req.prim_pktrate" / bits(6),
    "cm.req.prim_tfcclass" / bits(8),
    "cm.req.prim_hoplim" / bits(8),
    "cm.req.prim_sl" / bits(4),
    "cm.req.prim_subnetlocal" / bits(1),
    "cm.req.prim_reserved1" / bits(3),
    "cm.req.prim_localacktout" / bits(5),
    "cm.req.prim_reserved2" / bits(3),
    "cm.req.alt_locallid" / bits(16),
    "cm.req.alt_remotelid" / bits(16),
    "cm.req.alt_localgid" / octets(16),
    "cm.req.alt_remotegid" / octets(16),
    "cm.req.alt_flowlabel" / bits(20),
    "cm.req.alt_reserved0" / bits(6),
    "cm.req.alt_pktrate" / bits(6),
    "cm.req.alt_tfcclass" / bits(8),
    "cm.req.alt_hoplim" / bits(8),
    "cm.req.alt_sl" / bits(4),
    "cm.req.alt_subnetlocal" / bits(1),
    "cm.req.alt_reserved1" / bits(3),
    "cm.req.alt_localacktout" / bits(5),
    "cm.req.sap_supported" / bits(1),          # ibta_vol1_c12.h CM_REQ_SAP_SUPPORTED
    "cm.req.alt_reserved2" / bits(2),
    "cm.req.private" / octets(92),
), formats={"cm.req.prim_localgid": _GID, "cm.req.prim_remotegid": _GID,
            "cm.req.alt_localgid": _GID, "cm.req.alt_remotegid": _GID})

CM_MRA = Record("cm.mra", "CM MessageReceiptAcknowledgement", cs.BitStruct(
    "cm.mra.localcommid" / bits(32),
    "cm.mra.remotecommid" / bits(32),
    "cm.mra.msgmraed" / bits(2),
    "cm.mra.reserved0" / bits(6),
    "cm.mra.servicetimeout" / bits(5),
    "cm.mra.reserved1" / bits(3),
    "cm.mra.private" / octets(222),
))

CM_REJ = Record("cm.rej", "CM ConnectReject", cs.BitStruct(
    "cm.rej.localcommid" / bits(32),
    "cm.rej.remotecommid" / bits(32),
    "cm.rej.msgrej" / bits(2),
    "cm.rej.reserved0" / bits(6),
    "cm.rej.rejinfolen" / bits(7),
    "cm.rej.reserved1" / bits(1),
    "cm.rej.reason" / bits(16),
    "cm.rej.ari" / octets(72),
    "cm.rej.private" / octets(148),
))

CM_REP = Record("cm.rep", "CM ConnectReply", cs.BitStruct(
    "cm.rep" / bits(32),                        # Local Communication ID
    "cm.rep.remotecommid" / bits(32),
    "cm.rep.localqkey" / bits(32),
    "cm.rep.localqpn" / bits(24),
    "cm.rep.vendorid_h" / bits(8),
    "cm.rep.localeecn" / bits(24),
    "cm.rep.vendorid_m" / bits(8),
    "cm.rep.startpsn" / bits(24),
    "cm.rep.vendorid_l" / bits(8),
    "cm.rep.respres" / bits(8),
    "cm.rep.initdepth" / bits(8),
    "cm.rep.tgtackdelay" / bits(5),
    "cm.rep.failoveracc" / bits(2),
    "cm.rep.e2eflowctrl" / bits(1),
    "cm.rep.rnrretrcount" / bits(3),
    "cm.rep.srq" / bits(1),
    "cm.rep.reserved" / bits(4),
    "cm.rep.localcaguid" / bits(64),
    "cm.rep.private" / octets(196),
))

CM_RTU = Record("cm.rtu", "CM ReadyToUse", cs.BitStruct(
    "cm.rtu.localcommid" / bits(32),
    "cm.rtu.remotecommid" / bits(32),
    "cm.rtu.private" / octets(224),
))

CM_DREQ = Record("cm.dreq", "CM DisconnectRequest", cs.BitStruct(
    "cm.dreq.localcommid" / bits(32),
    "cm.dreq.remotecommid" / bits(32),
    "cm.req.remoteqpneecn" / bits(24),          # sic: Wireshark's name
    "cm.dreq.reserved" / bits(8),
    "cm.dreq.private" / octets(220),
))

CM_DREP = Record("cm.drsp", "CM DisconnectReply", cs.BitStruct(
    "cm.drsp.localcommid" / bits(32),
    "cm.drsp.remotecommid" / bits(32),
    "cm.drsp.private" / octets(224),
))

CM_SIDR_REQ = Record("cm.sidr_req", "CM ServiceIDResolutionRequest", cs.BitStruct(
    "cm.sidr_req.requestid" / bits(32),
    "cm.sidr_req.pkey" / bits(16),
    "cm.sidr_req.reserved" / bits(16),
    "cm.sidr_req.serviceid" / bits(64),
    "cm.sidr_req.private" / octets(216),
))

CM_SIDR_REP = Record("cm.sidr_rep", "CM ServiceIDResolutionResponse", cs.BitStruct(
    "cm.sidr_rep.requestid" / bits(32),
    "cm.sidr_rep.status" / bits(8),
    "cm.sidr_rep.addinfolen" / bits(8),
    "cm.sidr_rep.vendorid_h" / bits(16),
    "cm.sidr_rep.qpn" / bits(24),
    "cm.sidr_rep.vendorid_l" / bits(8),
    "cm.sidr_rep.serviceid" / bits(64),
    "cm.sidr_rep.qkey" / bits(32),
    "cm.sidr_rep.addinfo" / octets(72),
    "cm.sidr_rep.private" / octets(136),
))

CM_LAP = Record("cm.lap", "CM LoadAlternatePath", cs.BitStruct(
    "cm.lap.localcommid" / bits(32),
    "cm.lap.remotecommid" / bits(32),
    "cm.lap.reserved0" / bits(32),
    "cm.lap.remoteqpneecn" / bits(24),
    "cm.lap.remoteresptout" / bits(5),
    "cm.lap.reserved1" / bits(3),
    "cm.lap.reserved2" / bits(32),
    "cm.lap.alt_locallid" / bits(16),
    "cm.lap.alt_remotelid" / bits(16),
    "cm.lap.alt_localgid" / octets(16),
    "cm.lap.alt_remotegid" / octets(16),
    "cm.lap.alt_flowlabel" / bits(20),
    "cm.lap.reserved3" / bits(4),
    "cm.lap.alt_tfcclass" / bits(8),
    "cm.lap.alt_hoplim" / bits(8),
    "cm.lap.reserved4" / bits(2),
    "cm.lap.alt_pktrate" / bits(6),
    "cm.lap.alt_sl" / bits(4),
    "cm.lap.alt_subnetlocal" / bits(1),
    "cm.lap.reserved5" / bits(3),
    "cm.lap.alt_localacktout" / bits(5),
    "cm.lap.reserved6" / bits(3),
    "cm.lap.private" / octets(168),
), formats={"cm.lap.alt_localgid": _GID, "cm.lap.alt_remotegid": _GID})

CM_APR = Record("cm.apr", "CM AlternatePathResponse", cs.BitStruct(
    "cm.apr.localcommid" / bits(32),
    "cm.apr.remotecommid" / bits(32),
    "cm.apr.addinfolen" / bits(8),
    "cm.apr.arstatus" / bits(8),
    "cm.apr.reserved" / bits(16),
    "cm.apr.addinfo" / octets(72),
    "cm.apr.private" / octets(148),
))

#: RDMA-CM's IP addressing header at the start of a REQ's private data (``struct cma_hdr``):
#: an IPv4 address sits in the last 4 bytes of its 16 (``ip4.addr`` after ``pad[3]``).
IP_CM = Record("cm.req.ip_cm", "IP CM Request", cs.BitStruct(
    "cm.req.ip_cm.majv" / bits(4),
    "cm.req.ip_cm.minv" / bits(4),
    "cm.req.ip_cm.ipv" / bits(4),
    "cm.req.ip_cm.reserved" / bits(4),
    "cm.req.ip_cm.sport" / bits(16),
    "cm.req.ip_cm.sip6" / octets(16),
    "cm.req.ip_cm.dip6" / octets(16),
    "cm.req.ip_cm.private" / octets(56),
), formats={"cm.req.ip_cm.sip6": "ipv6", "cm.req.ip_cm.dip6": "ipv6"})

#: The service ID prefix of the RDMA IP CM range (IBA Annex A11.2.2: 0x0000000001PPpppp).
IP_CM_PREFIX = 0x0000000001

CM_MESSAGES = (CM_REQ, CM_MRA, CM_REJ, CM_REP, CM_RTU, CM_DREQ, CM_DREP, CM_SIDR_REQ,
               CM_SIDR_REP, CM_LAP, CM_APR)

"""Subnet administration (MAD class 0x03): the SA header and the records it carries.

Layouts: IBA Vol. 1 15.2.1.1 (SA MAD: SM_Key, AttributeOffset, ComponentMask after the RMPP
header) and 15.2.5 (records), bit for bit as rdma-core libibmad/fields.c lists them
(IB_SA_*, IB_SA_PR_*, IB_SA_MCM_*, IB_SA_SR_*). Field names are Wireshark's
(``infiniband.pathrecord.dgid`` ..., packet-infiniband.c), its oddity included: ServiceRecord
fields are ``linkrecord.service*``.
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Record, bits, octets
from ibwire.headers.smp import NODE_DESCRIPTION, NODE_INFO, PORT_INFO

SA_HEADER = Record("sa", "SA header", cs.BitStruct(
    "sa.smkey" / bits(64),
    "sa.attributeoffset" / bits(16),          # in 8-byte words
    "sa.reserved" / bits(16),
    "sa.componentmask" / bits(64),
))

#: Bytes after the SA header in one MAD (segment): 256 - 24 - 12 - 20.
SA_DATA = 200

PATH_RECORD = Record("pathrecord", "PathRecord", cs.BitStruct(
    "pathrecord.serviceid" / bits(64),        # reserved before IBA 1.2
    "pathrecord.dgid" / octets(16),
    "pathrecord.sgid" / octets(16),
    "pathrecord.dlid" / bits(16),
    "pathrecord.slid" / bits(16),
    "pathrecord.rawtraffic" / bits(1),
    "pathrecord.reserved0" / bits(3),
    "pathrecord.flowlabel" / bits(20),
    "pathrecord.hoplimit" / bits(8),
    "pathrecord.tclass" / bits(8),
    "pathrecord.reversible" / bits(1),
    "pathrecord.numbpath" / bits(7),
    "pathrecord.p_key" / bits(16),
    "pathrecord.qosclass" / bits(12),
    "pathrecord.sl" / bits(4),
    "pathrecord.mtuselector" / bits(2),
    "pathrecord.mtu" / bits(6),
    "pathrecord.rateselector" / bits(2),
    "pathrecord.rate" / bits(6),
    "pathrecord.packetlifetimeselector" / bits(2),
    "pathrecord.packetlifetime" / bits(6),
    "pathrecord.preference" / bits(8),
    "pathrecord.reserved1" / bits(48),
), formats={"pathrecord.dgid": "ipv6", "pathrecord.sgid": "ipv6"})

MC_MEMBER_RECORD = Record("mcmemberrecord", "MCMemberRecord", cs.BitStruct(
    "mcmemberrecord.mgid" / octets(16),
    "mcmemberrecord.portgid" / octets(16),
    "mcmemberrecord.q_key" / bits(32),
    "mcmemberrecord.mlid" / bits(16),
    "mcmemberrecord.mtuselector" / bits(2),
    "mcmemberrecord.mtu" / bits(6),
    "mcmemberrecord.tclass" / bits(8),
    "mcmemberrecord.p_key" / bits(16),
    "mcmemberrecord.rateselector" / bits(2),
    "mcmemberrecord.rate" / bits(6),
    "mcmemberrecord.packetlifetimeselector" / bits(2),
    "mcmemberrecord.packetlifetime" / bits(6),
    "mcmemberrecord.sl" / bits(4),
    "mcmemberrecord.flowlabel" / bits(20),
    "mcmemberrecord.hoplimit" / bits(8),
    "mcmemberrecord.scope" / bits(4),
    "mcmemberrecord.joinstate" / bits(4),
    "mcmemberrecord.proxyjoin" / bits(1),
    "mcmemberrecord.reserved" / bits(23),
), formats={"mcmemberrecord.mgid": "ipv6", "mcmemberrecord.portgid": "ipv6"})


def _fields_of(record: Record) -> list[cs.Construct]:
    """The subcons of an attribute's declaration, to embed it in a record (one definition)."""
    return list(record.declaration.subcon.subcons)


NODE_RECORD = Record("noderecord", "NodeRecord", cs.BitStruct(
    "sa.lid" / bits(16),
    "noderecord.reserved" / bits(16),
    *_fields_of(NODE_INFO),
    *_fields_of(NODE_DESCRIPTION),
), formats={"nodedescription.nodestring": "text"})

PORT_INFO_RECORD = Record("portinforecord", "PortInfoRecord", cs.BitStruct(
    "sa.endportlid" / bits(16),
    "sa.portnum" / bits(8),
    "portinforecord.reserved" / bits(8),
    *_fields_of(PORT_INFO),
))

SERVICE_RECORD = Record("servicerecord", "ServiceRecord", cs.BitStruct(
    "linkrecord.serviceid" / bits(64),
    "linkrecord.servicegid" / octets(16),
    "linkrecord.servicep_key" / bits(16),
    "servicerecord.reserved" / bits(16),
    "linkrecord.servicelease" / bits(32),
    "linkrecord.servicekey" / octets(16),
    "linkrecord.servicename" / octets(64),
    "linkrecord.servicedata" / octets(64),
), formats={"linkrecord.servicegid": "ipv6"})

#: Fields that are lists of fixed-size items, and the item size: ServiceData is 16 8-bit, 8
#: 16-bit, 4 32-bit and 2 64-bit values (15.2.5.14), 16 bytes each, a list of four as
#: Wireshark gives them (infiniband.linkrecord.servicedata).
ITEMS = {"linkrecord.servicedata": 16}

INFORM_INFO = Record("informinfo", "InformInfo", cs.BitStruct(
    "informinfo.gid" / octets(16),
    "informinfo.lidrangebegin" / bits(16),
    "informinfo.lidrangeend" / bits(16),
    "informinfo.reserved0" / bits(16),
    "informinfo.isgeneric" / bits(8),
    "informinfo.subscribe" / bits(8),
    "informinfo.type" / bits(16),
    "informinfo.trapnumberdeviceid" / bits(16),
    "informinfo.qpn" / bits(24),
    "informinfo.reserved1" / bits(3),
    "informinfo.resptimevalue" / bits(5),
    "informinfo.reserved2" / bits(8),
    "informinfo.producertypevendorid" / bits(24),
), formats={"informinfo.gid": "ipv6"})

LINK_RECORD = Record("linkrecord", "LinkRecord", cs.BitStruct(
    "linkrecord.fromlid" / bits(16),
    "linkrecord.fromport" / bits(8),
    "linkrecord.toport" / bits(8),
    "linkrecord.tolid" / bits(16),
    "linkrecord.reserved" / bits(16),
))

#: The fixed part of a MultiPathRecord (15.2.5.20); SGIDCount + DGIDCount GIDs follow, each a
#: :data:`MULTI_PATH_GID`.
MULTI_PATH_RECORD = Record("multipathrecord", "MultiPathRecord", cs.BitStruct(
    "multipathrecord.rawtraffic" / bits(1),
    "multipathrecord.reserved0" / bits(3),
    "multipathrecord.flowlabel" / bits(20),
    "multipathrecord.hoplimit" / bits(8),
    "multipathrecord.tclass" / bits(8),
    "multipathrecord.reversible" / bits(1),
    "multipathrecord.numbpath" / bits(7),
    "multipathrecord.p_key" / bits(16),
    "multipathrecord.qosclass" / bits(12),
    "multipathrecord.sl" / bits(4),
    "multipathrecord.mtuselector" / bits(2),
    "multipathrecord.mtu" / bits(6),
    "multipathrecord.rateselector" / bits(2),
    "multipathrecord.rate" / bits(6),
    "multipathrecord.packetlifetimeselector" / bits(2),
    "multipathrecord.packetlifetime" / bits(6),
    "multipathrecord.reserved1" / bits(8),
    "multipathrecord.independenceselector" / bits(2),
    "multipathrecord.gidscope" / bits(6),
    "multipathrecord.sgidcount" / bits(8),
    "multipathrecord.dgidcount" / bits(8),
    "multipathrecord.reserved2" / bits(56),
))
MULTI_PATH_GID = Record("multipathrecord.gids", "MultiPathRecord GID", cs.BitStruct(
    "multipathrecord.sdgid" / octets(16),
), formats={"multipathrecord.sdgid": "ipv6"})

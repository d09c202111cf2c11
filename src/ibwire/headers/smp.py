"""Subnet management packets (MAD classes 0x01 LID-routed, 0x81 directed-route) and their
attributes.

Layouts: IBA Vol. 1 14.2.1 (SMP format) and 14.2.5 (attributes), bit for bit as rdma-core
libibmad/fields.c lists them (IB_PORT_*, IB_NODE_*, IB_SW_*, IB_SMINFO_*, IB_DRSMP_*). The
64-byte SMP data area is filled by one attribute; what the attribute leaves of it is kept as
``<attribute>.padding``. Field names are Wireshark's (``infiniband.portinfo.lid`` ...,
packet-infiniband.c), its oddities included: the directed-route M_Key is ``smplid.mkey``, the
PortInfo GID prefix ``portinfo.guid``, GUIDInfo entries ``switchinfo.guid``.
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Record, bits, octets

#: LID-routed SMP (14.2.1.1): M_Key and 32 reserved bytes before the data, 128 after.
SMP_LID = Record("smplid", "SMP (LID routed)", cs.BitStruct(
    "smplid.mkey" / bits(64),
    "smplid.reserved" / octets(32),
))
SMP_LID_TAIL = Record("smplid.tail", "SMP reserved", cs.BitStruct(
    "smplid.reserved2" / octets(128),
))

#: Directed-route SMP (14.2.1.2): the D bit and status, hop pointer and hop count are the
#: common header's Status and ClassSpecific fields (decoded by ibwire.mads).
SMP_DIRECTED = Record("smpdirected", "SMP (directed route)", cs.BitStruct(
    "smplid.mkey" / bits(64),                 # sic: Wireshark's name
    "smpdirected.drslid" / bits(16),
    "smpdirected.drdlid" / bits(16),
    "smpdirected.reserved" / octets(28),
))
SMP_DIRECTED_PATHS = Record("smpdirected.paths", "SMP paths", cs.BitStruct(
    "smpdirected.initialpath" / octets(64),
    "smpdirected.returnpath" / octets(64),
))

#: Bytes of the SMP data area that an attribute fills.
SMP_DATA = 64

#: 14.2.5.15: a UTF-8 string, NUL padded to 64 bytes (text, as Wireshark shows it).
NODE_DESCRIPTION = Record("nodedescription", "NodeDescription", cs.BitStruct(
    "nodedescription.nodestring" / octets(64),
), formats={"nodedescription.nodestring": "text"})

NODE_INFO = Record("nodeinfo", "NodeInfo", cs.BitStruct(
    "nodeinfo.baseversion" / bits(8),
    "nodeinfo.classversion" / bits(8),
    "nodeinfo.nodetype" / bits(8),
    "nodeinfo.numports" / bits(8),
    "nodeinfo.systemimageguid" / bits(64),
    "nodeinfo.nodeguid" / bits(64),
    "nodeinfo.portguid" / bits(64),
    "nodeinfo.partitioncap" / bits(16),
    "nodeinfo.deviceid" / bits(16),
    "nodeinfo.revision" / bits(32),
    "nodeinfo.localportnum" / bits(8),
    "nodeinfo.vendorid" / bits(24),
))

SWITCH_INFO = Record("switchinfo", "SwitchInfo", cs.BitStruct(
    "switchinfo.linearfdbcap" / bits(16),
    "switchinfo.randomfdbcap" / bits(16),
    "switchinfo.multicastfdbcap" / bits(16),
    "switchinfo.linearfdbtop" / bits(16),
    "switchinfo.defaultport" / bits(8),
    "switchinfo.defaultmulticastprimaryport" / bits(8),
    "switchinfo.defaultmulticastnotprimaryport" / bits(8),
    "switchinfo.lifetimevalue" / bits(5),
    "switchinfo.portstatechange" / bits(1),
    "switchinfo.optimizedsltovlmappingprogramming" / bits(2),
    "switchinfo.lidsperport" / bits(16),
    "switchinfo.partitionenforcementcap" / bits(16),
    "switchinfo.inboundenforcementcap" / bits(1),
    "switchinfo.outboundenforcementcap" / bits(1),
    "switchinfo.filterrawinboundcap" / bits(1),
    "switchinfo.filterrawoutboundcap" / bits(1),
    "switchinfo.enhancedportzero" / bits(1),
    "switchinfo.reserved" / bits(11),
    "switchinfo.multicastfdbtop" / bits(16),
))

#: One GUIDInfo entry; the attribute is 8 of them (14.2.5.5).
GUID_INFO = Record("guidinfo", "GUIDInfo", cs.BitStruct(
    "switchinfo.guid" / bits(64),             # sic: Wireshark's name
))

PORT_INFO = Record("portinfo", "PortInfo", cs.BitStruct(
    "portinfo.m_key" / bits(64),
    "portinfo.guid" / bits(64),               # GidPrefix (sic: Wireshark's name)
    "portinfo.lid" / bits(16),
    "portinfo.mastersmlid" / bits(16),
    "portinfo.capabilitymask" / bits(32),
    "portinfo.diagcode" / bits(16),
    "portinfo.m_keyleaseperiod" / bits(16),
    "portinfo.localportnum" / bits(8),
    "portinfo.linkwidthenabled" / bits(8),
    "portinfo.linkwidthsupported" / bits(8),
    "portinfo.linkwidthactive" / bits(8),
    "portinfo.linkspeedsupported" / bits(4),
    "portinfo.portstate" / bits(4),
    "portinfo.portphysicalstate" / bits(4),
    "portinfo.linkdowndefaultstate" / bits(4),
    "portinfo.m_keyprotectbits" / bits(2),
    "portinfo.reserved0" / bits(3),
    "portinfo.lmc" / bits(3),
    "portinfo.linkspeedactive" / bits(4),
    "portinfo.linkspeedenabled" / bits(4),
    "portinfo.neighbormtu" / bits(4),
    "portinfo.mastersmsl" / bits(4),
    "portinfo.vlcap" / bits(4),
    "portinfo.inittype" / bits(4),
    "portinfo.vlhighlimit" / bits(8),
    "portinfo.vlarbitrationhighcap" / bits(8),
    "portinfo.vlarbitrationlowcap" / bits(8),
    "portinfo.inittypereply" / bits(4),
    "portinfo.mtucap" / bits(4),
    "portinfo.vlstallcount" / bits(3),
    "portinfo.hoqlife" / bits(5),
    "portinfo.operationalvls" / bits(4),
    "portinfo.partitionenforcementinbound" / bits(1),
    "portinfo.partitionenforcementoutbound" / bits(1),
    "portinfo.filterrawinbound" / bits(1),
    "portinfo.filterrawoutbound" / bits(1),
    "portinfo.m_keyviolations" / bits(16),
    "portinfo.p_keyviolations" / bits(16),
    "portinfo.q_keyviolations" / bits(16),
    "portinfo.guidcap" / bits(8),
    "portinfo.clientreregister" / bits(1),
    "portinfo.mcastpkeytrapsuppressionenabled" / bits(2),
    "portinfo.subnettimeout" / bits(5),
    "portinfo.reserved1" / bits(3),
    "portinfo.resptimevalue" / bits(5),
    "portinfo.localphyerrors" / bits(4),
    "portinfo.overrunerrors" / bits(4),
    "portinfo.maxcredithint" / bits(16),
    "portinfo.reserved2" / bits(8),
    "portinfo.linkroundtriplatency" / bits(24),
    "portinfo.capabilitymask2" / bits(16),
    "portinfo.linkspeedextactive" / bits(4),
    "portinfo.linkspeedextsupported" / bits(4),
    "portinfo.reserved3" / bits(3),
    "portinfo.linkspeedextenabled" / bits(5),
))

#: One P_Key table entry; the attribute is 32 of them (14.2.5.7).
P_KEY_TABLE = Record("p_keytable", "P_KeyTable", cs.BitStruct(
    "p_keytable.membershiptype" / bits(1),
    "p_keytable.p_keybase" / bits(15),
))

#: Two SL-to-VL entries (one byte); the attribute is 8 such bytes (14.2.5.8).
SL_TO_VL = Record("sltovlmappingtable", "SLtoVLMappingTable", cs.BitStruct(
    "sltovlmappingtable.sltovlhighbits" / bits(4),
    "sltovlmappingtable.sltovllowbits" / bits(4),
))

#: One VL arbitration entry; the attribute is 32 of them (14.2.5.9).
VL_ARBITRATION = Record("vlarbitrationtable", "VLArbitrationTable", cs.BitStruct(
    "vlarbitrationtable.reserved" / bits(4),
    "vlarbitrationtable.vl" / bits(4),
    "vlarbitrationtable.weight" / bits(8),
))

#: One port of the linear forwarding table; the attribute is 64 of them (14.2.5.10).
LINEAR_FORWARDING = Record("linearforwardingtable", "LinearForwardingTable", cs.BitStruct(
    "linearforwardingtable.port" / bits(8),
))

SM_INFO = Record("sminfo", "SMInfo", cs.BitStruct(
    "sminfo.guid" / bits(64),
    "sminfo.sm_key" / bits(64),
    "sminfo.actcount" / bits(32),
    "sminfo.priority" / bits(4),
    "sminfo.smstate" / bits(4),
))

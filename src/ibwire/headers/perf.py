"""Performance management (MAD class 0x04): the PerfMgt header and its attributes.

Layouts: IBA Vol. 1 16.1.1 (40 reserved bytes after the common MAD header, then 192 bytes of
data) and 16.1.3-16.1.4 (attributes), bit for bit as rdma-core libibmad/fields.c lists them
(IB_PC_*, IB_PC_EXT_*, IB_PSC_*). Field names are Wireshark's (``infiniband.portcounters.*``,
``infiniband.portcounters_ext.*``); PortSamplesControl/Result, which Wireshark does not decode,
follow its style.
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Record, bits

PERF_HEADER = Record("perfmgt", "PerfMgt header", cs.BitStruct(
    "perfmgt.reserved" / cs.Bytewise(cs.Bytes(40)),
))

#: Bytes after the PerfMgt header: 256 - 24 - 40.
PERF_DATA = 192

PORT_COUNTERS = Record("portcounters", "PortCounters", cs.BitStruct(
    "portcounters.reserved0" / bits(8),
    "portcounters.portselect" / bits(8),
    "portcounters.counterselect" / bits(16),
    "portcounters.symbolerrorcounter" / bits(16),
    "portcounters.linkerrorrecoverycounter" / bits(8),
    "portcounters.linkdownedcounter" / bits(8),
    "portcounters.portrcverrors" / bits(16),
    "portcounters.portrcvremotephysicalerrors" / bits(16),
    "portcounters.portrcvswitchrelayerrors" / bits(16),
    "portcounters.portxmitdiscards" / bits(16),
    "portcounters.portxmitconstrainterrors" / bits(8),
    "portcounters.portrcvconstrainterrors" / bits(8),
    "portcounters.counterselect2" / bits(8),
    "portcounters.locallinkintegrityerrors" / bits(4),
    "portcounters.excessivebufferoverrunerrors" / bits(4),
    "portcounters.reserved1" / bits(16),
    "portcounters.vl15dropped" / bits(16),
    "portcounters.portxmitdata" / bits(32),
    "portcounters.portrcvdata" / bits(32),
    "portcounters.portxmitpkts" / bits(32),
    "portcounters.portrcvpkts" / bits(32),
    "portcounters.portxmitwait" / bits(32),
))

PORT_COUNTERS_EXT = Record("portcounters_ext", "PortCountersExtended", cs.BitStruct(
    "portcounters_ext.reserved0" / bits(8),
    "portcounters_ext.portselect" / bits(8),
    "portcounters_ext.counterselect" / bits(16),
    "portcounters_ext.reserved1" / bits(32),
    "portcounters_ext.portxmitdata" / bits(64),
    "portcounters_ext.portrcvdata" / bits(64),
    "portcounters_ext.portxmitpkts" / bits(64),
    "portcounters_ext.portrcvpkts" / bits(64),
    "portcounters_ext.portunicastxmitpkts" / bits(64),
    "portcounters_ext.portunicastrcvpkts" / bits(64),
    "portcounters_ext.portmulticastxmitpkts" / bits(64),
    "portcounters_ext.portmulticastrcvpkts" / bits(64),
))

PORT_SAMPLES_CONTROL = Record("portsamplescontrol", "PortSamplesControl", cs.BitStruct(
    "portsamplescontrol.opcode" / bits(8),
    "portsamplescontrol.portselect" / bits(8),
    "portsamplescontrol.tick" / bits(8),
    "portsamplescontrol.reserved0" / bits(5),
    "portsamplescontrol.counterwidth" / bits(3),
    "portsamplescontrol.reserved1" / bits(2),
    "portsamplescontrol.countermask0" / bits(3),
    "portsamplescontrol.countermasks1to9" / bits(27),
    "portsamplescontrol.reserved2" / bits(1),
    "portsamplescontrol.countermasks10to14" / bits(15),
    "portsamplescontrol.samplemechanisms" / bits(8),
    "portsamplescontrol.reserved3" / bits(6),
    "portsamplescontrol.samplestatus" / bits(2),
    "portsamplescontrol.optionmask" / bits(64),
    "portsamplescontrol.vendormask" / bits(64),
    "portsamplescontrol.samplestart" / bits(32),
    "portsamplescontrol.sampleinterval" / bits(32),
    "portsamplescontrol.tag" / bits(16),
    *(f"portsamplescontrol.counterselect{i}" / bits(16) for i in range(15)),
    "portsamplescontrol.reserved4" / bits(32),
    "portsamplescontrol.samplesonlyoptionmask" / bits(64),
))

PORT_SAMPLES_RESULT = Record("portsamplesresult", "PortSamplesResult", cs.BitStruct(
    "portsamplesresult.tag" / bits(16),
    "portsamplesresult.reserved" / bits(14),
    "portsamplesresult.samplestatus" / bits(2),
    *(f"portsamplesresult.counter{i}" / bits(32) for i in range(15)),
))

"""IBA transport headers: BTH and the extended transport headers (ETHs), in wire order.

Layouts: IBA Vol. 1 ch. 9 as implemented by Linux rxe (drivers/infiniband/sw/rxe/rxe_hdr.h)
and ud_header.c; field names follow Wireshark's ``infiniband.*`` display filters where it has
them (``bth.destqp``, ``reth.va``), and the same style where it does not (``bth.fecn``).
"""

from __future__ import annotations

import construct as cs

from ibwire.headers.layout import Header, bits, octets

BTH = Header("bth", "BTH", cs.BitStruct(
    "opcode" / bits(8),
    "se" / bits(1),          # solicited event
    "m" / bits(1),           # MigReq
    "padcnt" / bits(2),
    "tver" / bits(4),        # transport header version, 0
    "p_key" / bits(16),
    "fecn" / bits(1),        # byte 4: FECN, BECN, Resv6a (rxe_hdr.h BTH_FECN_MASK ...)
    "becn" / bits(1),
    "resv6a" / bits(6),
    "destqp" / bits(24),
    "a" / bits(1),           # AckReq
    "reserved7" / bits(7),
    "psn" / bits(24),
))

RDETH = Header("rdeth", "RDETH", cs.BitStruct(
    "reserved" / bits(8),
    "eecnxt" / bits(24),     # EE-Context
))

DETH = Header("deth", "DETH", cs.BitStruct(
    "q_key" / bits(32),
    "reserved" / bits(8),
    "srcqp" / bits(24),
))

XRCETH = Header("xrceth", "XRCETH", cs.BitStruct(
    "reserved" / bits(8),
    "xrcsrq" / bits(24),
))

RETH = Header("reth", "RETH", cs.BitStruct(
    "va" / bits(64),
    "r_key" / bits(32),
    "dmalen" / bits(32),
))

# Swap/Add data comes BEFORE compare data (rxe_hdr.h struct rxe_atmeth).
ATOMIC_ETH = Header("atomiceth", "AtomicETH", cs.BitStruct(
    "va" / bits(64),
    "r_key" / bits(32),
    "swapdt" / bits(64),
    "cmpdt" / bits(64),
))

ATOMIC_ACK_ETH = Header("atomicacketh", "AtomicAckETH", cs.BitStruct(
    "origremdt" / bits(64),
))

# Syndrome: bit 7 reserved, bits 6-5 type (ACK, RNR NAK, reserved, NAK), bits 4-0 value;
# decoded by ibwire.headers.aeth.
AETH = Header("aeth", "AETH", cs.BitStruct(
    "syndrome" / bits(8),
    "msn" / bits(24),
))

IMM_DT = Header("immdt", "ImmDt", cs.BitStruct(
    "immdt" / bits(32),
))

IETH = Header("ieth", "IETH", cs.BitStruct(
    "ieth" / bits(32),       # the R_Key to invalidate
))

FETH = Header("feth", "FETH", cs.BitStruct(
    "reserved" / bits(26),
    "sel" / bits(2),         # selectivity level
    "plt" / bits(4),         # placement type
))

# RoCEv2 CNP (opcode 0x81): 16 reserved bytes after the BTH (scapy CNPPadding, roce.uts).
CNP_PAD = Header("cnppad", "CNPPad", cs.BitStruct(
    "reserved" / octets(16),
))

#: Extended headers by the names used in specs/opcodes.tsv.
EXTENDED = {
    "RDETH": RDETH,
    "DETH": DETH,
    "XRCETH": XRCETH,
    "RETH": RETH,
    "AtomicETH": ATOMIC_ETH,
    "AtomicAckETH": ATOMIC_ACK_ETH,
    "AETH": AETH,
    "ImmDt": IMM_DT,
    "IETH": IETH,
    "FETH": FETH,
    "CNPPad": CNP_PAD,
}

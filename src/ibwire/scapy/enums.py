"""Value names for scapy fields, all read from the specs tables (:mod:`ibwire.tables`).

* :data:`OPCODES` -- BTH opcode -> spec name (specs/opcodes.tsv), e.g. 0x0A RC_RDMA_WRITE_ONLY;
* :data:`AETH_SYNDROMES` -- every AETH syndrome byte with bit 7 clear -> a name made of the
  type (specs/aeth_syndromes.tsv) and its 5-bit value: ``ACK_UNLIMITED``, ``ACK_3``,
  ``RNR_NAK_14``, ``NAK_REMOTE_ACCESS_ERROR``, ``RESERVED_2``, so
  ``AETH(syndrome="NAK_PSN_SEQUENCE_ERROR")`` works;
* :data:`AETH_TYPES`, :data:`NAK_CODES` -- the tables themselves;
* :data:`LNH_NAMES`, :data:`MAD_CLASSES`, :data:`MAD_METHODS`, :data:`ERF_TYPES`.
"""

from __future__ import annotations

from ibwire.tables import (
    aeth_types,
    link_types,
    lnh_names,
    mad_classes,
    mad_methods,
    nak_codes,
    opcodes,
    read_table,
)

OPCODES: dict[int, str] = {value: op.name for value, op in sorted(opcodes().items())}
AETH_TYPES: dict[int, str] = dict(aeth_types())
NAK_CODES: dict[int, str] = dict(nak_codes())
LNH_NAMES: dict[int, str] = dict(lnh_names())
MAD_CLASSES: dict[int, str] = {value: name for value, (name, _) in mad_classes().items()}
MAD_METHODS: dict[int, str] = dict(mad_methods())
#: ERF record types (the low 7 bits of the ERF type byte) that specs/link_types.tsv lists.
ERF_TYPES: dict[int, str] = {value: name for (family, value), (name, _) in link_types().items()
                             if family == "erf"}


def _ack_names() -> dict[int, str]:
    """ACK values with a name of their own (31 = UNLIMITED), from the ``ack`` rows."""
    return {int(r["code"]): r["name"] for r in read_table("aeth_syndromes") if r["kind"] == "ack"}


def _syndrome_names() -> dict[int, str]:
    acks = _ack_names()
    names: dict[int, str] = {}
    for type_code, type_name in AETH_TYPES.items():
        for value in range(32):
            if type_name == "ACK" and value in acks:
                suffix = acks[value]
            elif type_name == "NAK":
                suffix = NAK_CODES.get(value, f"RESERVED_{value}")
            else:
                suffix = str(value)
            names[(type_code << 5) | value] = f"{type_name}_{suffix}"
    return names


AETH_SYNDROMES: dict[int, str] = _syndrome_names()

__all__ = ["AETH_SYNDROMES", "AETH_TYPES", "ERF_TYPES", "LNH_NAMES", "MAD_CLASSES",
           "MAD_METHODS", "NAK_CODES", "OPCODES"]

"""The AETH syndrome, decoded into its type and value (rxe_hdr.h enum aeth_syndrome)."""

from __future__ import annotations

from typing import Any

from ibwire.tables import aeth_types, nak_codes

#: The key Wireshark gives the 5-bit value, by type code (infiniband.aeth.syndrome.*).
_VALUE_KEYS = {0: "aeth.syndrome.credit_count", 1: "aeth.syndrome.timer",
               3: "aeth.syndrome.error_code"}


def decode_syndrome(syndrome: int) -> dict[str, Any]:
    """Derived keys of a syndrome byte: type code and name, and the value under its own name."""
    type_code = (syndrome >> 5) & 0x3
    value = syndrome & 0x1F
    out: dict[str, Any] = {
        "aeth.syndrome.opcode": type_code,
        "aeth.syndrome.type": aeth_types()[type_code],
    }
    if type_code in _VALUE_KEYS:
        out[_VALUE_KEYS[type_code]] = value
    if type_code == 3:
        out["aeth.syndrome.nak"] = nak_codes().get(value, "RESERVED")
    return out


def encode_syndrome(type_name: str, value: int) -> int:
    """The syndrome byte for a type name (ACK, RNR_NAK, NAK) and a 5-bit value."""
    codes = {name: code for code, name in aeth_types().items()}
    if type_name not in codes or not 0 <= value <= 0x1F:
        raise ValueError(f"bad AETH syndrome {type_name}/{value}")
    return (codes[type_name] << 5) | value

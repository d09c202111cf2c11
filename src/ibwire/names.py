"""Names beside numbers: what ``ibwire show -V`` prints next to a field's value.

Every name comes from a table in ``specs/`` (opcodes, AETH syndromes and RNR timers, MAD
classes, methods, attributes and status, CM REJ reasons); nothing is hand-listed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from ibwire.tables import (
    aeth_credits,
    aeth_types,
    cm_rej_reasons,
    mad_attributes,
    mad_classes,
    mad_methods,
    mad_status,
    nak_meanings,
    opcode_status,
    opcodes,
    rnr_timers,
)

if TYPE_CHECKING:
    import numpy as np

#: Short class names for summary lines (Wireshark's column names where it has them).
_CLASS_SHORT = {0x01: "SMP", 0x81: "SMP(DR)", 0x03: "SA", 0x04: "PerfMgt", 0x07: "CM"}
#: Fields printed in decimal, not hex (ports, lengths Wireshark shows in decimal).
DECIMAL = frozenset({"udp.srcport", "udp.dstport", "udp.length", "ip.len", "ipv6.plen",
                     "grh.paylen", "lrh.pktlen", "reth.dmalen", "aeth.msn", "bth.psn"})


def syndrome(value: int) -> str:
    """An AETH syndrome (IBA 9.7.5.2.8): ``ACK, 6 credits`` (code 5: the credit count
    encoding), ``ACK, unlimited credits``,
    ``RNR NAK: 1.28 ms`` (the RNR timer, IBA table 45), ``NAK: PSN sequence error``."""
    kind, low = (value >> 5) & 3, value & 0x1F
    name = aeth_types()[kind]
    if name == "ACK":
        return "ACK, unlimited credits" if low == 0x1F else f"ACK, {aeth_credits()[low]} credits"
    if name == "RNR_NAK":
        return f"RNR NAK: {rnr_timers()[low] / 1000:g} ms"
    if name == "NAK":
        return f"NAK: {nak_meanings().get(low, f'reserved code {low}')}"
    return f"reserved type, value {low}"


def method(value: int) -> str:
    name = mad_methods().get(value)
    if name is None and value & 0x80:
        base = mad_methods().get(value & 0x7F)
        name = f"{base}_RESP" if base else None
    return name or "UNKNOWN"


def status(value: int, mgmtclass: int | None = None) -> str:
    """The MAD status: its flags, the invalid-field code, the SA class code."""
    table = mad_status()
    parts = [name for bit, name in table["bit"].items() if value & bit]
    parts.append(table["code"].get((value >> 2) & 7, f"code {(value >> 2) & 7}"))
    if mgmtclass == 0x03 and value >> 8:
        parts.append(table["sa"].get(value >> 8, f"SA code {value >> 8}"))
    return ", ".join(parts)


def attribute(mgmtclass: int, value: int) -> str:
    row = mad_attributes().get((mgmtclass, value))
    return row.name if row else "unknown attribute"


def describe(key: str, value: Any, fields: Mapping[str, Any]) -> str | None:
    """The name to print beside ``key``'s value (None: nothing to add)."""
    namer = _NAMERS.get(key)
    if namer is None or not isinstance(value, int):
        return None
    return namer(value, fields)


_NAMERS: dict[str, Callable[[int, Mapping[str, Any]], str]] = {
    "bth.opcode": lambda v, f: opcodes()[v].name if v in opcodes() else f"{opcode_status(v)} opcode",
    "aeth.syndrome": lambda v, f: syndrome(v),
    "mad.mgmtclass": lambda v, f: mad_classes().get(v, ("unknown class", False))[0],
    "mad.method": lambda v, f: method(v),
    "mad.status": lambda v, f: status(v, f.get("mad.mgmtclass")),
    "mad.attributeid": lambda v, f: attribute(f.get("mad.mgmtclass", -1), v),
    "cm.rej.reason": lambda v, f: cm_rej_reasons().get(v, "unknown reason"),
}
#: The keys :func:`describe` names.
NAMED = frozenset(_NAMERS)


#: The keys whose name depends on the MAD's class as well as on the value (``_NAMERS``).
BY_CLASS = frozenset({"mad.status", "mad.attributeid"})
#: The keys the column path names by a text column of their own (``name:KEY``, ``names.column``):
#: those whose name depends on the value alone, in 8 bits, and those of :data:`BY_CLASS`.
NAME_COLUMNS = frozenset({"aeth.syndrome", "mad.mgmtclass", "mad.method", *BY_CLASS})


@cache
def _name_table(key: str) -> np.ndarray:
    """`` (name)`` of each of the 256 values of ``key`` (an object array: one lookup a batch)."""
    import numpy as np

    return np.array([f" ({describe(key, v, {})})" for v in range(256)], dtype=object)


def column(key: str, values: np.ndarray, mgmtclass: np.ndarray | None = None) -> list[str]:
    """The `` (name)`` texts of a column of ``key``'s values (``NAME_COLUMNS``); a key of
    :data:`BY_CLASS` needs the ``mad.mgmtclass`` column beside it (each distinct pair named
    once)."""
    import numpy as np

    if key not in BY_CLASS:
        return _name_table(key)[values.astype(np.intp, copy=False) & 0xFF].tolist()
    if mgmtclass is None:
        raise ValueError(f"{key} is named by the MAD's class: the mad.mgmtclass column is needed")
    pairs = (mgmtclass.astype(np.int64) & 0xFF) << 32 | values.astype(np.int64)
    distinct, inverse = np.unique(pairs, return_inverse=True)
    named = np.array([f" ({describe(key, p & 0xFFFFFFFF, {'mad.mgmtclass': p >> 32})})"
                      for p in distinct.tolist()], dtype=object)
    return named[inverse.reshape(-1)].tolist()


def mad_summary(fields: Mapping[str, Any]) -> str | None:
    """``CM ConnectRequest QP=0x000011 PSN=291``: the MAD of a summary line (None: no MAD).
    QPNs and PSNs are written as the line writes BTH's: a QPN in hex of 6 digits, a PSN in
    decimal."""
    klass = fields.get("mad.mgmtclass")
    if klass is None:
        return None
    row = mad_attributes().get((klass, fields.get("mad.attributeid", -1)))
    short = _CLASS_SHORT.get(klass, mad_classes().get(klass, (f"class 0x{klass:02x}", 0))[0])
    text = f"{short} {row.name if row else method(fields.get('mad.method', 0))}"
    for key, label in (("cm.req.localqpn", "QP"), ("cm.req.startpsn", "PSN"),
                       ("cm.rep.localqpn", "QP"), ("cm.rep.startpsn", "PSN"),
                       ("cm.req.remoteqpneecn", "QP"), ("cm.sidr_rep.qpn", "QP")):
        if key in fields:
            text += f" {label}={fields[key]:#08x}" if label == "QP" else \
                f" {label}={fields[key]}"
    if "cm.rej.reason" in fields:
        text += f" reason={cm_rej_reasons().get(fields['cm.rej.reason'], fields['cm.rej.reason'])}"
    if fields.get("mad.status"):
        text += f" status={status(fields['mad.status'], klass)}"
    return text

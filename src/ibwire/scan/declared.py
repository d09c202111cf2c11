"""The scanner's layout derived from the header declarations and the specs/ tables.

:mod:`ibwire.scan.program` reads its slots and tables from ``ibwire/scan/_layout.py``, plain
values written from here by ``tools/gen_scan_layout.py``, so that a scan (``check``, and
``show``'s summary lines) starts without loading Construct and the declarations.
``tests/scan/test_tally.py`` checks that the written module is what this derives.
"""

from __future__ import annotations

import numpy as np

from ibwire.crc._common import SITES
from ibwire.headers import BTH, ETHERNET, EXTENDED, GRH, IPV4, IPV6, LRH, MAD, RMPP, UDP, VLAN
from ibwire.headers.fields import Layout
from ibwire.packet import STACKED
from ibwire.scan.views import VIEWS
from ibwire.tables import mad_classes, opcodes, well_known_qps

MAX_CHAIN = 4
"""Extended headers an opcode may have (the C scanner's chain table width)."""
MAX_VIEWS = 32
"""(attribute, view) pairs the C scanner can hold."""
NO_OPCODE = 0xFF
"""``chain_len`` of a reserved or vendor opcode: its headers after the BTH are unknown."""


def slots() -> tuple[Layout, ...]:
    """The header slots, in the scanner's order: Ethernet, the outermost VLAN tag, IPv4, IPv6,
    UDP, LRH, GRH, BTH, every extended header, the MAD and RMPP headers, the MAD views."""
    return (ETHERNET, VLAN, IPV4, IPV6, UDP, LRH, GRH, BTH, *EXTENDED.values(), MAD, RMPP,
            *VIEWS)


def _slot() -> dict[str, int]:
    return {h.name: i for i, h in enumerate(slots())}


def opcode_chains() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chain uint8[256, MAX_CHAIN] of slots, chain_len uint8[256] (NO_OPCODE: unknown),
    flags uint8[256]: bit 0 UD transport, bit 1 carries a payload)."""
    slot = _slot()
    chain = np.zeros((256, MAX_CHAIN), np.uint8)
    length = np.full(256, NO_OPCODE, np.uint8)
    flags = np.zeros(256, np.uint8)
    for value, op in opcodes().items():
        if len(op.headers) > MAX_CHAIN:
            raise ValueError(f"opcode {op.name}: more than {MAX_CHAIN} extended headers")
        for i, name in enumerate(op.headers):
            chain[value, i] = slot[EXTENDED[name].name]
        length[value] = len(op.headers)
        flags[value] = (op.transport == "UD") | (op.payload << 1)
    return chain, length, flags


def rmpp_classes() -> np.ndarray:
    """uint8[256]: 1 where a MAD of that management class carries an RMPP header."""
    table = np.zeros(256, np.uint8)
    for value, (_name, rmpp) in mad_classes().items():
        table[value] = rmpp
    return table


def mad_views() -> tuple[tuple[int, int], ...]:
    """(MgmtClass << 16 | AttributeID, view slot) for every attribute a view reads, sorted."""
    slot = _slot()
    rows = sorted((klass << 16 | attribute, slot[v.name])
                  for v in VIEWS for klass, attribute in v.attributes())
    if len(rows) > MAX_VIEWS:
        raise ValueError(f"more than {MAX_VIEWS} (attribute, view) pairs for the C scanner")
    return tuple(rows)


def mad_body_headers() -> tuple[tuple[int, int], ...]:
    """(class, size) of the header every body of a class ``ibwire.mads`` decodes starts
    with, whatever its attribute (``ibwire.mads.plan``; SA's only in an RMPP DATA segment or
    an inactive RMPP): ``show`` reads them from ``_layout`` (no MAD declarations loaded)."""
    from ibwire.headers import perf, sa, smp
    from ibwire.mad_numbers import CM_CLASS, PERF, SA_CLASS, SMP_DIRECTED, SMP_LID

    return ((CM_CLASS, 0), (SMP_LID, smp.SMP_LID.size), (SMP_DIRECTED, smp.SMP_DIRECTED.size),
            (PERF, perf.PERF_HEADER.size), (SA_CLASS, sa.SA_HEADER.size))


def layout() -> dict[str, object]:
    """Everything ``_layout.py`` holds, as plain values: the C scanner's tables and the slots'
    bit layouts (name, title, size, full keys, fields as (name, bits, shift, format))."""
    declared = slots()
    slot = _slot()
    chain, length, flags = opcode_chains()
    return {
        "MAX_CHAIN": MAX_CHAIN,
        "MAX_VIEWS": MAX_VIEWS,
        "NO_OPCODE": NO_OPCODE,
        "SLOT_SIZES": tuple(h.size for h in declared),
        "SLOT": slot,
        "CHAIN": chain.tobytes(),
        "CHAIN_LEN": length.tobytes(),
        "OP_FLAGS": flags.tobytes(),
        "RMPP": rmpp_classes().tobytes(),
        "MAD_VIEWS": mad_views(),
        "WELL_KNOWN_QPS": tuple(sorted(well_known_qps())),
        "SITE_SLOT_BASE": len(SITES),
        "SITE_PADCNT": len(SITES) + len(declared),
        "MAD_BODY_HEADERS": mad_body_headers(),
        "STACKED_SLOTS": tuple(sorted(slot[name] for name in STACKED)),
        "VIEW_SLOTS": tuple(slot[v.name] for v in VIEWS),
        "SLOT_LAYOUTS": tuple(
            (h.name, h.title, h.size, h.full_keys,
             tuple((f.name, f.bits, f.shift, f.fmt) for f in h.fields))
            for h in declared),
    }


def _source_of(name: str, value: object) -> str:
    if name == "SLOT_LAYOUTS":
        rows = []
        for *head, fields in value:  # type: ignore[attr-defined]
            body = "".join(f"        {f!r},\n" for f in fields)
            rows.append(f"    ({', '.join(repr(v) for v in head)}, (\n{body}    )),\n")
        return f"{name} = (\n{''.join(rows)})"
    if isinstance(value, bytes):
        text = value.hex()
        chunks = [text[i:i + 88] for i in range(0, len(text), 88)]
        body = "\n".join(f'    "{c}"' for c in chunks)
        return f"{name} = bytes.fromhex(\n{body}\n)"
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        rows = "".join(f"    ({', '.join(hex(v) for v in row)}),\n" for row in value)
        return f"{name} = (\n{rows})"
    if isinstance(value, dict):
        items = "".join(f'    "{k}": {v},\n' for k, v in value.items())
        return f"{name}: dict[str, int] = {{\n{items}}}"
    return f"{name} = {value!r}"


def layout_source() -> str:
    """The text of ``ibwire/scan/_layout.py``."""
    lines = ['"""The scanner layout of ``ibwire.scan.declared.layout()``, written by',
             "tools/gen_scan_layout.py; tests/scan/test_tally.py checks it is current. Do not",
             'edit: run the tool."""', "", "from __future__ import annotations", ""]
    lines.extend(_source_of(name, value) for name, value in layout().items())
    return "\n".join(lines) + "\n"

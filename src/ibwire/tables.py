"""The protocol as data: loads the tables of ``specs/`` (opcodes, AETH syndromes, MAD classes ...).

An installed package carries them as ``ibwire/_specs/*.tsv`` (copied at build time); a source
checkout reads the top-level ``specs/`` directly. Nothing here is hand-listed: a new opcode is
one row in ``specs/opcodes.tsv``.
"""

from __future__ import annotations

import os
from functools import cache
from typing import NamedTuple

# os.path, not pathlib, and NamedTuple, not dataclasses: ``ibwire check`` imports this module
# and starts in milliseconds (tests/cli/test_cli.py checks what it loads).
_HERE = os.path.dirname(os.path.realpath(__file__))
_CANDIDATES = (os.path.join(_HERE, "_specs"), os.path.join(_HERE, os.pardir, os.pardir, "specs"))


def specs_dir() -> str:
    """The directory the tables are read from."""
    for candidate in _CANDIDATES:
        if os.path.isfile(os.path.join(candidate, "opcodes.tsv")):
            return os.path.normpath(candidate)
    raise FileNotFoundError("ibwire: specs tables not found (broken install?)")


def read_table(name: str) -> list[dict[str, str]]:
    """Rows of ``specs/<name>.tsv`` as dicts; '#' lines are comments, blank lines are skipped.
    Fields are split on tabs and never quoted (no csv module: it is not worth its import to
    ``ibwire check``; tests/core/test_specs.py reads every table with csv too)."""
    path = os.path.join(specs_dir(), f"{name}.tsv")
    with open(path, encoding="utf-8") as fh:
        lines = [(number, line.rstrip("\r\n")) for number, line in enumerate(fh, 1)
                 if not line.startswith("#") and line.strip()]
    names = lines[0][1].split("\t")
    rows = []
    for number, line in lines[1:]:
        fields = line.split("\t")
        if len(fields) != len(names):
            raise ValueError(f"{path}: line {number}: {len(fields)} fields, the header names "
                             f"{len(names)}")
        rows.append(dict(zip(names, fields, strict=True)))
    return rows


def _int(text: str) -> int:
    return int(text, 0)


class Opcode(NamedTuple):
    """One row of the BTH opcode table."""

    value: int
    name: str
    transport: str
    headers: tuple[str, ...]
    payload: bool
    source: str

    @property
    def hdr_bytes(self) -> int:
        """Bytes of BTH plus extended headers (the engine's header-length table)."""
        sizes = header_sizes()
        return sizes["BTH"] + sum(sizes[h] for h in self.headers)


@cache
def opcodes() -> dict[int, Opcode]:
    table = {}
    for row in read_table("opcodes"):
        op = Opcode(
            value=_int(row["opcode"]),
            name=row["name"],
            transport=row["transport"],
            headers=tuple(h for h in row["headers"].split(",") if h and h != "-"),
            payload=row["payload"] == "yes",
            source=row["source"],
        )
        table[op.value] = op
    return table


@cache
def opcodes_by_name() -> dict[str, Opcode]:
    return {op.name: op for op in opcodes().values()}


@cache
def header_sizes() -> dict[str, int]:
    return {row["header"]: int(row["bytes"]) for row in read_table("headers")}


@cache
def constants() -> dict[str, int]:
    return {row["name"]: _int(row["value"]) for row in read_table("constants")}


@cache
def aeth_types() -> dict[int, str]:
    return {int(r["code"]): r["name"] for r in read_table("aeth_syndromes") if r["kind"] == "type"}


@cache
def nak_codes() -> dict[int, str]:
    return {int(r["code"]): r["name"] for r in read_table("aeth_syndromes") if r["kind"] == "nak"}


@cache
def aeth_credits() -> dict[int, int]:
    """ACK credit code -> number of credits (``specs/aeth_credits.tsv``; 31, unlimited, absent)."""
    return {int(r["code"]): int(r["credits"]) for r in read_table("aeth_credits")}


@cache
def nak_meanings() -> dict[int, str]:
    """NAK code -> what it means, in words (``specs/aeth_syndromes.tsv``)."""
    return {int(r["code"]): r["meaning"] for r in read_table("aeth_syndromes")
            if r["kind"] == "nak"}


@cache
def lnh_names() -> dict[int, str]:
    return {int(r["lnh"]): r["name"] for r in read_table("lnh")}


@cache
def mad_classes() -> dict[int, tuple[str, bool]]:
    """MgmtClass -> (name, carries an RMPP header)."""
    return {_int(r["class"]): (r["name"], r["rmpp"] == "yes") for r in read_table("mad_classes")}


@cache
def mad_methods() -> dict[int, str]:
    return {_int(r["method"]): r["name"] for r in read_table("mad_methods")}


@cache
def well_known_qps() -> dict[int, str]:
    return {int(r["qpn"]): r["name"] for r in read_table("well_known_qps")}


@cache
def link_types() -> dict[tuple[str, int], tuple[str, str]]:
    """(family, value) -> (name, where the frame starts)."""
    return {
        (r["family"], _int(r["value"])): (r["name"], r["starts_at"]) for r in read_table("link_types")
    }


MANUFACTURER_FIRST = constants()["MANUFACTURER_OPCODE_FIRST"]


def opcode_status(value: int) -> str:
    """'known', 'manufacturer' (0xE0-0xFF) or 'reserved'."""
    if value in opcodes():
        return "known"
    return "manufacturer" if value >= MANUFACTURER_FIRST else "reserved"


class MadAttribute(NamedTuple):
    """One row of ``specs/mad_attributes.tsv``."""

    mgmtclass: int
    attribute: int
    name: str
    record: str
    entries: int
    source: str


@cache
def mad_attributes() -> dict[tuple[int, int], MadAttribute]:
    """(MgmtClass, AttributeID) -> the attribute ibwire decodes there."""
    table = {}
    for r in read_table("mad_attributes"):
        row = MadAttribute(_int(r["class"]), _int(r["attribute"]), r["name"], r["record"],
                           int(r["entries"]), r["source"])
        table[row.mgmtclass, row.attribute] = row
    return table


@cache
def cm_rej_reasons() -> dict[int, str]:
    return {int(r["reason"]): r["name"] for r in read_table("cm_rej_reasons")}


@cache
def mad_status() -> dict[str, dict[int, str]]:
    """kind ('bit', 'code', 'sa') -> value -> name (see specs/mad_status.tsv)."""
    out: dict[str, dict[int, str]] = {}
    for r in read_table("mad_status"):
        out.setdefault(r["kind"], {})[_int(r["value"])] = r["name"]
    return out


@cache
def rnr_timers() -> dict[int, int]:
    """RNR NAK timer code -> microseconds (``specs/rnr_timers.tsv``)."""
    return {int(r["code"]): int(r["usec"]) for r in read_table("rnr_timers")}


@cache
def port_capability_bits() -> dict[int, str]:
    """PortInfo CapabilityMask bit -> name (``specs/port_capability_mask.tsv``)."""
    return {int(r["bit"]): r["name"] for r in read_table("port_capability_mask")}

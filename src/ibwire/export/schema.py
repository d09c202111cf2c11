"""The exported dataset's schema, and a scanned batch as an Arrow table of it.

One schema for every capture and encapsulation (``SCHEMA_VERSION`` in the Arrow metadata as
``ibwire.schema_version``): the scanner's header-field columns (``ibwire.scan.program``) named
as ``ibwire show --json`` names them, null where the packet has no such header; the values
``show --json`` derives from them (``bth.opcode.name``, the AETH syndrome's parts); and the
columns that place a row: ``capture``, ``record``, ``timestamp_ns``, ``connection``. Numbers
keep the field's width (unsigned), addresses are text as ``show`` writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from ibwire.crc._common import KIND_NAMES
from ibwire.export import arrays
from ibwire.headers.aeth import decode_syndrome
from ibwire.headers.fields import display
from ibwire.pcap.records import LINK_NAMES, LINK_OTHER
from ibwire.scan import program
from ibwire.scan.batch import ScanBatch
from ibwire.tables import opcodes

SCHEMA_VERSION = "3"  # 2: records numbered from 1; 3: connections' lists as list columns
NOT_IB = program.ERROR_NAMES.index("not_ib")

#: Columns before the header fields: (name, Arrow type name, meaning) for the docs and tests.
LEADING: tuple[tuple[str, str, str], ...] = (
    ("capture", "string", "the capture file's name"),
    ("record", "int64", "record number in the capture, from 1 (show's, tshark's frame.number)"),
    ("timestamp_ns", "int64", "capture timestamp, ns since the epoch (UTC)"),
    ("link", "string", "link the frame starts with: ethernet, infiniband, ip, grh, other"),
    ("encapsulation", "string", "rocev2_ipv4, rocev2_ipv6, rocev1, ib_local, ib_global, "
                                "ib_raw, other"),
    ("frame.len", "uint32", "captured bytes"),
    ("frame.orig_len", "uint32", "bytes on the wire"),
    ("connection", "int32", "the packet's connection: its row number in `ibwire qp` "
                            "(from 0), null when it belongs to none"),
)
#: Columns after the header fields.
TRAILING: tuple[tuple[str, str, str], ...] = (
    ("bth.opcode.name", "string", "the opcode's name (null for a reserved one)"),
    ("aeth.syndrome.opcode", "uint8", "AETH syndrome type code"),
    ("aeth.syndrome.type", "string", "ACK, RNR_NAK, RESERVED, NAK"),
    ("aeth.syndrome.credit_count", "uint8", "credit count of an ACK"),
    ("aeth.syndrome.timer", "uint8", "RNR timer of an RNR NAK"),
    ("aeth.syndrome.error_code", "uint8", "NAK code"),
    ("aeth.syndrome.nak", "string", "NAK code's name"),
    ("icrc", "uint32", "ICRC as on the wire (little-endian value), null without one"),
    ("vcrc", "uint16", "VCRC, null without one"),
    ("payload.length", "int32", "payload bytes, pad excluded"),
    ("icrc_ok", "bool", "ICRC verdict, null when there is none"),
    ("vcrc_ok", "bool", "VCRC verdict, null when there is none"),
    ("error", "string", "why the record or packet could not be read, null if it could"),
)
#: Columns always written whatever ``--fields`` selects.
ALWAYS = ("capture", "record", "timestamp_ns", "connection", "error")
_SYNDROME_KEYS = tuple(name for name, _, _ in TRAILING if name.startswith("aeth.syndrome."))


def _arrow_type(name: str) -> Any:
    import pyarrow as pa

    return {"string": pa.string(), "bool": pa.bool_()}.get(name) or getattr(pa, name)()


def field_columns() -> tuple[program.Column, ...]:
    """The header-field columns exported: not the scanner's MAD views (``cm.localcommid``
    ...: ``ibwire.scan.views``), which are no ``show --json`` keys of their own and would
    change the schema."""
    return tuple(c for c in program.columns() if c.slot not in program.VIEW_SLOTS)


def _field_type(c: program.Column) -> str:
    f = program.SLOTS[c.slot].by_name[c.field]
    return "string" if f.fmt is not None else {1: "uint8", 2: "uint16", 4: "uint32",
                                                8: "uint64"}[c.width]


@cache
def all_columns() -> tuple[tuple[str, str, str], ...]:
    """(name, Arrow type, meaning) of every column, in order."""
    fields = tuple((c.name, _field_type(c), f"{program.SLOTS[c.slot].title} field")
                   for c in field_columns())
    return (*LEADING, *fields, *TRAILING)


def selected_columns(fields: Sequence[str] | None) -> tuple[str, ...]:
    """The columns kept for ``--fields`` (None: all): keys (``bth.psn``), header names
    (``reth``: its fields and derived keys), or any other column's name."""
    names = [name for name, _, _ in all_columns()]
    if not fields:
        return tuple(names)
    headers = {h.name for h in program.SLOTS}
    unknown = [f for f in fields if f not in names and f not in headers]
    if unknown:
        raise ValueError(f"no exported column {unknown[0]!r}: keys such as 'bth.psn', header "
                         "names such as 'reth', or columns such as 'icrc_ok'")
    wanted = set(fields)
    return tuple(n for n in names if n in ALWAYS or n in wanted
                 or (n.split(".")[0] in wanted and n.split(".")[0] in headers))


def scan_fields(columns: Sequence[str]) -> tuple[str, ...]:
    """Scanner header-field columns needed for ``columns`` (and the connection key)."""
    from ibwire.analysis import SCAN_FIELDS

    names = {c.name for c in field_columns()}
    need = {n for n in columns if n in names} | set(SCAN_FIELDS) | {"bth.opcode"}
    if any(n.startswith("aeth.") for n in columns):
        need.add("aeth.syndrome")
    return tuple(n for n in (c.name for c in field_columns()) if n in need)


def schema(columns: Sequence[str] | None = None, metadata: dict[str, str] | None = None,
           dictionaries: bool = False) -> Any:
    """The ``pyarrow.Schema`` of ``columns`` (default all), with the schema version; with
    ``dictionaries``, text columns as ``to_table`` makes them for Parquet."""
    import pyarrow as pa

    types = _column_types(dictionaries)
    names = columns or [name for name, _, _ in all_columns()]
    meta = {"ibwire.schema_version": SCHEMA_VERSION, **(metadata or {})}
    return pa.schema([pa.field(n, types[n]) for n in names], metadata=meta)


def _text_type(dictionary: bool) -> Any:
    """Text columns' Arrow type: strings, or strings in a dictionary (``arrays.pick``)."""
    import pyarrow as pa

    return pa.dictionary(pa.int32(), pa.string()) if dictionary else pa.string()


@cache
def _column_types(dictionaries: bool = False) -> dict[str, Any]:
    """Each column's Arrow type, by name (text columns as ``_text_type`` gives them)."""
    import pyarrow as pa

    types = {name: _arrow_type(t) for name, t, _ in all_columns()}
    text = _text_type(dictionaries)
    return {name: text if t == pa.string() else t for name, t in types.items()}


@cache
def _fields_by_name() -> dict[str, program.Column]:
    return {c.name: c for c in field_columns()}


@cache
def _opcode_names() -> tuple[np.ndarray, np.ndarray]:
    names = opcodes()
    known = np.array([op in names for op in range(256)], bool)
    return known, np.array([names[op].name if op in names else "" for op in range(256)],
                           object)


@cache
def _syndrome_tables() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per derived AETH key: (present[256], value[256]) over the syndrome byte."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    decoded = [decode_syndrome(s) for s in range(256)]
    for key in _SYNDROME_KEYS:
        present = np.array([key in d for d in decoded], bool)
        text = key.endswith((".type", ".nak"))
        values = np.array([d.get(key, "" if text else 0) for d in decoded],
                          object if text else np.uint8)
        out[key] = present, values
    return out


def _text_column(batch: ScanBatch, name: str, rows: np.ndarray | slice,
                 present: np.ndarray, dictionary: bool) -> Any:
    """Address or bytes column ``name`` of ``rows`` as text, each distinct value made once,
    null where not ``present``."""
    c = program.column(name)
    f = program.SLOTS[c.slot].by_name[c.field]
    values, indices = arrays.distinct(batch.columns[name][rows])
    texts = []
    for v in values.tolist():
        shown = display(int.from_bytes(bytes(v), "big") if isinstance(v, list) else v, f)
        texts.append(shown.hex() if isinstance(shown, bytes) else shown)
    return arrays.pick(texts, indices, present, dictionary)


def _masked(values: np.ndarray, present: np.ndarray, arrow_type: Any) -> Any:
    if not present.any():
        return arrays.nulls(len(values), arrow_type)
    return arrays.numeric(values, arrow_type, present)


def _named(names: Sequence[str], codes: np.ndarray, present: np.ndarray, dictionary: bool
           ) -> Any:
    """Text ``names[code]`` for each code, null where not ``present`` (made in Arrow)."""
    if not present.any():
        return arrays.nulls(len(codes), _text_type(dictionary))
    return arrays.pick(names, codes, present, dictionary)


def to_table(batch: ScanBatch, rows: np.ndarray, capture: str, connection: np.ndarray,
             columns: Sequence[str], payload: np.ndarray | None = None,
             dictionaries: bool = False, views: bool = False) -> Any:
    """Rows ``rows`` of a scanned batch as a ``pyarrow.Table`` of ``columns``;
    ``connection`` gives each batch row's connection (-1 none), ``payload`` the
    ``payload.length`` show gives each batch row (default the scanner's); with
    ``dictionaries``, text columns as dictionary arrays (``schema(dictionaries=True)``);
    with ``views``, where ``rows`` are all the batch's rows, number columns are the batch's
    own (no copy; the table then holds the batch's column block, all of it)."""
    import pyarrow as pa

    cols = batch.columns
    n = len(rows)
    picked: np.ndarray | slice = slice(None) if views and n == len(cols["record"]) else rows
    types = _column_types(dictionaries)
    text = _text_type(dictionaries)
    headers = cols["headers"][picked]
    error = cols["error"][picked]
    out: dict[str, Any] = {}
    everywhere = np.ones(n, bool)

    def present_of(slot: int) -> np.ndarray:
        return (headers & np.uint32(1 << slot)) != 0

    slot_present: dict[int, np.ndarray] = {}
    field_names = _fields_by_name()
    for name in columns:
        if name == "capture":
            out[name] = arrays.pick([capture], np.zeros(n, np.int32), None, dictionaries)
        elif name == "record":  # the scanner's count from 0
            out[name] = arrays.numeric(cols[name][picked] + 1, types[name])
        elif name in ("timestamp_ns", "frame.len", "frame.orig_len"):
            out[name] = arrays.numeric(cols[name][picked], types[name])
        elif name == "link":
            names = [LINK_NAMES.get(k, LINK_NAMES[LINK_OTHER]) for k in range(256)]
            out[name] = _named(names, cols["link"][picked], everywhere, dictionaries)
        elif name == "encapsulation":
            kinds = ["other"] + [program.PACKET_ENCAPSULATIONS[k] for k in KIND_NAMES[1:]]
            kind = np.where(error == NOT_IB, 0, cols["encapsulation"][picked])
            out[name] = _named(kinds, kind, everywhere, dictionaries)
        elif name == "connection":
            conn = connection[picked]
            out[name] = _masked(conn.astype(np.int32), conn >= 0, types[name])
        elif name in field_names:
            c = field_names[name]
            if c.slot not in slot_present:
                slot_present[c.slot] = present_of(c.slot)
            present = slot_present[c.slot]
            if not present.any():
                out[name] = arrays.nulls(n, types[name])
            elif types[name] == text:
                out[name] = _text_column(batch, name, picked, present, dictionaries)
            else:
                out[name] = _masked(cols[name][picked], present, types[name])
        elif name == "bth.opcode.name":
            known, names = _opcode_names()
            op = cols["bth.opcode"][picked] if "bth.opcode" in cols else np.zeros(n, np.uint8)
            has = present_of(program.SLOT["bth"]) & known[op]
            out[name] = _named(names.tolist(), op, has, dictionaries)
        elif name.startswith("aeth.syndrome."):
            present_tab, values = _syndrome_tables()[name]
            syn = cols["aeth.syndrome"][picked]
            has = present_of(program.SLOT["aeth"]) & present_tab[syn]
            if values.dtype == object:
                out[name] = _named(values.tolist(), syn, has, dictionaries)
            else:
                out[name] = _masked(values[syn], has, types[name])
        elif name in ("icrc", "vcrc"):
            out[name] = _masked(cols[name][picked], cols[f"offset.{name}"][picked] >= 0,
                                   types[name])
        elif name == "payload.length":
            values = cols[name][picked] if payload is None else payload[picked]
            out[name] = _masked(values.astype(np.int32), values >= 0, types[name])
        elif name in ("icrc_ok", "vcrc_ok"):
            v = cols[name][picked]
            out[name] = _masked(v == 1, v >= 0, types[name])
        elif name == "error":
            out[name] = _errors(batch, rows, error, dictionaries)
        else:  # pragma: no cover - the schema lists nothing else
            raise KeyError(name)
    return pa.Table.from_arrays([out[n] for n in columns],
                                schema=schema(columns, dictionaries=dictionaries))


def _errors(batch: ScanBatch, rows: np.ndarray, error: np.ndarray, dictionary: bool) -> Any:
    """The error text of each row (null for a packet read whole, and for other traffic)."""
    bad = np.flatnonzero((error != 0) & (error != NOT_IB))
    if not len(bad):
        return arrays.nulls(len(rows), _text_type(dictionary))
    texts: list[str] = []
    where = np.zeros(len(rows), np.int32)
    valid = np.zeros(len(rows), bool)
    for i in bad.tolist():
        found = batch.error(int(rows[i]))
        if found is not None:
            where[i], valid[i] = len(texts), True
            texts.append(found.in_record())
    return arrays.pick(texts, where, valid, dictionary)

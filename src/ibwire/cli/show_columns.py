"""``ibwire show``'s output from the scanner's columns, a batch at a time.

Each row gets its shape (``ibwire.cli.shapes``), each shape met its template once
(``ibwire.cli.templates``), and every row of a batch is written in one pass by
``ibwire.scan.text.fill`` (C, or its Python twin): no dissection and no dict per packet. Rows
of shape 0 are dissected (``ibwire.inspect``) and written by ``show.summary``/``show.tree``/
``json_line``. Tests compare both ways byte for byte on every capture they have.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from ibwire.cli.shapes import CLASSIFY_KEYS, ETHERNET_LEN, MAD_KEYS, TAG_LEN, classify
from ibwire.cli.templates import SYNDROME_TEXTS, compile_shape, opcode_names
from ibwire.headers.aeth import decode_syndrome
from ibwire.scan import program
from ibwire.scan.batch import distinct_values
from ibwire.scan.program import SLOT, SLOTS
from ibwire.scan.text import TEXT, Op, Templates, fill

if TYPE_CHECKING:
    import argparse

    from ibwire.inspect import Inspection
    from ibwire.pcap.source import Source
    from ibwire.scan import ScanBatch


# ---------------------------------------------------------------- a batch's values


class _Rows:
    """One batch's value columns, each made on first use: integer columns (8-byte numpy
    arrays) and text columns (lists of str), by the names the templates give them."""

    def __init__(self, batch: ScanBatch, cols: dict[str, np.ndarray],
                 extra: dict[str, np.ndarray], mode: str) -> None:
        self.batch, self.cols, self.extra, self.mode = batch, cols, extra, mode
        self.count = len(cols["record"])

    def ints(self, name: str) -> np.ndarray:
        """``name``: a column, a computed one, ``"offset.bth+12"`` (a column plus a
        constant), or ``"vlan#1.id"`` (a field of VLAN tag 1, read from the frames)."""
        if name in self.extra:
            values = self.extra[name]
        elif "+" in name:
            base, constant = name.rsplit("+", 1)
            values = self.cols[base].astype(np.int64) + int(constant)
        elif "#" in name:
            values = self._tag_field(name)
        else:
            values = self.cols[name]
        return values.astype(np.int64 if values.dtype.kind == "i" else np.uint64, copy=False)

    def _tag_field(self, name: str) -> np.ndarray:
        header, rest = name.split("#", 1)
        index, field_name = rest.split(".", 1)
        tag = int(index)
        spec = SLOTS[SLOT[header]]
        f = spec.by_name[field_name]
        out = np.zeros(self.count, np.uint64)
        rows = np.flatnonzero(self.cols["vlan.count"] > tag)
        if rows.size:
            data = np.frombuffer(self.batch.buffer, np.uint8)
            at = self.cols["frame.offset"][rows] + ETHERNET_LEN + TAG_LEN * tag
            word = np.zeros(rows.size, np.uint64)
            for i in range(spec.size):
                word = (word << np.uint64(8)) | data[at + i].astype(np.uint64)
            out[rows] = (word >> np.uint64(f.shift)) & np.uint64(f.mask)
        return out

    def _having(self, header: str) -> np.ndarray:
        """The rows that have ``header`` (a slot of ``ibwire.scan.program``)."""
        return np.flatnonzero(self.cols["headers"][:self.count] & np.uint32(1 << SLOT[header]))

    def strs(self, name: str) -> list[str]:
        """``name``: an address column (its text), ``"hex:KEY"`` (a bytes field in hex),
        ``"aeth:MODE"`` (the syndrome's derived keys as MODE writes them), ``"opcode:line"`` (the
        opcode's name, ``templates.opcode_names``), ``"name:KEY"`` (`` (name)``
        beside each value of column KEY, ``names.column``), ``ip.options``
        (in hex), or ``dissected`` (set by the caller)."""
        if name.startswith("hex:"):
            return [v.hex() for v in self.batch.values(name[4:])[:self.count]]
        if name == "opcode:line":  # the opcode's name: one table lookup
            return _opcode_table()[self.cols["bth.opcode"][:self.count]].tolist()
        if name.startswith("aeth:"):  # the syndrome is 8 bits: one table lookup
            syndromes = self.cols["aeth.syndrome"][:self.count].astype(np.intp)
            return _syndrome_table(name[5:])[syndromes].tolist()
        if name.startswith("name:"):  # names.describe of each value, by one table lookup
            from ibwire.names import BY_CLASS, column

            key = name[5:]
            if key not in BY_CLASS:
                return column(key, self.cols[key][:self.count])
            out = np.full(self.count, "", object)  # named by class: the MAD rows only
            rows = self._having("mad")
            if rows.size:
                out[rows] = np.array(column(key, self.cols[key][rows],
                                            self.cols["mad.mgmtclass"][rows]), object)
            return out.tolist()
        if name == "mad:line":  # names.mad_summary of the MAD rows' headers, once a kind
            from ibwire.names import mad_summary

            out = np.full(self.count, "", object)
            rows = self._having("mad")
            if rows.size:
                heads = np.zeros(rows.size, np.uint64)
                for k, width in zip(MAD_KEYS, _MAD_WIDTHS, strict=True):  # one number
                    heads = heads << np.uint64(width) | self.cols[k][rows].astype(np.uint64)
                distinct, inverse = np.unique(heads, return_inverse=True)
                said = [mad_summary(_split(h)) or "" for h in distinct.tolist()]
                out[rows] = np.array(said, object)[inverse.reshape(-1)]
            return out.tolist()
        if name == "ip.options":
            out = [""] * self.count
            net, ihl = self.cols["offset.network"], self.cols["ip.hdr_len"]
            for r in np.flatnonzero(self.extra["options"]).tolist():
                at = int(net[r])
                out[r] = bytes(self.batch.frame(r)[at + 20:at + 4 * int(ihl[r])]).hex()
            return out
        # a header's text (addresses): only where the header is, the rows whose templates
        # read it
        present = self._having(SLOTS[program.column(name).slot].name)
        if present.size == self.count:
            return self.batch.values(name)[:self.count]
        if not present.size:
            return [""] * self.count
        shown, index = self.batch.shown(name, present)
        at = np.full(self.count, len(shown) - 1, np.intp)  # the last: "", no header
        at[present] = index
        return shown[at].tolist()


@cache
def _opcode_table() -> np.ndarray:
    return np.array(opcode_names(), object)


@cache
def _syndrome_table(mode: str) -> np.ndarray:
    """What ``mode`` writes of each of the 256 AETH syndromes' derived keys."""
    render = SYNDROME_TEXTS[mode]
    return np.array([render(decode_syndrome(s)) for s in range(256)], object)


#: The bits of each of ``MAD_KEYS`` (class, attribute, method, status).
_MAD_WIDTHS = (8, 16, 8, 16)


def _split(head: int) -> dict[str, int]:
    """The MAD header fields of a number ``strs`` made of them."""
    out = {}
    for key, width in zip(reversed(MAD_KEYS), reversed(_MAD_WIDTHS), strict=True):
        out[key] = head & ((1 << width) - 1)
        head >>= width
    return out


# ---------------------------------------------------------------- the walk


def _when(cols: dict[str, np.ndarray], start_ns: int) -> np.ndarray:
    """Nanoseconds since ``start_ns`` (int64; the SECONDS op divides as Python would)."""
    stamps = cols["timestamp_ns"]
    limit = 1 << 62  # no int64 overflow below this
    if len(stamps) and abs(start_ns) < limit and int(np.abs(stamps).max()) < limit:
        return stamps - start_ns
    return np.array([max(min(s - start_ns, (1 << 63) - 1), -(1 << 63))
                     for s in stamps.tolist()], np.int64)


def _seconds(found: Inspection, start_ns: int | None) -> str:
    """A dissected row's time as the C filler writes the others' (``show_time.WIDTH``)."""
    from ibwire.cli.show_time import Clock

    if found.record.error is not None:
        return Clock().advance(None)
    return Clock().seconds(found.record.timestamp_ns - (start_ns or 0))


_END = {"line": "\n", "json": "\n", "tree": "\n\n"}
_DISSECTED: list[Op] = [(TEXT, "dissected", 0, 0)]


def texts(source: Source, args: argparse.Namespace, mode: str) -> Iterator[bytes]:
    """What ``show`` writes for the records of ``source`` (a path or a live capture), a batch
    at a time, in UTF-8: summary
    lines (mode "line"), JSON objects ("json") or header trees ("tree"), each with its line
    end (an empty line after a tree)."""
    from ibwire.cli.common import json_line, scanned
    from ibwire.cli.show import _COLUMNS, _records, summary, tree
    from ibwire.cli.show_time import Clock, clock_for

    keys = None if mode != "line" else tuple({*_COLUMNS, *CLASSIFY_KEYS, *MAD_KEYS})
    templates = Templates()
    numbered: dict[int, int] = {0: templates.add(_DISSECTED)}
    clock = clock_for(source, args) if mode != "json" else Clock()  # JSON: timestamp_ns
    start_ns: int | None = None
    for batch, cols, _failed in scanned(source, args, fields=keys):
        count = len(cols["record"])
        if not count:
            continue
        readable = cols["error"] != program.CAPTURE_ERROR
        times: list[str] = []
        if not clock.in_c:  # each row's time text; the C filler writes only the default
            times = clock.batch(cols["timestamp_ns"], readable)
        elif start_ns is None and readable.any():
            start_ns = int(cols["timestamp_ns"][np.flatnonzero(readable)[0]])
        key, extra = classify(cols, mode)
        extra["when"] = _when(cols, start_ns or 0)
        shapes, inverse = distinct_values(key)
        for k in shapes.tolist():
            if k not in numbered:
                numbered[k] = templates.add(compile_shape(mode, k, not clock.in_c))
        of_shape = np.array([numbered[k] for k in shapes.tolist()], np.int32)
        template = of_shape[inverse.reshape(-1)]
        rows_of = _Rows(batch, cols, extra, mode)
        dissected = [""] * count
        rows = np.flatnonzero(key == 0).tolist()
        for r, record in zip(rows, _records(batch, rows), strict=True):
            from ibwire.inspect import inspect  # only for a row to dissect: the dissector

            found = inspect(record)
            when = times[r] if times else _seconds(found, start_ns)
            dissected[r] = (summary(found, when=when) if mode == "line"
                            else json_line(found.fields())[:-1] if mode == "json"
                            else tree(found, when))
        used_ints, used_strs = templates.columns_of(of_shape.tolist())
        ints = [rows_of.ints(n) if n in used_ints else None for n in templates.ints]
        strs = [(dissected if n == "dissected" else times if n == "time" else rows_of.strs(n))
                if n in used_strs else None for n in templates.strs]
        starts, ops, pool = templates.flat()
        yield fill(template, starts, ops, pool, ints, strs, _END[mode])

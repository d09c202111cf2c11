"""``ibwire show FILE`` or ``ibwire show -i IFACE``: one line per packet, the header tree
(-V), or JSON (--json); with ``-i`` each packet as it is captured (``ibwire.pcap.live``).

The summary lines and the JSON objects come from the batch scanner (``ibwire.scan``): an
InfiniBand/RoCE packet that verified or failed only its CRC is written from the scanner's
columns, with no Python dissection; anything else (other traffic, errors, unknown opcodes,
raw IB, stacked VLAN tags, IPv4 options) is dissected, so that what is written is what the
dissector says (tests compare both ways on every capture they have). -V and ``--where``
dissect every packet, to show the tree or test any field.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ibwire.cli.common import (
    add_input_arguments,
    file_only_options,
    inspections,
    json_line,
    jsonable,
    live_capture,
    scanned,
    shrink_status,
)

if TYPE_CHECKING:
    from ibwire.inspect import Inspection
    from ibwire.pcap.records import CaptureRecord
    from ibwire.pcap.source import Source
    from ibwire.scan import ScanBatch

_NAMES = {"rocev2_ipv4": "RoCEv2", "rocev2_ipv6": "RoCEv2/6", "rocev1": "RoCEv1",
          "ib_local": "IB", "ib_global": "IB/GRH", "ib_raw": "IB raw", "other": "-"}
#: Key ETH fields shown on the summary line, with their labels.
_KEY_FIELDS = (("reth.va", "va", "0x{:x}"), ("reth.r_key", "rkey", "0x{:x}"),
               ("reth.dmalen", "len", "{}"), ("aeth.syndrome.type", "", "{}"),
               ("aeth.syndrome.nak", "", "{}"), ("aeth.msn", "msn", "{}"),
               ("deth.srcqp", "srcqp", "0x{:x}"), ("atomiceth.va", "va", "0x{:x}"),
               ("immdt", "imm", "0x{:08x}"), ("ieth", "inv_rkey", "0x{:x}"),
               ("xrceth.xrcsrq", "xrcsrq", "0x{:x}"), ("mad.mgmtclass", "mad", "0x{:02x}"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, live=True)
    parser.add_argument("-V", "--verbose", action="store_true", help="print the header tree")
    parser.add_argument("--json", action="store_true", help="one JSON object per packet")


#: Where a line's source and destination come from, first present wins.
_ADDRESSES = (("ip.src", "ip.dst"), ("ipv6.src", "ipv6.dst"), ("grh.sgid", "grh.dgid"),
              ("lrh.slid", "lrh.dlid"), ("eth.src", "eth.dst"))
#: The scanner columns a summary line reads (the AETH type and NAK code derive from the
#: syndrome).
_COLUMNS = (*(key for pair in _ADDRESSES for key in pair), "bth.opcode", "bth.destqp",
            "bth.psn", "aeth.syndrome",
            *(key for key, _, _ in _KEY_FIELDS if not key.startswith("aeth.syndrome.")))


def _addresses(fields: Mapping[str, Any]) -> tuple[str, str]:
    for src, dst in _ADDRESSES:
        if src in fields:
            if src == "lrh.slid":
                return f"LID {fields[src]:#x}", f"LID {fields[dst]:#x}"
            return str(fields[src]), str(fields[dst])
    return "?", "?"


def _head(number: int, timestamp_ns: int | None, start_ns: int, fields: Mapping[str, Any]
          ) -> str:
    """Record number, time since the first record (none for a record that could not be
    read), source and destination."""
    when = f"{'-':>11}" if timestamp_ns is None else f"{(timestamp_ns - start_ns) / 1e9:11.6f}"
    src, dst = _addresses(fields)
    return f"{number:6d} {when} {src} → {dst} "


def _transport(encapsulation: str, name: str, fields: Mapping[str, Any], payload: int,
               icrc_ok: bool | None, vcrc_ok: bool | None) -> str:
    """The InfiniBand part of a line: opcode, QP, PSN, key ETH fields, verdicts."""
    line = (f"{_NAMES.get(encapsulation, encapsulation)} {name} QP={fields['bth.destqp']:#08x} "
            f"PSN={fields['bth.psn']}")
    for key, label, fmt in _KEY_FIELDS:
        if key in fields:
            text = fmt.format(fields[key])
            line += f" {label}={text}" if label else f" {text}"
    if "mad.mgmtclass" in fields:
        from ibwire.names import mad_summary

        line += f" {mad_summary(fields)}"
    if payload:
        line += f" payload={payload}"
    line += f" ICRC {'ok' if icrc_ok else 'BAD'}"
    if vcrc_ok is not None:
        line += f" VCRC {'ok' if vcrc_ok else 'BAD'}"
    return line


def summary(found: Inspection, start_ns: int) -> str:
    fields = found.fields()
    timestamp = None if found.record.error is not None else found.record.timestamp_ns
    line = _head(found.record.index + 1, timestamp, start_ns, fields)
    packet = found.packet
    if packet is None:
        return line + f"[{found.error}]" if found.error else line + "(not parsed)"
    if packet.is_ib:
        name = packet.opcode.name if packet.opcode else packet.unknown
        line += _transport(packet.encapsulation, name, fields, packet.payload_length,
                           found.icrc_ok, found.vcrc_ok)
    elif packet.encapsulation == "ib_raw":
        line += f"{_NAMES[packet.encapsulation]} {packet.unknown} VCRC " \
                f"{'ok' if found.vcrc_ok else 'BAD'}"
    else:
        line += f"{_NAMES.get(packet.encapsulation, packet.encapsulation)} {packet.unknown or ''}"
    if found.error is not None:
        line += f" [{found.error}]"
    return line


def tree(found: Inspection) -> str:
    lines = [summary(found, found.record.timestamp_ns)]
    packet = found.packet
    if packet is None:
        return "\n".join(lines)
    from ibwire.headers import ALL
    from ibwire.mads import TITLES
    from ibwire.names import DECIMAL, describe

    fields = packet.fields()

    def line(key: str, value: Any) -> str:
        if isinstance(value, int) and value > 9 and key not in DECIMAL:
            shown = f"{value:#x}"
        else:
            shown = jsonable(value)
        name = describe(key, value, fields)
        return f"      {key} = {shown}" + (f" ({name})" if name else "")

    for header in packet.headers:
        spec = None if header.full_keys else ALL[header.name]
        title = spec.title if spec else TITLES.get(header.name, header.name)
        lines.append(f"  {title} (offset {header.offset}, {header.length} bytes)")
        for name, value in header.values.items():
            lines.append(line(name if spec is None else spec.key(name), value))
    for key, value in packet.derived.items():
        lines.append(line(key, value))
    if packet.is_ib:
        lines.append(f"  Payload ({len(packet.payload)} bytes at {packet.payload_offset}), "
                     f"pad {len(packet.pad)}")
        lines.append(f"  ICRC {packet.icrc.hex()} ({'ok' if found.icrc_ok else 'BAD'})")
    if packet.vcrc is not None:
        lines.append(f"  VCRC {packet.vcrc.hex()} ({'ok' if found.vcrc_ok else 'BAD'})")
    for warning in packet.warnings:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def _record(batch: ScanBatch, row: int) -> CaptureRecord:
    """A scanned row as the record reader gives it, for the dissector: what ``inspect`` and
    ``summary`` read (the stored record's own bytes, interface and snaplen are not in the
    scanner's columns and are left out)."""
    from ibwire.pcap.records import CaptureRecord

    c = batch.columns
    frame = bytes(batch.frame(row))
    orig = int(c["frame.orig_len"][row])
    return CaptureRecord(int(c["record"][row]), int(c["frame.offset"][row]),
                         int(c["timestamp_ns"][row]), int(c["linktype"][row]), batch.link(row),
                         frame, len(frame), orig, 0, frame, orig, 0,
                         error=batch.errors.get(row))


def _verdict(code: int) -> bool | None:
    return None if code < 0 else code == 1


def _present(headers: int, opcode: int, wanted: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
    """The keys of ``wanted`` that a row with the ``headers`` bitmap and ``opcode`` has, in
    wire order (the extended headers in the opcode's order), each with whether its header
    stacks."""
    from ibwire.scan.program import SLOT, STACKED_SLOTS, column, opcode_chains

    chain, length, _flags = opcode_chains()
    after_bth = {int(slot): i for i, slot in enumerate(chain[opcode][:length[opcode]])}
    bth = SLOT["bth"]

    def place(key: str) -> tuple[int, int]:
        slot = column(key).slot
        return (bth, after_bth[slot]) if slot in after_bth else (slot, -1)

    keys = sorted((k for k in wanted if headers >> column(k).slot & 1), key=place)
    return tuple((k, column(k).slot in STACKED_SLOTS) for k in keys)


def scanned_fields(source: Source, args: argparse.Namespace, keys: tuple[str, ...] | None
                   ) -> Iterator[dict[str, Any] | Inspection]:
    """Record by record: the fields ``Inspection.fields()`` would give, in its order, from the
    scanner's columns (only the header fields ``keys``; None: all); or, for a row the columns
    cannot tell whole (see the module; also stacked VLAN tags, IPv4 options and MADs), the
    row dissected."""
    from ibwire.headers.aeth import decode_syndrome
    from ibwire.inspect import inspect
    from ibwire.pcap.records import LINK_NAMES
    from ibwire.scan.program import (
        PACKET_ENCAPSULATIONS,
        SCAN_KIND_NAMES,
        column,
        columns,
    )
    from ibwire.tables import opcodes

    names = {code: op.name for code, op in opcodes().items()}
    kinds = [PACKET_ENCAPSULATIONS.get(kind) for kind in SCAN_KIND_NAMES]
    wanted = tuple(c.name for c in columns()) if keys is None else keys
    scan_keys = tuple({*wanted, "bth.opcode", "ip.hdr_len", "aeth.syndrome"})
    ipv4 = 1 << column("ip.hdr_len").slot
    mad = 1 << column("mad.mgmtclass").slot  # MAD bodies are the dissector's (ibwire.mads)
    present: dict[tuple[int, int], tuple[tuple[str, bool], ...]] = {}
    syndromes: dict[int, dict[str, Any]] = {}
    for batch, c, _failed in scanned(source, args, fields=scan_keys):
        values = {key: batch.values(key) for key in scan_keys}
        number, stamp, link, headers, vlans, kind, error, payload, icrc, vcrc, icrc_ok, \
            vcrc_ok = (c[k].tolist() for k in (
                "record", "timestamp_ns", "link", "headers", "vlan.count", "encapsulation",
                "error", "payload.length", "icrc", "vcrc", "icrc_ok", "vcrc_ok"))
        for r in range(len(number)):
            encapsulation = kinds[kind[r]]
            opcode = values["bth.opcode"][r]
            if (error[r] or encapsulation in (None, "ib_raw") or opcode not in names
                    or vlans[r] > 1 or headers[r] & ipv4 and values["ip.hdr_len"][r] != 5
                    or headers[r] & mad):
                yield inspect(_record(batch, r))
                continue
            has = present.get((headers[r], opcode))
            if has is None:
                has = present[(headers[r], opcode)] = _present(headers[r], opcode, wanted)
            fields: dict[str, Any] = {"frame": number[r] + 1, "timestamp_ns": stamp[r],
                                      "link": LINK_NAMES[link[r]],
                                      "encapsulation": encapsulation}
            for key, stacked in has:
                fields[key] = (values[key][r],) if stacked else values[key][r]
            if "aeth.syndrome" in fields:
                syndrome = fields["aeth.syndrome"]
                if syndrome not in syndromes:
                    syndromes[syndrome] = decode_syndrome(syndrome)
                fields.update(syndromes[syndrome])
            fields["icrc"] = icrc[r]
            if vcrc_ok[r] >= 0:
                fields["vcrc"] = vcrc[r]
            fields["bth.opcode.name"] = names[opcode]
            fields["payload.length"] = payload[r]
            fields["icrc_ok"] = _verdict(icrc_ok[r])
            fields["vcrc_ok"] = _verdict(vcrc_ok[r])
            fields["error"] = None
            yield fields


def scanned_lines(source: Source, args: argparse.Namespace) -> Iterator[str]:
    """Summary lines, from the scanner where it can tell them (see :func:`scanned_fields`)."""
    start_ns: int | None = None
    for found in scanned_fields(source, args, _COLUMNS):
        if not isinstance(found, dict):
            if start_ns is None and found.record.error is None:
                start_ns = found.record.timestamp_ns
            yield summary(found, start_ns or 0)
            continue
        if start_ns is None:
            start_ns = found["timestamp_ns"]
        yield (_head(found["frame"], found["timestamp_ns"], start_ns, found)
               + _transport(found["encapsulation"], found["bth.opcode.name"], found,
                            found["payload.length"], found["icrc_ok"], found["vcrc_ok"]))


def run(args: argparse.Namespace) -> int:
    if args.interface is not None:
        with live_capture(args) as live:
            return show(live, args)
    file_only_options(args)
    return show(args.file, args)


def show(source: Source, args: argparse.Namespace) -> int:
    """Write what ``args`` asks for about ``source`` (a path or a live capture)."""
    out = sys.stdout
    if args.json and not args.where:
        for found in scanned_fields(source, args, None):
            fields = found if isinstance(found, dict) else found.fields()
            out.write(json_line(fields))
        return shrink_status(args, "show", args.file)
    if not (args.verbose or args.where):
        for line in scanned_lines(source, args):
            out.write(line + "\n")
        return shrink_status(args, "show", args.file)

    start_ns = None
    for found in inspections(source, args):
        if start_ns is None and found.record.error is None:
            start_ns = found.record.timestamp_ns
        if args.json:
            out.write(json_line(found.fields()))
        elif args.verbose:
            out.write(tree(found) + "\n\n")
        else:
            out.write(summary(found, start_ns or 0) + "\n")
    return shrink_status(args, "show", args.file)

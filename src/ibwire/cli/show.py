"""``ibwire show FILE`` or ``ibwire show -i IFACE``: one line per packet, the header tree
(-V), or JSON (--json); with ``-i`` each packet as it is captured (``ibwire.pcap.live``).

The output comes from the batch scanner (``ibwire.scan``) a batch at a time:
``ibwire.cli.shapes`` writes each packet from the scanner's columns with a template compiled
once per packet shape, filled in C (``ibwire.scan.text``), and dissects only what the
columns cannot tell (errors, VLAN stacks under other traffic, IPv6 extension headers, packets
the dissector warns about), written by :func:`summary` and :func:`tree` below, which say what
show writes (tests compare both ways on every capture they have). ``--where`` dissects every
packet, to test any field.
"""

from __future__ import annotations

import argparse
import codecs
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
    shrink_status,
)

if TYPE_CHECKING:
    from ibwire.inspect import Inspection
    from ibwire.packet import Packet
    from ibwire.pcap.records import CaptureRecord
    from ibwire.pcap.source import Source
    from ibwire.scan import ScanBatch

_NAMES = {"rocev2_ipv4": "RoCEv2", "rocev2_ipv6": "RoCEv2/6", "rocev1": "RoCEv1",
          "ib_local": "IB", "ib_global": "IB/GRH", "ib_raw": "IB raw", "other": "-"}
#: Key ETH fields shown on the summary line, with their labels.
_KEY_FIELDS = (("reth.va", "va", "0x{:x}"), ("reth.r_key", "rkey", "0x{:x}"),
               ("reth.dmalen", "len", "{}"), ("aeth.syndrome.type", "", "{}"),
               ("aeth.syndrome.nak", "", "{}"), ("aeth.msn", "msn", "{}"),
               ("deth.srcqp", "srcqp", "0x{:06x}"), ("atomiceth.va", "va", "0x{:x}"),
               ("immdt", "imm", "0x{:08x}"), ("ieth", "inv_rkey", "0x{:x}"),
               ("xrceth.xrcsrq", "xrcsrq", "0x{:x}"), ("mad.mgmtclass", "mad", "0x{:02x}"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ibwire.cli.show_time import FORMATS

    add_input_arguments(parser, live=True, write_help="write the records shown (those --where "
                        "keeps) to FILE instead of printing them, in the input's format, as "
                        "tshark -w; with -i: keep the whole capture in FILE, a classic pcap")
    parser.add_argument("-V", "--verbose", action="store_true", help="print the header tree")
    parser.add_argument("--json", action="store_true", help="one JSON object per packet")
    parser.add_argument("-t", dest="time_format", choices=list(FORMATS), default="r",
                        metavar="FORMAT", help="the time column, as tshark -t: " + "; ".join(
                            f"{k} {v}" for k, v in FORMATS.items()))


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


def _head(number: int, timestamp_ns: int | None, start_ns: int, fields: Mapping[str, Any],
          when: str | None = None) -> str:
    """Record number, time (``when``, else since ``start_ns``; none for a record that could
    not be read), source and destination."""
    if when is None:
        when = f"{'-':>11}" if timestamp_ns is None else \
            f"{(timestamp_ns - start_ns) / 1e9:11.6f}"
    src, dst = _addresses(fields)
    return f"{number:6d} {when} {src} → {dst} "


def _transport(encapsulation: str, name: str, fields: Mapping[str, Any], payload: int,
               found: Inspection) -> str:
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
    return line + _verdicts(found)


def _verdicts(found: Inspection) -> str:
    """A transport packet's CRC verdicts on its line; of a packet the capture cut, that
    and the bytes kept (as the templates write them: ``shapes.CRC_WORDS``)."""
    from ibwire.cli.shapes import CRC_WORDS, KEPT_NOTE

    packet = found.packet
    assert packet is not None
    if found.cut:
        words = " ICRC cut" + (" VCRC cut" if packet.vcrc_offset is not None else "")
        return words + KEPT_NOTE.format(len(packet.frame), packet.wire_length)
    line = f" ICRC {CRC_WORDS[found.icrc_ok is True]}"
    if found.vcrc_ok is not None:
        line += f" VCRC {CRC_WORDS[found.vcrc_ok is True]}"
    return line


def _broken(packet: Packet, fields: Mapping[str, Any], icrc_ok: bool | None,
            vcrc_ok: bool | None) -> str:
    """The line of a packet whose headers are broken but whose CRCs are placed: its
    encapsulation, opcode, QP and PSN when its BTH was read, and the verdicts (the error
    follows in brackets)."""
    line = _NAMES.get(packet.encapsulation, packet.encapsulation)
    if "bth.opcode" in fields:
        name = packet.opcode.name if packet.opcode else f"opcode 0x{fields['bth.opcode']:02x}"
        line += f" {name} QP={fields['bth.destqp']:#08x} PSN={fields['bth.psn']}"
    for crc, ok in (("ICRC", icrc_ok), ("VCRC", vcrc_ok)):
        if ok is not None:
            line += f" {crc} {'ok' if ok else 'BAD'}"
    return line


def summary(found: Inspection, start_ns: int = 0, fields: Mapping[str, Any] | None = None,
            when: str | None = None) -> str:
    """The summary line; ``fields`` the packet's (``Packet.fields``) when already made: the
    line reads no key that ``Inspection.fields`` adds; ``when`` its time text
    (``show_time.Clock``), else the seconds since ``start_ns``."""
    if fields is None:
        fields = found.fields()
    timestamp = None if found.record.error is not None else found.record.timestamp_ns
    line = _head(found.record.index + 1, timestamp, start_ns, fields, when)
    packet = found.packet
    if packet is None:
        return line + f"[{found.error}]" if found.error else line + "(not parsed)"
    if packet.error is not None:  # broken headers, CRCs placed: what is known, the verdicts
        line += _broken(packet, fields, found.icrc_ok, found.vcrc_ok)
    elif packet.is_ib:
        name = packet.opcode.name if packet.opcode else packet.unknown
        line += _transport(packet.encapsulation, name, fields, packet.payload_length, found)
    elif packet.encapsulation == "ib_raw":
        line += f"{_NAMES[packet.encapsulation]} {packet.unknown} VCRC " \
                f"{'ok' if found.vcrc_ok else 'BAD'}"
    else:
        line += f"{_NAMES.get(packet.encapsulation, packet.encapsulation)} {packet.unknown or ''}"
    if found.error is not None:
        line += f" [{found.error}]"
    return line


def field_text(value: Any) -> str:
    """A header field's value in the tree: numbers above 9 in hex, bytes in hex."""
    return f"{value:#x}" if isinstance(value, int) and value > 9 else str(jsonable(value))


def derived_text(value: Any) -> str:
    """A derived value (AETH syndrome parts, IPv4 options) in the tree."""
    return str(jsonable(value))


def tree(found: Inspection, when: str | None = None) -> str:
    """The packet's line (its time ``when``, as ``summary``), then its headers' fields."""
    packet = found.packet
    if packet is None:
        return summary(found, found.record.timestamp_ns, when=when)
    from ibwire.headers import ALL
    from ibwire.mads import TITLES
    from ibwire.names import DECIMAL, NAMED, describe

    fields = packet.fields()
    lines = [summary(found, found.record.timestamp_ns, fields, when)]
    # A MAD's derived values are written as its fields are; others' as ``derived_text``
    # (the AETH syndrome's parts, IPv4 options), as the column path writes them.
    mad = "mad.mgmtclass" in fields

    def line(key: str, value: Any, shown: Any) -> str:
        """``key = shown`` and the value's name (``names.describe``) beside it."""
        name = describe(key, value, fields)
        return f"      {key} = {shown}" + (f" ({name})" if name else "")

    def number(key: str, value: Any) -> Any:
        if isinstance(value, int) and value > 9 and key not in DECIMAL:
            return f"{value:#x}"
        return jsonable(value)

    for header in packet.headers:
        spec = None if header.full_keys else ALL[header.name]
        title = spec.title if spec else TITLES.get(header.name, header.name)
        lines.append(f"  {title} (offset {header.offset}, {header.length} bytes)")
        keys = spec.keys if spec is not None else {}
        for name, value in header.values.items():
            key = keys.get(name) or (name if spec is None else spec.key(name))
            if type(value) is int and key not in NAMED:  # most fields: no call
                lines.append(f"      {key} = {value:#x}" if value > 9 and key not in DECIMAL
                             else f"      {key} = {value}")
            else:
                lines.append(line(key, value, number(key, value)))
    for key, value in packet.derived.items():
        lines.append(line(key, value, number(key, value) if mad else derived_text(value)))
    if packet.is_ib:
        body = sum(h.length for h in packet.headers if h.full_keys)  # a decoded MAD body
        lines.append(f"  Payload ({packet.payload_length - body} bytes at "
                     f"{packet.payload_offset}), pad {_pad(packet)}")
        lines.append(_crc_line("ICRC", packet.icrc, found.icrc_ok, packet))
    if packet.vcrc is not None or (packet.cut and packet.vcrc_offset is not None):
        lines.append(_crc_line("VCRC", packet.vcrc, found.vcrc_ok, packet))
    for warning in packet.warnings:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def _pad(packet: Packet) -> int:
    """The pad's length: as the BTH PadCnt says where the capture cut the pad."""
    bth = packet.header("bth")
    return bth.values["padcnt"] if packet.cut and bth is not None else len(packet.pad)


def _crc_line(name: str, value: bytes | None, ok: bool | None, packet: Packet) -> str:
    """The tree's line of a CRC: its value and verdict, or that the capture cut it."""
    from ibwire.cli.shapes import KEPT_NOTE

    if value is None:
        return f"  {name} cut by the capture" + KEPT_NOTE.format(len(packet.frame),
                                                                 packet.wire_length)
    return f"  {name} {value.hex()} ({'ok' if ok else 'BAD'})"


def _record(batch: ScanBatch, row: int) -> CaptureRecord:
    """A scanned row as the record reader gives it, for the dissector: what ``inspect`` and
    ``summary`` read (the stored record's own bytes, interface and snaplen are not in the
    scanner's columns and are left out)."""
    return next(_records(batch, [row]))


def _records(batch: ScanBatch, rows: list[int]) -> Iterator[CaptureRecord]:
    """:func:`_record` of each of ``rows``, the columns read once for all of them."""
    from ibwire.pcap.records import LINK_NAMES, CaptureRecord

    c = batch.columns
    picked = [c[name][rows].tolist() for name in ("record", "frame.offset", "frame.len",
                                                   "timestamp_ns", "linktype", "frame.orig_len",
                                                   "link")]
    data = memoryview(batch.buffer)
    for row, index, offset, length, when, linktype, orig, link in zip(rows, *picked,
                                                                      strict=True):
        frame = bytes(data[offset:offset + length])
        yield CaptureRecord(index, offset, when, linktype, LINK_NAMES.get(link, "other"),
                            frame, len(frame), orig, 0, frame, orig, 0,
                            error=batch.errors.get(row))


def scanned_lines(source: Source, args: argparse.Namespace) -> Iterator[str]:
    """Summary lines, from the scanner where it can tell them (see ``ibwire.cli.shapes``)."""
    from ibwire.cli.show_columns import texts

    for batch in texts(source, args, "line"):
        yield from batch.decode("utf-8").split("\n")[:-1]


def run(args: argparse.Namespace) -> int:
    if args.write is not None and (args.verbose or args.json):
        args.usage_error("-w writes the records to a file; -V and --json print them")
    if args.write == "-":
        args.usage_error("-w takes a file name (standard output is not written to)")
    if args.interface is not None:
        with live_capture(args) as live:
            return show(live, args)
    output, args.write = args.write, None
    file_only_options(args)  # -f and --duration are for -i
    if output is not None:
        from ibwire.cli.show_write import write_records

        return write_records(args.file, output, args)
    return show(args.file, args)


def show(source: Source, args: argparse.Namespace) -> int:
    """Write what ``args`` asks for about ``source`` (a path or a live capture)."""
    out = sys.stdout
    if not args.where:
        from ibwire.cli.show_columns import texts

        mode = "json" if args.json else "tree" if args.verbose else "line"
        out.flush()
        raw = getattr(out, "buffer", None)  # UTF-8 as made, when stdout writes UTF-8 bytes
        if raw is not None and codecs.lookup(out.encoding or "ascii").name != "utf-8":
            raw = None
        for batch in texts(source, args, mode):
            if raw is not None:
                raw.write(batch)
                raw.flush()  # a live capture's packets out as they come
            else:
                out.write(batch.decode("utf-8"))
                out.flush()
        return shrink_status(args, "show", args.file)

    from ibwire.cli.show_time import clock_for
    from ibwire.where import compile_where

    keep = compile_where(args.where)
    clock = clock_for(source, args)  # every record read moves it, shown or not
    for found in inspections(source, argparse.Namespace(**{**vars(args), "where": None})):
        fields = found.fields()
        shown = keep(fields)
        when = clock.advance(None if found.record.error is not None
                             else found.record.timestamp_ns, shown)
        if not shown:
            continue
        if args.json:
            out.write(json_line(fields))
        elif args.verbose:
            out.write(tree(found, when) + "\n\n")
        else:
            out.write(summary(found, when=when) + "\n")
    return shrink_status(args, "show", args.file)

"""``ibwire show FILE``: one line per packet, the header tree (-V), or JSON (--json)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ibwire.cli.common import add_input_arguments, inspections, jsonable

if TYPE_CHECKING:
    from ibwire.inspect import Inspection

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
    add_input_arguments(parser)
    parser.add_argument("-V", "--verbose", action="store_true", help="print the header tree")
    parser.add_argument("--json", action="store_true", help="one JSON object per packet")


def _addresses(fields: dict[str, Any]) -> tuple[str, str]:
    for src, dst in (("ip.src", "ip.dst"), ("ipv6.src", "ipv6.dst"), ("grh.sgid", "grh.dgid")):
        if src in fields:
            return str(fields[src]), str(fields[dst])
    if "lrh.slid" in fields:
        return f"LID {fields['lrh.slid']:#x}", f"LID {fields['lrh.dlid']:#x}"
    if "eth.src" in fields:
        return fields["eth.src"], fields["eth.dst"]
    return "?", "?"


def summary(found: Inspection, start_ns: int) -> str:
    fields = found.fields()
    src, dst = _addresses(fields)
    if found.record.error is not None:  # a record that could not be read has no time
        when = f"{'-':>11}"
    else:
        when = f"{(found.record.timestamp_ns - start_ns) / 1e9:11.6f}"
    line = f"{found.record.index + 1:6d} {when} {src} → {dst} "
    packet = found.packet
    if packet is None:
        return line + f"[{found.error}]" if found.error else line + "(not parsed)"
    line += f"{_NAMES.get(packet.encapsulation, packet.encapsulation)} "
    if packet.is_ib:
        name = packet.opcode.name if packet.opcode else packet.unknown
        line += f"{name} QP={fields['bth.destqp']:#08x} PSN={fields['bth.psn']}"
        for key, label, fmt in _KEY_FIELDS:
            if key in fields:
                text = fmt.format(fields[key])
                line += f" {label}={text}" if label else f" {text}"
        if packet.payload:
            line += f" payload={len(packet.payload)}"
        verdict = "ok" if found.icrc_ok else "BAD"
        line += f" ICRC {verdict}"
        if found.vcrc_ok is not None:
            line += f" VCRC {'ok' if found.vcrc_ok else 'BAD'}"
    elif packet.encapsulation == "ib_raw":
        line += f"{packet.unknown} VCRC {'ok' if found.vcrc_ok else 'BAD'}"
    else:
        line += packet.unknown or ""
    if found.error is not None:
        line += f" [{found.error}]"
    return line


def tree(found: Inspection) -> str:
    lines = [summary(found, found.record.timestamp_ns)]
    packet = found.packet
    if packet is None:
        return "\n".join(lines)
    for header in packet.headers:
        from ibwire.headers import ALL

        spec = ALL[header.name]
        lines.append(f"  {spec.title} (offset {header.offset}, {header.length} bytes)")
        for name, value in header.values.items():
            shown = f"{value:#x}" if isinstance(value, int) and value > 9 else jsonable(value)
            lines.append(f"      {spec.key(name)} = {shown}")
    for key, value in packet.derived.items():
        lines.append(f"      {key} = {jsonable(value)}")
    if packet.is_ib:
        lines.append(f"  Payload ({len(packet.payload)} bytes at {packet.payload_offset}), "
                     f"pad {len(packet.pad)}")
        lines.append(f"  ICRC {packet.icrc.hex()} ({'ok' if found.icrc_ok else 'BAD'})")
    if packet.vcrc is not None:
        lines.append(f"  VCRC {packet.vcrc.hex()} ({'ok' if found.vcrc_ok else 'BAD'})")
    for warning in packet.warnings:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import json  # only when run: the start of every verb stays light

    start_ns = None
    out = sys.stdout
    for found in inspections(args.file, args):
        if start_ns is None and found.record.error is None:
            start_ns = found.record.timestamp_ns
        if args.json:
            out.write(json.dumps({k: jsonable(v) for k, v in found.fields().items()}) + "\n")
        elif args.verbose:
            out.write(tree(found) + "\n\n")
        else:
            out.write(summary(found, start_ns or 0) + "\n")
    return 0

"""``ibwire stats FILE``: counts by encapsulation, transport, opcode and QP; bytes; failures."""

from __future__ import annotations

import argparse
import json
from collections import Counter

from ibwire.cli.common import add_input_arguments, inspections


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the tables as JSON")
    parser.add_argument("--top", type=int, default=20, help="rows per table (default 20)")


def run(args: argparse.Namespace) -> int:
    tables: dict[str, Counter[str]] = {name: Counter() for name in (
        "encapsulation", "transport", "opcode", "destqp", "totals")}
    for found in inspections(args.file, args):
        totals = tables["totals"]
        totals["records"] += 1
        totals["bytes"] += found.record.orig_len
        if found.error is not None:
            totals["errors"] += 1
        packet = found.packet
        if packet is None or not packet.is_ib:
            totals["other"] += 1
            continue
        totals["ib_packets"] += 1
        totals["ib_bytes"] += found.record.orig_len
        totals["payload_bytes"] += len(packet.payload)
        totals["icrc_bad"] += found.icrc_ok is False
        totals["vcrc_bad"] += found.vcrc_ok is False
        tables["encapsulation"][packet.encapsulation] += 1
        name = packet.opcode.name if packet.opcode else f"0x{packet.fields()['bth.opcode']:02x}"
        tables["opcode"][name] += 1
        tables["transport"][packet.opcode.transport if packet.opcode else "unknown"] += 1
        tables["destqp"][f"{packet.fields()['bth.destqp']:#08x}"] += 1
    if args.json:
        print(json.dumps({name: dict(table) for name, table in tables.items()}))
        return 0
    for name, table in tables.items():
        print(f"{name}:")
        rows = table.items() if name == "totals" else table.most_common(args.top)
        for key, count in rows:
            print(f"  {key:<40} {count:>12}")
        if name != "totals" and len(table) > args.top:
            print(f"  ... {len(table) - args.top} more")
    return 0

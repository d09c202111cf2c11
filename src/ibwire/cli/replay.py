"""``ibwire replay -i IFACE FILE``: tcpreplay's timing options, RoCE-aware ``--unique-ip``.

``-w OUT`` writes what would be sent (each packet stamped with its due time) instead of
sending, and needs no privileges.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="FILE", help="capture to replay (or - for stdin)")
    where = parser.add_argument_group("where to")
    where.add_argument("-i", "--intf1", dest="interface", metavar="IFACE",
                       help="interface to send on (AF_PACKET; root or CAP_NET_RAW)")
    where.add_argument("-w", "--write", metavar="OUT",
                       help="write what would be sent to OUT instead of sending")
    timing = parser.add_argument_group("timing (exclude each other; default --multiplier 1)")
    timing.add_argument("-x", "--multiplier", type=float, help="replay at X times the capture's speed")
    timing.add_argument("-p", "--pps", type=float, help="packets per second")
    timing.add_argument("-M", "--mbps", type=float, help="megabits per second")
    timing.add_argument("-t", "--topspeed", action="store_true", help="as fast as possible")
    more = parser.add_argument_group("how much")
    more.add_argument("-l", "--loop", type=int, default=1, help="send the capture N times")
    more.add_argument("--loopdelay-ms", type=float, default=0.0, help="pause between loops")
    more.add_argument("-L", "--limit", type=int, help="send at most N packets")
    more.add_argument("--duration", type=float, help="stop after S seconds")
    more.add_argument("-K", "--preload-pcap", action="store_true",
                      help="load the capture into memory first (always done: accepted for "
                      "tcpreplay's command lines)")
    more.add_argument("--unique-ip", action="store_true",
                      help="with --loop: new addresses every loop, ICRCs recomputed")
    parser.add_argument("--stats", type=float, metavar="S",
                        help="print the totals so far every S seconds while sending (on "
                        "stderr; the final totals go to stdout)")
    parser.add_argument("--json", action="store_true", help="print the totals as JSON")
    parser.add_argument("--pad", action="store_true",
                        help="send frames a snap length cut (headers-only captures) zero-filled "
                             "to their length on the wire (their ICRC is then wrong); without "
                             "it such a capture is refused")


def run(args: argparse.Namespace) -> int:
    from ibwire.replay import (
        Plan,
        ReplayError,
        ReplayStats,
        Timing,
        TimingError,
        load,
        send_plan,
        write_plan,
    )

    def refuse(reason: str) -> int:
        print(f"ibwire replay: {reason}", file=sys.stderr)
        return 2

    if (args.interface is None) == (args.write is None):
        return refuse("give -i IFACE to send, or -w OUT to write what would be sent")
    if args.unique_ip and args.loop < 2:
        return refuse("--unique-ip requires --loop of 2 or more")
    if args.loop < 1 or (args.limit is not None and args.limit < 1):
        return refuse("--loop and --limit must be at least 1")
    try:
        timing = Timing(args.multiplier, args.pps, args.mbps, args.topspeed)
    except TimingError as exc:
        return refuse(str(exc))
    plan = Plan(timing, args.loop, args.loopdelay_ms, args.limit, args.duration, args.unique_ip)
    if args.interface is not None:
        from ibwire.replay import check_interface
        check_interface(args.interface)
    try:
        data = load(args.input, pad=args.pad)
    except ReplayError as exc:
        return refuse(str(exc))
    if data.padded:
        print(f"ibwire replay: {data.padded} frames cut by the capture zero-filled to their "
              f"length on the wire (--pad): their ICRC is wrong", file=sys.stderr)
    if args.stats is not None and not args.stats > 0:
        return refuse("--stats must be a positive number of seconds")

    def progress(now: ReplayStats) -> None:
        print(now.lines(), file=sys.stderr, flush=True)

    stats = write_plan(plan, data, args.write) if args.write else \
        send_plan(plan, data, args.interface, progress, args.stats)
    print(json.dumps(stats.as_dict()) if args.json else stats.lines())
    return 1 if stats.failed else 0

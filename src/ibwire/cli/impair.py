"""``ibwire impair``: join two interfaces and inject exact faults into the RoCE between them.

``ibwire impair -i A -i B [faults] [-w CAPTURE] [--manifest M.json] [--duration S | -c N]``
forwards every frame between A and B both ways (AF_PACKET) and applies the faults to the
InfiniBand/RoCE frames (:mod:`ibwire.impair`). Fault SPECs are gen's (``rate=R``,
``qp=K,psn=P``) with more selectors (``qpn= psn-abs= opcode= dir= nth= tx= count=``); see
:mod:`ibwire.impair.plan`. Progress on stderr; Ctrl-C or SIGTERM ends it with the capture and
the manifest complete. Exit 0, or 2 when it cannot start (one line saying why).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ibwire.impair.plan import FAULT_OPTIONS

_HELP = {
    "drop": "drop the request packets it selects",
    "corrupt": "send the request packets it selects with a wrong ICRC",
    "lose_ack": "drop the answers it selects (ACK, NAK, READ response, atomic ACK)",
    "rnr": "answer the requests it selects with a forged RNR NAK (TIMER: the RNR timer "
           "code, timer=T); the request, and the connection's requests after it until it "
           "is sent again, are not delivered",
    "ecn": "mark the request packets it selects CE (RoCEv2)",
    "ecn_resp": "mark the READ responses it selects CE",
    "dup": "send the frames it selects copies=N more times (default 1)",
    "reorder": "hold the frames it selects until by=N more frames (default 1) went the "
               "same way",
    "delay": "hold the frames it selects us=U microseconds (or ms=M; default 1000 us)",
    "nak": "after the requests it selects, send the requester a forged NAK naming their "
           "PSN: psn-seq-err (default), invalid-request, remote-access, remote-op",
    "cnp": "after the requests it selects, send the requester a forged CNP",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--interface", dest="interfaces", action="append", default=[],
                        metavar="IFACE", help="an interface to join (give it twice: A, then B)")
    parser.add_argument("-w", "--write", metavar="CAPTURE",
                        help="write what crossed, both ways, to this pcap (ns; written "
                        "atomically at the end)")
    parser.add_argument("--manifest", metavar="M.json",
                        help="write what was done to which frame (ibwire gen's manifest format)")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    stop.add_argument("-c", "--count", type=int, metavar="N",
                      help="stop after N frames arrived (both ways)")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="seed of the rate= draws (default 0)")
    parser.add_argument("--force", action="store_true",
                        help="forward even on an interface carrying the default route")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.add_argument("--tx-ring", action="store_true",
                        help="send through a PACKET_TX_RING per port (see the guide's Speed)")
    for kind, option in FAULT_OPTIONS:
        parser.add_argument(f"--{option}", dest=f"fault_{kind}", action="append", default=[],
                            metavar="SPEC", help=_HELP[kind] + " (SPEC: rate=R, qp=K, psn=P, "
                            "qpn=N, psn-abs=N, opcode=O, dir=a2b|b2a, nth=N, tx=N, count=N)")


def _progress(f: Any) -> None:
    faults = sum(r.fired for r in f.plan.rules)
    print(f"\rimpair: a2b {f.forwarded[0]} b2a {f.forwarded[1]} frames forwarded, "
          f"{faults} faults, {len(f.state)} connections", end="", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    import signal

    from ibwire.impair import Forwarder, ImpairError, Plan
    from ibwire.stopping import handle, restore

    if len(args.interfaces) != 2:
        raise ImpairError(f"give two interfaces (-i A -i B), not {len(args.interfaces)}")
    if args.count is not None and args.count < 1:
        raise ImpairError(f"-c must be at least 1, not {args.count}")
    if args.duration is not None and args.duration <= 0:
        raise ImpairError(f"--duration must be positive, not {args.duration}")
    pairs = [(kind, text) for kind, _ in FAULT_OPTIONS for text in getattr(args, f"fault_{kind}")]
    plan = Plan.of(pairs, seed=args.seed)
    a, b = args.interfaces
    forwarder = Forwarder(a, b, plan, capture=args.write, manifest=args.manifest,
                          force=args.force, tx_ring=args.tx_ring,
                          progress=None if args.no_progress else _progress)
    before = handle((signal.SIGINT, signal.SIGTERM), lambda *_: forwarder.stop())
    try:
        manifest = forwarder.run(duration=args.duration, count=args.count)
    finally:
        restore(before)
        forwarder.close()
    if not args.no_progress:
        print(file=sys.stderr)
    faults = [f for f in manifest["faults"] if f["kind"] != "inject"]
    print(f"impair: {manifest['arrived']['a2b']} frames a2b, {manifest['arrived']['b2a']} "
          f"b2a; {len(faults)} faults applied, {manifest['checksums_completed']} checksums "
          f"completed, {len(manifest['qps'])} connections, {manifest['cpu_seconds']:.2f} s "
          f"CPU", file=sys.stderr)
    lost = manifest["kernel_drops"]
    if lost["a2b"] or lost["b2a"]:
        print(f"impair: warning: the kernel dropped {lost['a2b']} frames a2b and {lost['b2a']} "
              "b2a before the forwarder read them (it was not scheduled in time): they were "
              "lost outside the fault plan and no fault names them", file=sys.stderr)
    for entry in manifest["unapplied"]:
        print(f"impair: {entry['rule']}: not applied: {entry['reason']}", file=sys.stderr)
    if args.write:
        print(f"{args.write}: {manifest['records']} records written")
    return 0

"""``ibwire gen``: generate an RDMA conversation into a capture, perftest-like.

``ibwire gen -o OUT.pcap [--verb write] [--size 1024] [--iters N] [--qps N] ...`` builds a
:class:`ibwire.gen.Scenario` from the flags (or from a YAML scenario file, see
:mod:`ibwire.gen.yamlfile`), streams its frames into OUT (pcap, or pcapng when OUT ends in
``.pcapng``; written atomically) and writes the ground-truth manifest with ``--manifest``.
Fault SPECs are ``rate=R`` (a seeded fraction of the packets the fault applies to) or
``qp=K,psn=P`` (queue pair K counted from 0, P the offset from its starting PSN; ``qp=``
may be left out when there is one QP; ``--rnr`` also takes ``timer=T``, the RNR timer code).
The first frame is stamped with the current time unless ``--start-time`` pins it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

VERBS = ("send", "send_imm", "send_inv", "write", "write_imm", "read", "fetch_add", "cmp_swap")
FAULT_OPTIONS = (("drop", "drop"), ("corrupt", "corrupt"), ("lose_ack", "lose-ack"),
                 ("rnr", "rnr"), ("ecn", "ecn-mark"), ("ecn_resp", "ecn-mark-resp"))
"""(fault kind, option name) of each fault flag."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", nargs="?", metavar="SCENARIO.yaml",
                        help="a YAML scenario file (flows mixing verbs, sizes, QPs); the "
                        "flags below then only set what the file leaves out")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="capture to write: pcap (ns), or pcapng when it ends in .pcapng")
    parser.add_argument("--manifest", metavar="OUT.json", help="write the manifest (JSON)")
    parser.add_argument("--seed", type=int, default=None, metavar="N",
                        help="seed of the rate faults (default 0); same seed and same "
                        "--start-time, same bytes")
    parser.add_argument("--start-time", type=_start_time, default=None, metavar="WHEN",
                        help="timestamp of the first frame: ISO 8601 (2026-01-02T03:04:05Z; "
                        "no zone means UTC) or seconds since the epoch (default: now, so "
                        "give it for reproducible captures)")
    parser.add_argument("--verb", dest="op", choices=VERBS, default=None,
                        help="the operation every message is (default write)")
    parser.add_argument("--transport", type=str.lower, choices=("rc", "uc", "ud", "xrc"),
                        default=None, help="default rc")
    parser.add_argument("--xrc-srq", type=_number, default=None, metavar="N",
                        help="XRC SRQ number every XRC request names (XRCETH; default "
                        "0x200 + K for queue pair K)")
    parser.add_argument("--size", type=int, default=None, metavar="BYTES",
                        help="message size (default 1024; atomics are 8 bytes)")
    parser.add_argument("--iters", type=int, default=None, metavar="N",
                        help="messages per QP (default 1)")
    parser.add_argument("--qps", type=int, default=None, metavar="N",
                        help="queue pairs (default 1), sharing the link round-robin")
    parser.add_argument("--mtu", type=int, default=None, metavar="BYTES",
                        help="path MTU 256|512|1024|2048|4096 (default 1024)")
    parser.add_argument("--encap", default=None, metavar="ENCAP",
                        help="rocev2_ipv4 (default), rocev2_ipv6, rocev1, ib_local, ib_global")
    parser.add_argument("--start-psn", type=_number, default=None, metavar="N",
                        help="starting PSN of every QP (default: 24 random bits per QP, "
                        "drawn from --seed)")
    parser.add_argument("--no-cm", action="store_true",
                        help="RC/UC/XRC connections set up out of band: no CM REQ/REP/RTU before "
                        "the data nor DREQ/DREP after it")
    parser.add_argument("--ack-every", type=int, default=None, metavar="N",
                        help="AckReq every N packets (and on the last of each message)")
    for kind, option in FAULT_OPTIONS:
        parser.add_argument(f"--{option}", dest=f"fault_{kind}", action="append", default=[],
                            metavar="SPEC", help=f"{kind} fault: rate=R or qp=K,psn=P"
                            + (",timer=T" if kind == "rnr" else ""))
    parser.add_argument("--cnp-interval-us", type=float, default=None, metavar="U",
                        help="minimum time between CNPs per scope (default 4)")
    parser.add_argument("--cnp-scope", default=None, metavar="S",
                        help="qp (default), ip-pair, dest-ip, port")
    parser.add_argument("--gbps", type=float, default=None, metavar="G",
                        help="link speed (default 100)")
    parser.add_argument("--delay-ns", type=int, default=None, metavar="NS",
                        help="one-way link delay (default 1000)")
    parser.add_argument("--tap", default=None, metavar="WHERE",
                        help="requester (default), responder, switch")
    parser.add_argument("--profile", choices=("dcqcn", "rxe"), default=None,
                        help="how the stack marks RoCEv2 packets: dcqcn (default: ECT(0), "
                        "DSCP 26, CNPs DSCP 48, a fabric with congestion control) or rxe "
                        "(Linux soft-RoCE: Not-ECT, DSCP 0; no ECN marks then); --dscp, "
                        "--ecn and --cnp-dscp override it")
    parser.add_argument("--dscp", type=int, default=None, metavar="D",
                        help="DSCP of data packets (default: the profile's, 26)")
    parser.add_argument("--ecn", type=int, default=None, metavar="E",
                        help="ECN codepoint of unmarked packets: 0 Not-ECT, 1 ECT(1), "
                        "2 ECT(0) (default: the profile's, 2)")
    parser.add_argument("--cnp-dscp", type=int, default=None, metavar="D",
                        help="DSCP of CNPs (default 48)")
    parser.add_argument("--vlan", type=_vlan, action="append", default=None, metavar="ID[:PCP]",
                        help="802.1Q tag on every Ethernet frame (twice: QinQ, outer first)")
    parser.add_argument("--snaplen", type=int, default=None, metavar="BYTES",
                        help="a headers-only capture: every record cut to BYTES, as tcpdump -s "
                             "BYTES (the manifest says so; it describes the whole conversation)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _number(text: str) -> int:
    return int(text, 0)


def _start_time(text: str) -> int:
    """``--start-time``: ISO 8601 (UTC unless it names a zone) or epoch seconds, as ns."""
    from datetime import datetime, timezone
    from decimal import Decimal, InvalidOperation

    try:
        return int(Decimal(text) * 1_000_000_000)
    except (InvalidOperation, ValueError, OverflowError):
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither ISO 8601 "
                                         f"(2026-01-02T03:04:05Z) nor epoch seconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    delta = when - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _vlan(text: str) -> tuple[int, int]:
    vid, _, pcp = text.partition(":")
    try:
        return int(vid, 0), int(pcp or "0", 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not ID or ID:PCP") from None


def parse_spec(kind: str, text: str,
               keys: Mapping[str, Callable[[str], Any]] | None = None) -> dict[str, Any]:
    """``rate=R`` or ``qp=K,psn=P[,timer=T]`` as Fault keyword arguments. ``keys`` (a key's
    name -> the function that reads its value) replaces gen's keys, for a verb that selects
    by more than these (``ibwire impair``); the grammar stays ``KEY=VALUE,...``."""
    from ibwire.gen import ScenarioError

    if keys is None:
        keys = {"rate": float, "qp": _number, "psn": _number,
                **({"timer": _number} if kind == "rnr" else {})}
        expected = "rate=R or qp=K,psn=P" + (",timer=T" if kind == "rnr" else "")
    else:
        expected = "KEY=VALUE,... with KEY one of " + ", ".join(keys)
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in keys or key in out:
            raise ScenarioError(f"{kind} SPEC {text!r}: expected {expected}")
        try:
            out[key] = keys[key](value.strip())
        except (ValueError, KeyError):
            raise ScenarioError(f"{kind} SPEC {text!r}: {key}={value!r} is not "
                                f"{'a number' if keys[key] in (float, _number) else 'valid'}"
                                ) from None
    return out


def scenario_of(args: argparse.Namespace) -> Any:
    """The Scenario the flags (and the scenario file, if any) describe, checked."""
    from dataclasses import replace

    from ibwire.gen import Fault, Link, QpSpec, Scenario, ScenarioError

    if args.scenario is not None:
        from ibwire.gen.yamlfile import load_scenario

        base = load_scenario(args.scenario)
        for option in ("op", "transport", "size", "iters", "qps", "mtu", "start_psn",
                       "ack_every", "xrc_srq"):
            if getattr(args, option) is not None:
                flag = "--verb" if option == "op" else "--" + option.replace("_", "-")
                raise ScenarioError(f"{flag} sets the queue pairs, which {args.scenario} "
                                    f"lists: set it in its flows")
    else:
        transport = (args.transport or "rc").upper()
        spec = QpSpec(verb=args.op or "write", size=1024 if args.size is None else args.size,
                      iters=1 if args.iters is None else args.iters, transport=transport,
                      mtu=1024 if args.mtu is None else args.mtu, start_psn=args.start_psn,
                      ack_every=args.ack_every, xrc_srq=args.xrc_srq)
        qps = 1 if args.qps is None else args.qps
        if qps < 1:
            raise ScenarioError(f"--qps must be at least 1, not {qps}")
        if spec.size < 0:
            raise ScenarioError(f"--size must not be negative, not {spec.size}")
        base = Scenario(qps=(spec,) * qps)
    faults = list(base.faults)
    for kind, _ in FAULT_OPTIONS:
        for text in getattr(args, f"fault_{kind}"):
            faults.append(Fault(kind, **parse_spec(kind, text)))
    link = Link(gbps=base.link.gbps if args.gbps is None else args.gbps,
                delay_ns=base.link.delay_ns if args.delay_ns is None else args.delay_ns)
    changes: dict[str, Any] = {"faults": tuple(faults), "link": link}
    if args.profile is not None:
        from ibwire.gen import PROFILES

        changes.update(PROFILES[args.profile])
    for name, value in (("seed", args.seed), ("encapsulation", args.encap), ("tap", args.tap),
                        ("cnp_interval_us", args.cnp_interval_us),
                        ("cnp_scope", args.cnp_scope), ("dscp", args.dscp), ("ecn", args.ecn),
                        ("cnp_dscp", args.cnp_dscp)):
        if value is not None:
            changes[name] = value
    if args.vlan is not None:
        changes["vlans"] = tuple(args.vlan)
    if args.start_time is not None:
        changes["start_ns"] = args.start_time
    else:
        import time

        changes["start_ns"] = time.time_ns()
    if args.no_cm:
        changes["cm"] = False
    elif args.scenario is None:
        changes["cm"] = True
    return replace(base, **changes).check()


def run(args: argparse.Namespace) -> int:
    import json

    from ibwire.cli.common import Progress
    from ibwire.gen import ScenarioError, write_capture

    scenario = scenario_of(args)
    total = sum(scenario.psn_count(k) for k in range(len(scenario.qps)))
    progress = Progress(args.output, total, not args.no_progress)

    def advance(records: int) -> None:
        progress.update(records, 4096)

    try:
        if args.snaplen is not None and args.snaplen < 1:
            raise ScenarioError(f"--snaplen must be at least 1, not {args.snaplen}")
        manifest = write_capture(args.output, scenario, on_progress=advance,
                                 snaplen=args.snaplen)
    finally:
        progress.close()
    if args.manifest:
        from ibwire.pcap.atomic import write_atomically

        write_atomically(args.manifest, json.dumps(manifest, indent=1).encode() + b"\n")
    print(f"{args.output}: {manifest['records']} records written")
    return 0

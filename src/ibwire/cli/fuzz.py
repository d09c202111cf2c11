"""``ibwire fuzz --target T``: differential fuzzing of another parser, ibwire as the reference.

Targets: ``wireshark`` (tshark through pyshark, the ``fuzz`` extra), a command with ``{pcap}``
that prints one JSON object of ibwire field keys per packet, or ``python:MODULE:FUNCTION``
(run in a child process), or ``live:IFACE_A,IFACE_B``: the RoCE frames between two real
endpoints mutated in flight (``--rate`` of them) through ``ibwire impair``'s forwarder
(:mod:`ibwire.livefuzz.hook`; the oracles are the endpoints': see tools/fuzz_live.py for
a rig that watches kernels). Each new finding (crash, exit, sanitizer, timeout, diff) is
isolated to one packet, shrunk, and written to ``--out DIR`` (``findings.jsonl`` and
``repro/*.pcap``). Exit status: 0 nothing found, 1 something found, 2 the target could not
be run at all.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

MODES = ("all", "valid", "invalid", "bytes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, metavar="T",
                        help="wireshark | python:MODULE:FUNCTION | 'CMD ... {pcap} ...' | "
                        "live:IFACE_A,IFACE_B (mutate in flight between two endpoints)")
    parser.add_argument("--rate", type=float, default=0.01, metavar="R",
                        help="live: the share of RoCE frames mutated (default 0.01)")
    parser.add_argument("--mode", choices=MODES, default="all",
                        help="valid frames, invalid (one thing wrong), bytes (byte edits), "
                        "or all (default)")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="same seed, same packets (default 0)")
    parser.add_argument("--max-examples", type=int, default=1000, metavar="N",
                        help="packets to generate, all modes together (default 1000)")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="stop after this long, shrinking included")
    parser.add_argument("--timeout-ms", type=int, default=10_000, metavar="MS",
                        help="per run of the target (one batch); also its CPU limit")
    parser.add_argument("--memory-mb", type=int, default=2048, metavar="MB",
                        help="address-space limit of the target (0: none; default 2048)")
    parser.add_argument("--batch", type=int, default=None, metavar="N",
                        help="packets per run of the target (default 200 for wireshark, "
                        "100 otherwise)")
    parser.add_argument("--shrink-runs", type=int, default=100, metavar="N",
                        help="target runs spent shrinking each finding (0: no shrinking)")
    parser.add_argument("--allow", metavar="FILE",
                        help="known differences, one JSON object per line (an empty file: "
                        "none); default: Wireshark's known mistakes for wireshark, none else")
    parser.add_argument("--out", default="fuzz-out", metavar="DIR",
                        help="where findings.jsonl and repro/ go (default fuzz-out)")
    parser.add_argument("--break-icrc", action="store_true",
                        help="leave the CRCs as a mutation leaves them (and let invalid "
                        "mode corrupt them)")
    parser.add_argument("--linktype", type=int, choices=(1, 247), default=1,
                        help="1: Ethernet frames (RoCE, default); 247: native InfiniBand")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line")


def _progress(enabled: bool) -> Any:
    tty = sys.stderr.isatty()

    def show(summary: Any) -> None:
        if not enabled:
            return
        rate = summary.examples / summary.seconds if summary.seconds else 0.0
        line = (f"{summary.examples} examples, {len(summary.findings)} findings, "
                f"{rate:.0f} examples/s")
        print(f"\r{line}\033[K" if tty else line, end="" if tty else "\n", file=sys.stderr,
              flush=True)
    return show


def run(args: argparse.Namespace) -> int:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        print("ibwire fuzz needs hypothesis: pip install 'ibwire[fuzz]'", file=sys.stderr)
        return 2
    if args.target.startswith("live:"):
        return _live(args)
    from ibwire.fuzz.compare import read_allow
    from ibwire.fuzz.findings import FindingsDir
    from ibwire.fuzz.generate import Shape
    from ibwire.fuzz.run import Config, Fuzzer
    from ibwire.fuzz.targets import Limits, TargetError, make_target

    try:
        target = make_target(args.target, args.linktype, Limits(args.timeout_ms,
                                                                  args.memory_mb))
        target.check()
    except TargetError as exc:
        print(f"ibwire fuzz: {exc}", file=sys.stderr)
        return 2
    if args.allow is not None:
        allow = read_allow(args.allow)
    elif target.kind == "wireshark":
        from ibwire.fuzz.wireshark.target import default_allow

        allow = default_allow()
    else:
        allow = []
    config = Config(mode=args.mode, seed=args.seed, max_examples=args.max_examples,
                    time_limit=args.time_limit,
                    batch=args.batch or (200 if target.kind == "wireshark" else 100),
                    shrink_runs=args.shrink_runs, allow=tuple(allow),
                    shape=Shape(args.linktype, args.break_icrc))
    out = FindingsDir(args.out, args.linktype)
    fuzzer = Fuzzer(target, config, out, _progress(not args.quiet))
    try:
        summary = fuzzer.run()
    except TargetError as exc:
        print(f"\nibwire fuzz: {exc}", file=sys.stderr)
        return 2
    if not args.quiet and sys.stderr.isatty():
        print(file=sys.stderr)
    for f in summary.findings:
        said = f": {f.message.splitlines()[-1]}" if f.message else ""
        ops = ", ".join(f"{op:#04x}" for op in f.opcodes)
        print(f"{f.signature}: expected {f.expected!r}, got {f.got!r}{said} ({f.repro}; "
              f"{f.count} packets, opcodes {ops})")
    print(f"{summary.examples} examples in {summary.seconds:.1f} s, {summary.runs} runs of "
          f"the target, {len(summary.findings)} findings -> {args.out}/findings.jsonl")
    for reason, count in sorted(summary.skipped.items()):
        print(f"not compared: {count} packets: {reason}")
    return 1 if summary.findings else 0


def _live(args: argparse.Namespace) -> int:
    """``--target live:IFACE_A,IFACE_B``: mutate frames in flight between two endpoints."""
    from ibwire.errors import IbwireError
    from ibwire.livefuzz.hook import run_inflight

    ifaces = args.target[len("live:"):].split(",")
    if len(ifaces) != 2 or not all(ifaces) or ifaces[0] == ifaces[1]:
        print("ibwire fuzz: live target wants two interfaces: live:IFACE_A,IFACE_B",
              file=sys.stderr)
        return 2
    if not 0.0 <= args.rate <= 1.0:
        print(f"ibwire fuzz: --rate {args.rate} is not between 0 and 1", file=sys.stderr)
        return 2
    try:
        summary = run_inflight(ifaces[0], ifaces[1], args.out, args.rate, args.seed,
                               duration=args.time_limit)
    except IbwireError as exc:
        print(f"ibwire fuzz: {exc}", file=sys.stderr)
        return 2
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(summary["kinds"].items()))
    print(f"{summary['frames']} RoCE frames forwarded, {summary['mutated']} mutated "
          f"({kinds or 'none'}) -> {args.out}/mutations.pcap")
    return 0

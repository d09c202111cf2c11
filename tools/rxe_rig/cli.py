"""Command line of the rig.

    python tools/rxe_rig build [--force]          build (or find cached) the guest image
    python tools/rxe_rig list                     the scenarios
    python tools/rxe_rig run [-o DIR] NAME...     boot two guests, run scenarios (or --all)
    python tools/rxe_rig boot [-n N]              boot and wait for Ctrl-C (capture on the
                                                  bridge meanwhile: ip netns exec NS ...)
    python tools/rxe_rig shell [-n N]             boot and type commands to run in a guest
                                                  (``:2`` switches to guest 2)

Needs root (namespaces, taps), qemu-system-x86, mmdebstrap, tcpdump (or dumpcap), nftables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .guest import GuestError
from .image import BuildError, build
from .rig import Rig
from .runner import run
from .scenarios import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/rxe_rig", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="build or find the cached guest image")
    p.add_argument("--force", action="store_true", help="rebuild even if cached")
    sub.add_parser("list", help="list the scenarios")
    for name in ("boot", "shell", "run"):
        p = sub.add_parser(name)
        p.add_argument("-n", "--guests", type=int, default=2)
        p.add_argument("--workdir", type=Path, help="keep console logs here")
        p.add_argument("--accel", choices=("kvm", "tcg"), help="default: probe KVM, else TCG")
        p.add_argument("--join", choices=("bridge", "impair"), default="bridge",
                       help="the guests' taps on a bridge (default), or apart for "
                       "ibwire impair to join (Rig.impairing)")
        if name == "run":
            p.add_argument("names", nargs="*", metavar="SCENARIO")
            p.add_argument("--all", action="store_true")
            p.add_argument("-o", "--out", type=Path, default=Path("rig-out"))
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except (BuildError, GuestError) as exc:
        print(f"rxe_rig: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "build":
        start = time.monotonic()
        image = build(force=args.force, log=True)
        print(f"{image.directory} ({time.monotonic() - start:.1f} s; kernel "
              f"{image.kernel_release}, initrd {image.initrd.stat().st_size >> 20} MiB)")
        return 0
    if args.command == "list":
        for scenario in SCENARIOS.values():
            print(f"{scenario.name:16} {scenario.summary}")
        return 0
    names = list(SCENARIOS) if getattr(args, "all", False) else getattr(args, "names", [])
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"rxe_rig: unknown scenario(s) {', '.join(unknown)}; see `list`", file=sys.stderr)
        return 2
    with Rig(args.guests, workdir=args.workdir, accel=args.accel, log=True,
             join=getattr(args, "join", "bridge")) as rig:
        if args.command == "boot":
            print(f"namespace {rig.namespace.name}, bridge br0; guests "
                  + ", ".join(f"{g.name} {g.addr} {g.addr6}" for g in rig.guests)
                  + "; Ctrl-C stops")
            while True:
                time.sleep(3600)
        if args.command == "shell":
            return _shell(rig)
        failed = 0
        for name in names:
            outcome = run(rig, SCENARIOS[name], args.out)
            record = outcome.record
            failed += not (outcome.ok or record["unsupported"])
            verdict = "ok" if outcome.ok else "n/a" if record["unsupported"] else "FAILED"
            print(f"{name:16} {verdict:6} {record['seconds']:6.1f} s "
                  f"attempt {record['attempt']} captured {record['capture'].get('captured')} "
                  f"dropped {sum(record['nft_dropped'])} -> {outcome.directory}")
        summary = args.out / "rig.json"
        summary.write_text(json.dumps({"accel": rig.accel, "timings_s": rig.timings}) + "\n")
        return 1 if failed else 0


def _shell(rig: Rig) -> int:
    guest = rig.guests[0]
    print("commands run in the guest; ':N' switches to guest N; Ctrl-D ends")
    while True:
        try:
            line = input(f"{guest.name}# ")
        except EOFError:
            return 0
        if line.startswith(":") and line[1:].isdigit() and 1 <= int(line[1:]) <= len(rig.guests):
            guest = rig.guests[int(line[1:]) - 1]
            continue
        if line.strip():
            result = guest.run(line, timeout=300)
            sys.stdout.write(result.output)
            if not result.ok:
                print(f"[exit {result.status}]")

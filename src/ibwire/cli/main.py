"""``ibwire <verb>``: the entry point; clean one-line errors, no tracebacks."""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType

from ibwire.cli import check, convert, show, stats
from ibwire.errors import IbwireError

VERBS: dict[str, tuple[ModuleType, str]] = {
    "show": (show, "one line per packet, -V header tree, --json"),
    "check": (check, "verify ICRC, VCRC and structure; exit 1 when a packet fails"),
    "stats": (stats, "counts by encapsulation, transport, opcode and QP"),
    "convert": (convert, "LINKTYPE_INFINIBAND <-> ERF, pcapng -> pcap"),
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="ibwire", description="InfiniBand and RoCE captures: "
                                  "dissect, validate ICRC/VCRC, convert.")
    verbs = top.add_subparsers(dest="verb", required=True)
    for name, (module, text) in VERBS.items():
        sub = verbs.add_parser(name, help=text, description=text)
        module.add_arguments(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    module = VERBS[args.verb][0]
    try:
        return module.run(args)
    except IbwireError as exc:
        print(f"ibwire {args.verb}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (| head): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 0
    except OSError as exc:
        print(f"ibwire {args.verb}: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

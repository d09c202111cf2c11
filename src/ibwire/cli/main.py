"""``ibwire <verb>``: the entry point; clean one-line errors, no tracebacks.

Only the verb asked for is imported and given its arguments: a plain ``ibwire check`` starts
in a few milliseconds, and its start is most of its time on a small file.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module
from types import ModuleType

from ibwire.errors import IbwireError

VERBS: dict[str, tuple[str, str]] = {
    "show": ("ibwire.cli.show", "one line per packet, -V header tree, --json"),
    "check": ("ibwire.cli.check", "verify ICRC, VCRC and structure; exit 1 when a packet fails"),
    "stats": ("ibwire.cli.stats", "counts by encapsulation, transport, opcode and QP"),
    "convert": ("ibwire.cli.convert", "LINKTYPE_INFINIBAND <-> ERF, pcapng -> pcap"),
}


def terminal_columns() -> int:
    """The width ``shutil.get_terminal_size`` would give, without importing shutil (which
    loads the bz2 and lzma modules)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's own layout, fitted to the terminal as argparse fits it."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=terminal_columns() - 2)


def parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (``verb``) only that verb's arguments."""
    top = argparse.ArgumentParser(prog="ibwire", formatter_class=HelpFormatter,
                                  description="InfiniBand and RoCE captures: dissect, "
                                  "validate ICRC/VCRC, convert.")
    verbs = top.add_subparsers(dest="verb", required=True)
    for name, (module, text) in VERBS.items():
        if verb in (None, name):
            sub = verbs.add_parser(name, help=text, description=text,
                                   formatter_class=HelpFormatter)
            import_module(module).add_arguments(sub)
    return top


def verb_module(name: str) -> ModuleType:
    return import_module(VERBS[name][0])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    verb = argv[0] if argv and argv[0] in VERBS else None
    args = parser(verb).parse_args(argv)
    module = verb_module(args.verb)
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

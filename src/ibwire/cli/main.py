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
from ibwire.stopping import Terminated, terminate_as_interrupt

VERBS: dict[str, tuple[str, str]] = {
    "show": ("ibwire.cli.show", "one line per packet, -V header tree, --json"),
    "check": ("ibwire.cli.check", "verify ICRC, VCRC and structure; exit 1 when a packet fails"),
    "stats": ("ibwire.cli.stats", "counts by encapsulation, transport, opcode and QP"),
    "convert": ("ibwire.cli.convert", "LINKTYPE_INFINIBAND <-> ERF, pcapng -> pcap"),
    "qp": ("ibwire.cli.qp", "per connection: retransmissions, NAKs, CNPs, latencies, findings"),
    "gen": ("ibwire.cli.gen", "generate an RDMA conversation (faults, ECN) and its manifest"),
    "rewrite": ("ibwire.cli.rewrite", "tcprewrite's edits plus QPN/PSN/P_Key, every CRC right"),
    "replay": ("ibwire.cli.replay", "tcpreplay's timing on AF_PACKET; --unique-ip keeps ICRCs"),
    "export": ("ibwire.cli.export", "captures as a Parquet/Arrow/CSV dataset (--qp: connections)"),
    "sql": ("ibwire.cli.sql", "a DuckDB query over an exported dataset"),
    "impair": ("ibwire.cli.impair", "join two interfaces, inject exact faults into the RoCE "
               "between them"),
    "fuzz": ("ibwire.cli.fuzz", "differential fuzzing of another parser, shrunk to one-packet "
             "repros"),
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


ENGINES = {"crc": "crc/_engine", "scan": "scan/_engine", "pcap": "pcap/_engine",
           "filemap": "pcap/_filemap", "text": "scan/_text", "streams": "analysis/_streams",
           "observer": "transport/_observer", "impair": "impair/_fast"}
"""Each engine that has a C build and a pure-Python twin, and where its extension is."""


def version_line() -> str:
    """``ibwire VERSION (crc c, scan c, ...)``: which engines would load, found without
    importing them (they need numpy): an extension file beside its package, and
    IBWIRE_NO_EXTENSIONS not 1, as ``ibwire._twins.load_twin`` chooses."""
    from importlib.machinery import EXTENSION_SUFFIXES

    import ibwire

    package = os.path.dirname(ibwire.__file__)
    off = os.environ.get("IBWIRE_NO_EXTENSIONS") == "1"
    kinds = [f"{name} " + ("c" if not off and any(
        os.path.isfile(os.path.join(package, where + suffix)) for suffix in EXTENSION_SUFFIXES)
        else "python") for name, where in ENGINES.items()]
    return f"ibwire {ibwire.__version__} ({', '.join(kinds)})"


class VersionAction(argparse.Action):
    """``--version``: print :func:`version_line` and exit (worked out only when asked)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()


class HelpFormatter(argparse.HelpFormatter):
    """argparse's own layout, fitted to the terminal as argparse fits it."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=terminal_columns() - 2)


#: Where a verb's page is, named at the end of its ``--help``: the docs site's source in the
#: checkout (``mkdocs serve`` shows it as ``/verbs/VERB/``).
DOCS_PAGE = "docs/verbs/{verb}.md"


def parser(verb: str | None = None, arguments: bool = True) -> argparse.ArgumentParser:
    """The whole command line, or (``verb``) only that verb's arguments; ``arguments`` False:
    the verbs' names alone (``ibwire --help``, ``--version``: no verb's module imported)."""
    top = argparse.ArgumentParser(prog="ibwire", formatter_class=HelpFormatter,
                                  description="InfiniBand and RoCE captures: dissect, "
                                  "validate ICRC/VCRC, convert.")
    top.add_argument("--version", action=VersionAction,
                     help="print the version and which engines are compiled (c) or the "
                     "pure-Python twins (python), and exit")
    verbs = top.add_subparsers(dest="verb", required=True)
    for name, (module, text) in VERBS.items():
        if verb in (None, name):
            sub = verbs.add_parser(name, help=text, description=text,
                                   epilog="docs: " + DOCS_PAGE.format(verb=name),
                                   formatter_class=HelpFormatter)
            if arguments:
                import_module(module).add_arguments(sub)
    return top


def verb_module(name: str) -> ModuleType:
    return import_module(VERBS[name][0])


#: Set for the verbs' process unless the user set them: ibwire does no linear algebra, and
#: OpenBLAS (loaded with numpy) starts a thread per core at import, spinning: 0.1-0.15 s of
#: CPU on every run (OPENBLAS_NUM_THREADS: the OpenBLAS README, "Setting the number of
#: threads using environment variables").
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "numpy" not in sys.modules:  # read when numpy loads; too late after
        for name, value in BLAS_THREADS.items():
            os.environ.setdefault(name, value)
    verb = argv[0] if argv and argv[0] in VERBS else None
    args = parser(verb, arguments=verb is not None).parse_args(argv)
    module = verb_module(args.verb)
    try:
        with terminate_as_interrupt():
            return module.run(args)
    except Terminated as exc:  # the verb stopped as for Ctrl-C: its temporary files gone
        return 128 + exc.signum
    except IbwireError as exc:
        print(f"ibwire {args.verb}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (| head): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 0
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ibwire {args.verb}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def command() -> None:
    """The ``ibwire`` command: ``main``, then out of the process without the interpreter's
    teardown (freeing every module, numpy's and pyarrow's state: 0.03-0.05 s of every run).
    A verb has closed (and renamed into place) every file it wrote and stopped its threads
    before it returns; only the standard streams are left to flush."""
    status = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away, or it was closed
            pass
    os._exit(status)


if __name__ == "__main__":
    command()

"""``ibwire sql DIR "SELECT ..."``: a DuckDB query over a dataset ``ibwire export`` wrote, with
the views ``packets`` and ``connections`` (the ``sql`` extra). Prints a table, or CSV/JSON.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="directory ibwire export wrote")
    parser.add_argument("query", metavar="SQL",
                        help='query over the views packets and connections, e.g. "SELECT '
                        'encapsulation, count(*) FROM packets GROUP BY 1"')
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="rows as CSV")
    out.add_argument("--json", action="store_true", help="one JSON object per row")


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()  # a BLOB as hex, not Python's b'...'
    return "" if value is None else str(value)


def _json(value: Any) -> Any:
    """A value JSON can hold: NaN and infinities as null (JSON has none: jq and most
    parsers refuse them), BLOBs as hex, lists and structs through, the rest as text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    return _text(value)


def quote_hint(message: str, query: str) -> str | None:
    """What to write instead, when DuckDB took a dotted column name (``bth.opcode``)
    unquoted for a table's column: ``Referenced table "bth" not found``."""
    import re

    found = re.search(r'Referenced table "([^"]+)" not found', message)
    if found is None:
        return None
    table = found.group(1)
    # the dotted name as the query spells it (outside quotes), else the table's name alone
    spelt = re.search(r'(?<!["\w.])(' + re.escape(table) + r'(?:\.\w+)+)(?![\w"])', query)
    name = spelt.group(1) if spelt else table + ".<field>"
    return (f"hint: column names hold dots: quote them, \"{name}\" (double quotes), "
            f"not {name}")


def run(args: argparse.Namespace) -> int:
    from ibwire.export.sql import duckdb_module, query

    try:
        duckdb = duckdb_module()
    except ImportError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    try:
        names, rows = query(args.directory, args.query)
    except duckdb.Error as exc:
        message = str(exc).splitlines()[0]
        hint = quote_hint(message, args.query)
        print(f"ibwire sql: {message}" + (f"\n{hint}" if hint else ""), file=sys.stderr)
        return 2
    out = sys.stdout
    if args.csv:
        import csv

        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        writer.writerows([_text(v) for v in row] for row in rows)
    elif args.json:
        import json

        for row in rows:
            out.write(json.dumps({n: _json(v) for n, v in zip(names, row, strict=True)},
                                 allow_nan=False) + "\n")
    else:
        cells = [[_text(v) for v in row] for row in rows]
        widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
        out.write("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip()
                  + "\n")
        for r in cells:
            out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                      + "\n")
    return 0

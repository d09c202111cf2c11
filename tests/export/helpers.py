"""Running the CLI in-process and reading what it wrote, for the export tests."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from ibwire.cli.main import main


def run(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``ibwire ARGV``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(argv))
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def show_json(path: Path) -> list[dict]:
    status, out, _ = run("show", "--json", "--no-progress", str(path))
    assert status == 0
    return [json.loads(line) for line in out.splitlines()]


def stats_json(path: Path) -> dict:
    status, out, _ = run("stats", "--json", "--no-progress", str(path))
    assert status in (0, 1)
    return json.loads(out)


def qp_json(path: Path) -> list[dict]:
    _, out, _ = run("qp", "--json", str(path))
    return [json.loads(line) for line in out.splitlines()]

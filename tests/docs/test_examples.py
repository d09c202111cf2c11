"""Every shell example and Python snippet of the docs runs, against the shipped captures, with
its output compared where the page shows it (the conventions: tests/docs/examples.py)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from tests.docs.examples import PYTHON, ROOT, SHELL, Block, blocks, commands, matches, pages

PAGES = [p for p in pages() if any(b.lang in SHELL + PYTHON for b in blocks(p))]


def _environment(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), COLUMNS="80", TZ="UTC",
               PYTHONUNBUFFERED="1", LC_ALL="C.UTF-8", HOME=str(workdir))
    env.pop("IBWIRE_NO_EXTENSIONS", None)
    return env


def _show(expected: list[str], actual: str) -> str:
    return ("expected:\n  " + "\n  ".join(expected) + "\ngot:\n  "
            + "\n  ".join(actual.splitlines()))


def _run_shell(block: Block, workdir: Path) -> None:
    for command in commands(block):
        done = subprocess.run(["bash", "-o", "pipefail", "-ec", command.command],
                              cwd=workdir, env=_environment(workdir), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        if done.returncode != block.exit_status:
            pytest.fail(f"{block.where}: `{command.command}` exited {done.returncode}, not "
                        f"{block.exit_status}:\n{done.stdout[-3000:]}")
        if command.output is not None and not matches(command.output, done.stdout.splitlines()):
            pytest.fail(f"{block.where}: `{command.command}` printed other output\n"
                        + _show(command.output, done.stdout))


def _run_python(block: Block, namespace: dict[str, object], expected: Block | None) -> None:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block.text, block.where, "exec"), namespace)
    except Exception:  # the page's snippet failed: say where
        pytest.fail(f"{block.where}: the snippet raised\n{traceback.format_exc()}")
    if expected is not None:
        want = expected.text.splitlines()
        if not matches(want, out.getvalue().splitlines()):
            pytest.fail(f"{block.where}: the snippet printed other output\n"
                        + _show(want, out.getvalue()))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "captures").symlink_to(ROOT / "captures")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    found = blocks(page)
    for index, block in enumerate(found):
        if block.skipped is not None:
            continue
        if block.file:
            (tmp_path / block.file).write_text(block.text)
        elif block.lang in SHELL:
            _run_shell(block, tmp_path)
        elif block.lang in PYTHON:
            following = found[index + 1] if index + 1 < len(found) else None
            _run_python(block, namespace,
                        following if following is not None and following.is_output else None)


def test_fences_pair_up():
    """An odd number of fences means a block never closes: the page would show prose as code
    and the collector would pair the wrong fences."""
    for page in pages():
        fences = [ln for ln in page.read_text().splitlines() if ln.lstrip().startswith("```")]
        assert len(fences) % 2 == 0, f"{page.relative_to(ROOT)}: a fenced block is not closed"


def test_every_skip_says_why():
    for page in pages():
        for block in blocks(page):
            if block.directive.startswith("skip"):
                assert block.skipped and block.skipped.strip(), f"{block.where}: skip needs a reason"


def test_directives_are_known():
    for page in pages():
        for block in blocks(page):
            for word in block.directive.split():
                if block.skipped is not None:
                    break
                assert word.split("=")[0] in ("exit", "file"), f"{block.where}: {word}?"

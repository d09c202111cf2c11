"""docs/verbs/qp-verdict.md shows real output: its console sessions are run (gen, show, qp;
in a scratch folder, the shipped captures where they name them) and must print what the
page says, exit status included."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from ibwire.cli.main import main
from tests.corpus import ROOT

PAGE = ROOT / "docs" / "verbs" / "qp-verdict.md"


def sessions() -> list[list[tuple[str, list[str]]]]:
    """Each console block as (command, the lines it prints)."""
    out = []
    for block in re.findall(r"```console\n(.+?)```", PAGE.read_text(), re.S):
        steps: list[tuple[str, list[str]]] = []
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
        out.append(steps)
    return out


def test_the_page_has_its_sessions():
    assert len(sessions()) == 3


@pytest.mark.parametrize("number", range(3))
def test_session_prints_what_the_page_says(number, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "captures").symlink_to(ROOT / "captures")
    rxe = re.search(r"```json\n(\{\"version\": 1, \"tap\": \"switch\",.+?)```",
                    PAGE.read_text(), re.S)
    (tmp_path / "rxe-drops.json").write_text(json.dumps(json.loads(rxe.group(1))))
    status = 0
    for command, expected in sessions()[number]:
        if command == "echo $?":
            assert [str(status)] == expected
            continue
        args = shlex.split(command)
        assert args[0] == "ibwire"
        status = main(args[1:])
        got = capsys.readouterr()
        assert (got.out + got.err).splitlines() == expected, command

"""README.md: short, its two set-up commands (the test command is exactly what CI runs; the
main one uses a shipped sample), every verb in its table, its links into the docs alive."""

from __future__ import annotations

import re
from pathlib import Path

from ibwire.cli.main import VERBS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _commands() -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", README)


def test_ci_runs_the_readme_test_command():
    test_command = _commands()[1]
    assert "pytest" in test_command
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_main_command_uses_a_shipped_sample():
    main = _commands()[0]
    assert main.startswith("python -m pip install . &&")
    samples = re.findall(r"captures/[\w.-]+", main)
    assert samples and all((ROOT / s).is_file() for s in samples)


def test_readme_is_short():
    assert len(README.splitlines()) <= 150


def test_readme_lists_every_verb():
    assert not [v for v in VERBS if f"| `ibwire {v}" not in README]


def test_readme_links_exist():
    links = re.findall(r"\]\(((?:docs|captures)/[^)#]+)", README)
    assert links and not [link for link in links if not (ROOT / link).exists()]

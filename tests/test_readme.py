"""README.md's commands: the test command is exactly what CI runs; the main one uses a sample."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    return re.findall(r"```sh\n(.+?)\n```", (ROOT / "README.md").read_text())


def test_ci_runs_the_readme_test_command():
    test_command = _commands()[1]
    assert "pytest" in test_command
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_main_command_uses_a_shipped_sample():
    main = _commands()[0]
    samples = re.findall(r"captures/[\w.-]+", main)
    assert samples and all((ROOT / s).is_file() for s in samples)

"""The site builds with `mkdocs build --strict`: warnings (a broken link, a page missing from
the nav, an API name mkdocstrings cannot find) are errors, as in CI."""

from __future__ import annotations

import subprocess
import sys

from tests.docs.examples import ROOT


def test_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "verbs" / "check" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "scan" / "index.html").is_file()

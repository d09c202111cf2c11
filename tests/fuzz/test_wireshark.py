"""ibwire fuzz --target wireshark against tshark 4.0.17: with an empty allow-list it reports
Wireshark's known mistakes, and each of them is gone once its model is applied (the default
allow-list); what the default allow-list still reports reproduces alone (a new difference,
listed in the closing note of #15 with its repro).

Without tshark the module is skipped, unless ``IBWIRE_REQUIRE_TSHARK=1`` (CI), then it fails.
"""

from __future__ import annotations

import os

import pytest

from ibwire.fuzz.findings import FindingsDir, read_findings
from ibwire.fuzz.generate import Shape
from ibwire.fuzz.run import Config, Fuzzer, replay
from ibwire.fuzz.targets import Limits, make_target
from ibwire.fuzz.wireshark.dissection import tshark_path
from ibwire.fuzz.wireshark.target import default_allow

pytestmark = pytest.mark.skipif(
    tshark_path() is None and os.environ.get("IBWIRE_REQUIRE_TSHARK") != "1",
    reason="tshark is not installed (set IBWIRE_REQUIRE_TSHARK=1 to fail instead)")


def run(tmp_path, allow, name, examples=8):
    target = make_target("wireshark", 1, Limits(30_000))
    config = Config(mode="valid", seed=2, max_examples=examples, batch=examples, shrink_runs=0,
                    allow=tuple(allow), shape=Shape(1))
    out = tmp_path / name
    summary = Fuzzer(target, config, FindingsDir(out, 1)).run()
    return target, summary, out


def test_empty_allow_list_finds_the_known_mistakes(tmp_path):
    target, summary, out = run(tmp_path, [], "empty")
    assert summary.findings and target.version.startswith("4.")
    _target, default, _out = run(tmp_path, default_allow(), "default")
    hidden = {f.signature for f in summary.findings} - {f.signature for f in default.findings}
    assert hidden  # some of what the empty list shows is a known mistake
    for f in [f for f in read_findings(out) if f["signature"] in hidden][:2]:
        # on its repro alone: there without the models, gone with them
        assert f["signature"] in replay(target, out / f["repro"], f)
        assert f["signature"] not in replay(target, out / f["repro"], f, default_allow())
    for f in list(read_findings(_out))[:1]:  # a new difference: real, on its packet alone
        assert f["signature"] in replay(target, _out / f["repro"], f, default_allow())

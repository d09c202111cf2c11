"""ibwire fuzz against parsers written for these tests (tests/fuzz/tinyparser.py), each with a
planted bug of a different kind: each is found within a small budget, and its one-packet
repro shows the same finding when run again alone. The bug-free parser gives no finding,
so the comparison does not invent differences."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ibwire import parse
from ibwire.cli.main import main
from ibwire.fuzz.compare import Allowed
from ibwire.fuzz.findings import FindingsDir, read_findings
from ibwire.fuzz.generate import Shape
from ibwire.fuzz.run import Config, Fuzzer, Summary, replay
from ibwire.fuzz.targets import Limits, make_target
from tests.corpus import ROOT
from tests.fuzz import tinyparser

PARSER = ROOT / "tests" / "fuzz" / "tinyparser.py"


def command(bug: str) -> str:
    return f"{sys.executable} {PARSER} --bug {bug} {{pcap}}"


def fuzz(tmp_path: Path, spec: str, *, linktype: int = 1, max_examples: int = 60,
         timeout_ms: int = 30_000, allow: tuple[Allowed, ...] = (), shrink_runs: int = 5,
         mode: str = "valid") -> tuple[object, Summary, Path]:
    target = make_target(spec, linktype, Limits(timeout_ms))
    out = tmp_path / "out"
    config = Config(mode=mode, seed=1, max_examples=max_examples, batch=30,
                    shrink_runs=shrink_runs, allow=allow, shape=Shape(linktype))
    summary = Fuzzer(target, config, FindingsDir(out, linktype)).run()
    return target, summary, out


def reproduced(target: object, out: Path) -> list[tuple[str, bool]]:
    """Each written finding, and whether its repro shows it again alone."""
    return [(f["signature"], f["signature"] in replay(target, out / f["repro"], f))
            for f in read_findings(out)]


def test_no_bug_no_finding(tmp_path):
    _target, summary, out = fuzz(tmp_path, command("none"), max_examples=60)
    assert summary.examples == 60 and summary.findings == []
    assert (out / "findings.jsonl").read_text() == ""


def test_crash_on_a_boundary_value(tmp_path):
    target, summary, out = fuzz(tmp_path, "python:tests.fuzz.tinyparser:crash_on_max_psn")
    kinds = {(f.kind, f.field) for f in summary.findings}
    assert kinds == {("crash", "SIGSEGV")}, summary
    for f in summary.findings:  # the repro holds the boundary value
        assert parse(bytes.fromhex(f.frame), "ethernet").fields()["bth.psn"] in (0, 0xFFFFFF)
        assert f.got == "SIGSEGV" and f.target_version is None
    found = reproduced(target, out)
    assert found and all(ok for _, ok in found)


def test_exception_text_of_a_python_target(tmp_path):
    """The finding says which exception ended the child, not only its exit status; two
    exceptions are two findings."""
    target, summary, out = fuzz(tmp_path, "python:tests.fuzz.tinyparser:raise_on_psn_zero",
                                shrink_runs=2, max_examples=240)
    assert {(f.kind, f.field) for f in summary.findings} == {("exit", "status 1")}
    assert {(f["signature"], f["message"]) for f in read_findings(out)} == {
        ("exit|status 1|ValueError", "ValueError: planted: PSN 0 rejected"),
        ("exit|status 1|IndexError", "IndexError: planted: PSN 0 out of range")}
    assert all(ok for _, ok in reproduced(target, out))


@pytest.mark.parametrize("expected, got, kind", [
    (0x123456, 0x3456, "low 16 bits"), (0x123456, "0x56", "low 8 bits"),
    (0x1234, 0x3412, "byte order"), (0x123456, 0x563412, "byte order"),
    (100, 99, "off by -1"), (100, 7, "other value"), (None, 5, "invented"),
    (5, None, "null"), ("aa:bb", "cc:dd", "other value"), (True, False, "other value"),
])
def test_kind_of_difference(expected, got, kind):
    from ibwire.fuzz.compare import difference

    assert difference(expected, got) == kind


def test_wrong_field_for_some_opcodes(tmp_path):
    target, summary, out = fuzz(tmp_path, command("qp16"), max_examples=120, shrink_runs=3)
    # one mistake, one finding: the other packets and opcodes that show it are counted
    assert len(summary.findings) == 1, [f.signature for f in summary.findings]
    f = summary.findings[0]
    assert f.signature == "diff|bth.destqp|low 16 bits" and f.difference == "low 16 bits"
    assert f.kind == "diff" and f.field == "bth.destqp"
    assert len(f.opcodes) > 1 and f.count >= len(f.opcodes) and f.opcode in f.opcodes
    for op in [f.opcode, *f.opcodes]:
        assert op < 0x40 and 6 <= op & 0x1F <= 0x0B  # only the RDMA WRITEs
    assert f.got == f.expected & 0xFFFF != f.expected
    assert len(bytes.fromhex(f.frame)) <= f.original_length  # shrunk, never grown
    (line,) = read_findings(out)
    assert (line["count"], line["opcodes"]) == (f.count, f.opcodes)
    assert all(ok for _, ok in reproduced(target, out))
    # with the difference allowed, each repro shows nothing (the no-bug test shows that the
    # comparison invents no other difference)
    allow = (Allowed("known: 16-bit QPs", field="bth.destqp",
                     when={"bth.opcode": [6, 7, 8, 9, 10, 11, 38, 39, 40, 41, 42, 43]}),)
    assert all(replay(target, out / f["repro"], f, allow) == {} for f in read_findings(out))


def test_hang_on_a_length(tmp_path):
    target, summary, out = fuzz(tmp_path, command("hang"), timeout_ms=600, max_examples=30,
                                shrink_runs=2)
    assert {f.kind for f in summary.findings} == {"timeout"}
    for f in summary.findings:
        frame = bytes.fromhex(f.frame)
        at = tinyparser.bth_offset(frame, 1, "")   # VLAN tags and all, as the parser walks
        assert at is not None and (len(frame) - at) % 16 == 0, f.what  # the planted length
    assert all(ok for _, ok in reproduced(target, out))


def test_mistake_only_for_native_ib(tmp_path):
    target, summary, out = fuzz(tmp_path, command("ibgrh"), linktype=247, max_examples=15,
                                shrink_runs=0)
    assert summary.findings
    assert {f.encapsulation for f in summary.findings} == {"ib_global"}
    assert {f.field for f in summary.findings} <= {"bth.opcode", "bth.destqp", "bth.psn"}
    found = reproduced(target, out)
    assert all(ok for _, ok in found[:5])
    _target, summary, _out = fuzz(tmp_path / "eth", command("ibgrh"), max_examples=40)
    assert summary.findings == []


def test_cli_exit_status_and_findings_file(tmp_path):
    def args(out: str, *more: str) -> list[str]:
        return ["fuzz", "--target", command("exit"), "--mode", "valid", "--max-examples", "80",
                "--seed", "3", "--shrink-runs", "0", "--timeout-ms", "30000", "--out",
                str(tmp_path / out), "-q", *more]

    assert main(args("out")) == 1, (tmp_path / "out" / "findings.jsonl").read_text()
    lines = list(read_findings(tmp_path / "out"))
    assert lines and {(f["kind"], f["field"]) for f in lines} == {("exit", "status 3")}
    assert all(f["opcode"] < 0x60 and 0x0D <= f["opcode"] & 0x1F <= 0x12 for f in lines)
    line = lines[0]
    assert line["message"] == f"tinyparser: planted exit on opcode {line['opcode']:#04x}"
    assert (tmp_path / "out" / line["repro"]).is_file() and line["seed"] == 3
    assert line["command"].endswith(str(tmp_path / "out" / line["repro"]))
    assert main(args("again")) == 1  # same seed, same findings
    assert [f["frame"] for f in read_findings(tmp_path / "again")] == \
        [f["frame"] for f in lines]
    allow = tmp_path / "exit.allow"
    allow.write_text('# the exit is known\n{"kind": "exit", "reason": "planted"}\n')
    assert main(args("allowed", "--allow", str(allow))) == 0
    assert main(["fuzz", "--target", "no-such-parser-xyz {pcap}", "--out",
                 str(tmp_path / "none")]) == 2
    assert main(["fuzz", "--target", "python:no_such_module_xyz:f", "--out",
                 str(tmp_path / "none")]) == 2


@pytest.mark.parametrize("line", ['{"field": "bth.psn"', '[1, 2]'])
def test_bad_allow_file(tmp_path, line):
    from ibwire.errors import IbwireError
    from ibwire.fuzz.compare import read_allow

    path = tmp_path / "allow"
    path.write_text(line + "\n")
    with pytest.raises(IbwireError, match="line 1"):
        read_allow(path)


@pytest.mark.parametrize("spec, words", [
    ("python:no_such_module_xyz:f", "ModuleNotFoundError"),
    ("python:tests.fuzz.tinyparser:no_such_function", "AttributeError"),
    ("python:broken_module_xyz:f", "RuntimeError: planted at import"),
    ("python:tests.fuzz.tinyparser:LINKTYPE_INFINIBAND", "not callable"),
])
def test_python_target_that_cannot_load(tmp_path, monkeypatch, capsys, spec, words):
    """One line on stderr naming the target and the error, exit 2: no traceback."""
    (tmp_path / "broken_module_xyz.py").write_text("raise RuntimeError('planted at import')\n")
    monkeypatch.chdir(tmp_path)  # the child imports from the working directory
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    assert main(["fuzz", "--target", spec, "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"ibwire fuzz: {spec}: cannot load ") and words in err, err


def test_repro_command_from_any_directory(tmp_path, monkeypatch):
    """A run with relative paths (the parser, --out) writes a command that replays from /."""
    import os
    import subprocess

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    parser = os.path.relpath(PARSER, work)
    assert main(["fuzz", "--target", f"{sys.executable} {parser} --bug exit {{pcap}}",
                 "--mode", "valid", "--max-examples", "80", "--seed", "3", "--shrink-runs",
                 "0", "--out", "out", "-q"]) == 1
    line = next(read_findings(work / "out"))
    done = subprocess.run(line["command"], shell=True, cwd="/", capture_output=True)
    assert done.returncode == 3, (line["command"], done.stderr)

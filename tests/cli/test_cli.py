"""The ibwire command on the shipped samples and the shared real captures."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ibwire.cli.main import main
from tests import corpus

SAMPLES = Path(__file__).resolve().parents[2] / "captures"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_check_a_clean_sample_exits_zero(capsys):
    status, out, _ = run(capsys, "check", str(SAMPLES / "sample-rocev2.pcap"))
    assert status == 0
    assert "OK: 22 records, 20 InfiniBand/RoCE packets, 2 other; 0 failed" in out


def test_check_reports_each_failing_packet_and_exits_one(capsys):
    status, out, _ = run(capsys, "check", str(SAMPLES / "sample-corrupt.pcap"))
    assert status == 1
    lines = out.splitlines()
    assert any("record 4: ICRC mismatch (wire 0xefbeadde, computed 0x" in line for line in lines)
    assert any("record 6:" in line and "ip.len" in line for line in lines)
    assert "2 failed (ICRC 1, VCRC 0, errors 1)" in lines[-1]
    for how in ((), ("-c", "100"), ("--where", "frame > 0")):  # every path names it once
        _status, out, _ = run(capsys, "check", *how, str(SAMPLES / "sample-corrupt.pcap"))
        assert [line.count("record 6") for line in out.splitlines() if "ip.len" in line] == [1]


def test_check_unreadable_file_exits_two_with_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    status, out, err = run(capsys, "check", str(bad), str(SAMPLES / "sample-ib.pcap"))
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "sample-ib.pcap: OK: 3 records, 3 InfiniBand/RoCE packets" in out
    status, _, err = run(capsys, "show", str(tmp_path / "missing.pcap"))
    assert status == 2 and "missing.pcap" in err


@pytest.mark.parametrize("path", corpus.params(corpus.captures()),
                         ids=lambda p: p.name if p else "none")
def test_every_shared_capture_checks_clean(capsys, path):
    status, out, _ = run(capsys, "check", "--json", str(path))
    assert status == 0
    summary = json.loads(out.splitlines()[-1])
    assert summary["failed"] == 0


def test_show_json_keys_are_wireshark_style(capsys):
    status, out, _ = run(capsys, "show", "--json", "-c", "3", str(SAMPLES / "sample-rocev2.pcap"))
    assert status == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 3
    write = rows[2]
    assert write["frame"] == 3 and write["bth.opcode"] == 6 and write["bth.psn"] == 101
    assert write["reth.va"] == 0x7F0000001000 and write["icrc_ok"] is True
    assert write["vcrc_ok"] is None and write["error"] is None


def test_show_where_and_verbose(capsys):
    status, out, _ = run(capsys, "show", "--where", 'aeth.syndrome.type == "NAK"',
                         str(SAMPLES / "sample-rocev2.pcap"))
    assert status == 0 and len(out.splitlines()) == 1 and "PSN_SEQUENCE_ERROR" in out
    status, out, _ = run(capsys, "show", "-V", "-c", "1", str(SAMPLES / "sample-ib.pcap"))
    assert "lrh.pktlen = " in out and "VCRC" in out and "ICRC" in out


def test_stats_counts(capsys):
    status, out, _ = run(capsys, "stats", "--json", str(SAMPLES / "sample-rocev2.pcap"))
    tables = json.loads(out)
    assert tables["totals"]["ib_packets"] == 20 and tables["totals"]["other"] == 2
    assert tables["opcode"]["RC_ACKNOWLEDGE"] == 6 and tables["opcode"]["CNP"] == 1
    assert tables["encapsulation"] == {"rocev2_ipv4": 19, "rocev2_ipv6": 1}


def test_convert_247_to_erf_and_back(capsys, tmp_path):
    erf = tmp_path / "ib-erf.pcap"
    back = tmp_path / "ib-247.pcap"
    assert run(capsys, "convert", str(SAMPLES / "sample-ib.pcap"), str(erf), "--to", "erf")[0] == 0
    assert run(capsys, "convert", str(erf), str(back), "--to", "infiniband")[0] == 0
    assert back.read_bytes() == (SAMPLES / "sample-ib.pcap").read_bytes()
    status, out, _ = run(capsys, "check", str(erf))
    assert status == 0 and "3 InfiniBand/RoCE packets" in out


def test_console_script_runs(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ibwire.cli.main", "check",
                             str(SAMPLES / "sample-rocev2.pcap")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_command_keeps_its_status_and_all_its_output(tmp_path, capsys):
    """The command leaves without the interpreter's teardown (``command``): its status and
    every line it wrote, block-buffered into a file, still come out."""
    corrupt = str(SAMPLES / "sample-corrupt.pcap")
    assert main(["check", corrupt]) == 1
    expected = capsys.readouterr().out
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        done = subprocess.run([sys.executable, "-m", "ibwire.cli.main", "check", corrupt],
                              stdout=f, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1, done.stderr
    assert out.read_text() == expected and expected.count("\n") > 2


def test_shipped_samples_are_what_the_generator_writes(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_samples", SAMPLES.parent / "tools" / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in ("sample-rocev2.pcap", "sample-ib.pcap", "sample-corrupt.pcap"):
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name


@pytest.mark.parametrize("path", [*corpus.captures(), SAMPLES / "sample-corrupt.pcap"],
                         ids=lambda p: p.name)
def test_check_scanner_and_dissector_agree(path):
    """``check`` counts a pcap or pcapng file (``_tallied``), scans other files in batches
    (``_scanned``); with --where it dissects each packet: same verdicts and lines."""
    assert_check_paths_agree(path)


@pytest.mark.parametrize("pcapng, linktype", [(False, 113), (False, 276), (True, 276)])
def test_check_paths_agree_on_cooked_captures(tmp_path, pcapng, linktype):
    """The same on the corrupt sample's packets as ``tcpdump -i any`` and ``dumpcap -i any``
    write them (Linux SLL/SLL2, pcap or pcapng), with records cut inside their header."""
    from ibwire.pcap import read_capture
    from ibwire.pcap.writer import PcapngWriter, PcapWriter
    from tests.pcap.capture_synth import sll2_header, sll_header

    path = tmp_path / "cooked"
    cook = sll_header if linktype == 113 else sll2_header
    with (PcapngWriter(path) if pcapng else PcapWriter(path, linktype)) as writer:
        for k, record in enumerate(read_capture(SAMPLES / "sample-corrupt.pcap")):
            data = bytes(record.record_data)
            data = cook(int.from_bytes(data[12:14], "big")) + data[14:]
            if k % 7 == 3:
                data = data[:k % 20]  # the cooked header is cut: the reader's error record
            if pcapng:
                writer.write(data, record.timestamp_ns, linktype)
            else:
                writer.write(data, record.timestamp_ns)
    from ibwire.scan.tally import open_tally

    counting = open_tally(path)
    assert counting is not None  # the counting path takes it
    counting.feed.close()
    assert_check_paths_agree(path)


def assert_check_paths_agree(path: Path) -> None:
    from collections import Counter

    from ibwire.cli.check import _inspected, _scanned, _tallied
    from ibwire.scan.tally import open_tally

    args = argparse.Namespace(count=None, where=None, no_progress=True)
    totals = []
    counting = open_tally(path)
    walks = [_scanned, _inspected]
    if counting is not None:
        walks.append(lambda p, a: _tallied(p, counting, a))
    for walk in walks:
        counts: Counter[str] = Counter()
        lines: list[str] = []
        for found, failed in walk(str(path), args):
            counts.update(found)
            lines += failed
        totals.append((+counts, lines))
    (scanned, scanned_lines), (inspected, inspected_lines) = totals[:2]
    assert [line.split(": ")[1] for line in scanned_lines] == \
        [line.split(": ")[1] for line in inspected_lines]  # the record numbers
    assert counting is not None or path.suffix != ".pcapng"
    if counting is not None:  # the counting scan says everything the scanner says
        assert totals[2] == totals[0]
    # a RoCE packet whose lengths lie is still RoCE to the scanner (UDP port 4791 said so);
    # the dissector, having failed, does not count it as IB: the only allowed difference
    assert inspected["ib"] <= scanned["ib"] <= inspected["ib"] + scanned["errors"]
    del scanned["ib"], inspected["ib"]
    assert scanned == inspected


def _show_both_ways(path: Path, count: int | None = None) -> tuple[list[str], list[str]]:
    """``show``'s lines from the scanner, and from the dissector (as --where gives them)."""
    from ibwire.cli.common import inspections
    from ibwire.cli.show import scanned_lines, summary

    args = argparse.Namespace(count=count, where=None, no_progress=True)
    scanned = list(scanned_lines(str(path), args))
    times = _times(path, args)
    dissected = [summary(found, when=next(times)) for found in inspections(str(path), args)]
    return scanned, dissected


def _times(path: Path, args: argparse.Namespace) -> Iterator[str]:
    """The time texts of the records, as the dissector's path of show makes them."""
    from ibwire.cli.common import inspections
    from ibwire.cli.show_time import clock_for

    clock = clock_for(str(path), args)
    for found in inspections(str(path), args):
        yield clock.advance(None if found.record.error else found.record.timestamp_ns)


def _json_both_ways(path: Path, count: int | None = None) -> tuple[list[str], list[str]]:
    """``show --json``'s objects from the scanner's columns, and from the dissector."""
    from ibwire.cli.common import inspections, json_line
    from ibwire.cli.show_columns import texts

    args = argparse.Namespace(count=count, where=None, no_progress=True)
    scanned = [line for batch in texts(str(path), args, "json") for line in batch.decode().split("\n")[:-1]]
    dissected = [json_line(found.fields())[:-1] for found in inspections(str(path), args)]
    return scanned, dissected


def _trees_both_ways(path: Path, count: int | None = None) -> tuple[list[str], list[str]]:
    """``show -V``'s trees from the scanner's columns, and from the dissector."""
    from ibwire.cli.common import inspections
    from ibwire.cli.show import tree
    from ibwire.cli.show_columns import texts

    args = argparse.Namespace(count=count, where=None, no_progress=True)
    scanned = [tree for batch in texts(str(path), args, "tree")
               for tree in batch.decode().split("\n\n")[:-1]]
    times = _times(path, args)
    dissected = [tree(found, next(times)) for found in inspections(str(path), args)]
    return scanned, dissected


#: show's summary lines, its --json objects and its -V trees.
BOTH_WAYS = [pytest.param(_show_both_ways, id="lines"), pytest.param(_json_both_ways, id="json"),
             pytest.param(_trees_both_ways, id="tree")]


@pytest.mark.parametrize("both_ways", BOTH_WAYS)
@pytest.mark.parametrize("path", [*corpus.captures(), *sorted(SAMPLES.glob("*.pcap"))],
                         ids=lambda p: p.name)
def test_show_from_the_scanner_says_what_the_dissector_says(path, both_ways):
    """What show writes from scanner columns is what the dissector gives, byte for byte."""
    scanned, dissected = both_ways(path)
    assert scanned == dissected
    assert len(scanned) > 1


@pytest.mark.parametrize("both_ways", BOTH_WAYS)
def test_show_from_the_scanner_on_every_opcode_and_encapsulation(tmp_path, both_ways):
    """Generated frames of every opcode in every encapsulation (VLAN tags, raw IP, native IB
    as 247 and as ERF), with random field values: the same both ways."""
    from tests.diff.generate import all_packets, write_captures

    for path in write_captures(all_packets(), tmp_path).values():
        scanned, dissected = both_ways(path)
        assert scanned == dissected, path.name
        assert len(scanned) >= 20


@pytest.mark.parametrize("both_ways", BOTH_WAYS)
def test_show_count_stops_both_ways(both_ways):
    scanned, dissected = both_ways(SAMPLES / "sample-rocev2.pcap", count=5)
    assert scanned == dissected and len(scanned) == 5


HEAVY = ("numpy", "construct", "dataclasses", "pathlib", "json", "shutil", "bz2", "lzma",
         "ibwire.cli.show", "ibwire.cli.stats", "ibwire.cli.convert")
"""Modules the start of ``ibwire check`` does without (tens of milliseconds between them)."""


def _as_users_capture(source: Path, target: Path, pcapng: bool, linktype: int) -> Path:
    """``source`` (Ethernet) in pcapng and/or behind Linux SLL2 headers (``tcpdump -i any``)."""
    from ibwire.pcap import PcapWriter, read_capture
    from ibwire.pcap.writer import PcapngWriter
    from tests.pcap.capture_synth import sll2_header

    with (PcapngWriter(target) if pcapng else PcapWriter(target, linktype)) as writer:
        for record in read_capture(source):
            data = bytes(record.record_data)
            if linktype == 276:
                data = sll2_header(int.from_bytes(data[12:14], "big")) + data[14:]
            if pcapng:
                writer.write(data, record.timestamp_ns, linktype)
            else:
                writer.write(data, record.timestamp_ns)
    return target


@pytest.mark.parametrize("pcapng, linktype", [(False, 1), (True, 1), (False, 276), (True, 276)])
def test_check_of_a_clean_capture_loads_no_heavy_module(tmp_path, pcapng, linktype):
    """The counting path starts light: what makes ``ibwire check`` fast on short files; for
    pcapng and the SLL2 records of ``tcpdump -i any`` too. A property of the compiled
    counting path: the pure-Python twin counts with numpy."""
    import ibwire.scan

    if ibwire.scan.implementation != "c":
        pytest.skip("the pure-Python twin counts with numpy; lightness is the C path's")
    path = SAMPLES / "sample-rocev2.pcap"
    if pcapng or linktype != 1:
        path = _as_users_capture(path, tmp_path / "capture", pcapng, linktype)
    code = ("import sys; from ibwire.cli.main import main; "
            f"status = main(['check', '-q', {str(path)!r}]); "
            f"print(status, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out[-1] == "0 []", out


@pytest.mark.parametrize("columns", [None, "57", "0", "wide"])
def test_help_is_as_wide_as_shutil_says(columns, monkeypatch):
    """The help width is found without shutil, but is the width shutil would give."""
    import shutil

    from ibwire.cli.main import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


def test_a_verb_alone_has_the_help_of_the_whole_parser(capsys):
    """``ibwire check --help`` builds only check's arguments: the same text as the whole
    command line gives."""
    from ibwire.cli.main import VERBS, parser

    for verb in VERBS:  # every verb: a help text that does not render is a crash
        texts = []
        for which in (verb, None):
            with pytest.raises(SystemExit):
                parser(which).parse_args([verb, "--help"])
            texts.append(capsys.readouterr().out)
        assert texts[0] == texts[1] and f"usage: ibwire {verb}" in texts[0]


@pytest.mark.parametrize("path", [*corpus.captures(), SAMPLES / "sample-corrupt.pcap",
                                  SAMPLES / "sample-ib.pcap"], ids=lambda p: p.name)
def test_stats_scanner_and_dissector_agree(path):
    """``stats`` counts from the scanner; with --where from the dissector: same tables."""
    from ibwire.cli.stats import collect

    scanned, scanned_failures = collect(argparse.Namespace(
        file=str(path), count=None, where=None, no_progress=True, top=20))
    inspected, inspected_failures = collect(argparse.Namespace(
        file=str(path), count=None, where="frame >= 1", no_progress=True, top=20))
    assert scanned == inspected
    numbers = [[line.split(":")[0] for line in lines]
               for lines in (scanned_failures, inspected_failures)]
    assert numbers[0] == numbers[1]


def test_show_into_a_closed_pipe_is_quiet(tmp_path):
    """``ibwire show F | head -1``: no error message when the reader stops early."""
    big = tmp_path / "big.pcap"
    from tools.make_samples import main as make_samples

    make_samples(tmp_path)
    data = (tmp_path / "sample-rocev2.pcap").read_bytes()
    big.write_bytes(data[:24] + data[24:] * 200)
    done = subprocess.run(f"{sys.executable} -m ibwire.cli.main show {big} | head -1",
                          shell=True, capture_output=True, text=True, check=False)
    assert done.stdout.count("\n") == 1
    assert done.stderr == "", done.stderr


@pytest.mark.parametrize("given", [None, "3"])
def test_the_verbs_run_numpy_without_blas_threads(given):
    """``ibwire`` asks OpenBLAS for one thread (its pool costs 0.1 s of CPU at numpy's
    import; ibwire does no linear algebra) unless the user said otherwise."""
    import os
    import subprocess

    code = ("import sys; from ibwire.cli.main import main; "
            f"main(['show', '-c', '1', {str(SAMPLES / 'sample-rocev2.pcap')!r}]); "
            "import os; print('threads', os.environ.get('OPENBLAS_NUM_THREADS'))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.splitlines()
    assert out[-1] == f"threads {given or 1}"


def test_cm_lines_write_qpns_and_psns_as_bth_does(tmp_path):
    """A CM REQ's QPN and starting PSN on show's line: the QPN in hex of 6 digits and the PSN
    in decimal, as the line's own BTH QP= and PSN=, whichever way the line is written."""
    import re

    import ibwire
    from ibwire.pcap.writer import PcapWriter

    frames = [ibwire.build("rocev2_ipv4", {
        "cm.req": 0x1234, "cm.req.localqpn": 0x19, "cm.req.startpsn": 0xA047B5,
        "bth.psn": 8, "cm.req.serviceid": 0x0000000001064853,
        "cm.req.ip_cm.sip4": "192.0.2.1", "cm.req.ip_cm.dip4": "192.0.2.2"}),
        ibwire.build("rocev2_ipv4", {"bth.opcode": 0x64, "bth.destqp": 0x22, "bth.psn": 9,
                                     "deth.srcqp": 0x19, "deth.q_key": 7})]
    path = tmp_path / "cm.pcap"
    with PcapWriter(str(path), 1) as w:
        for i, f in enumerate(frames):
            w.write(f, i * 1000)
    for lines in _show_both_ways(path):
        req, ud = lines
        assert "QP=0x000001 PSN=8 " in req
        assert "CM ConnectRequest QP=0x000019 PSN=10504117" in req, req
        assert "srcqp=0x000019" in ud, ud
        for line in lines:
            assert all(len(q) == 8 for q in re.findall(r"(?:QP|srcqp)=(0x[0-9a-f]+)", line))
            assert not re.search(r"PSN=0x", line)

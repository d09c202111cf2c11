"""``ibwire check/show/stats`` on a capture that shrinks while it is read; each in a fresh process, with the C engines and with the twins
(IBWIRE_NO_EXTENSIONS=1). No process may die of SIGBUS (return code -7).

The driver reads in small windows and truncates the file at the second window the reader
makes (or, for the record-by-record reader, as its iteration begins): before it is made (the reader finds the file shorter: exit 1, a line naming the file
and the record cut, as for any truncated capture), or just after it is made, in its middle
(the bytes vanish under it: exit 2, one line on stderr naming the file and the record)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pcap.capture_synth import epb, ethernet_frame, pcap_file, pcapng_file

FRAME = ethernet_frame(b"\x45" + bytes(985))  # other traffic, 1000 bytes
RECORD = 16 + len(FRAME)
COUNT = 3000
CUT_RECORD = 2500
AT = 24 + CUT_RECORD * RECORD  # where record 2501 (counting from 1) starts
CUT = AT + RECORD // 2  # inside it
ENGINES = {"c": "0", "python": "1"}

DRIVER = """
import os, sys
import ibwire.pcap.filemap as filemap, ibwire.scan.feed as feed
from ibwire.cli.main import main
mode, cut, path, *argv = sys.argv[1:]
made = [0]
real = filemap.map_window
def mapping(fileno, offset, length, name):
    made[0] += 1
    if made[0] == 2 and mode == "before":
        os.truncate(path, int(cut))
    window = real(fileno, offset, length, name)
    if made[0] == 2 and mode == "after":
        os.truncate(path, offset + min(length, os.path.getsize(path) - offset) // 2)
    return window
filemap.map_window = feed.map_window = mapping
import ibwire.pcap.source as source
begin = source.CaptureReader.__iter__
def iterate(self):
    if mode == "iter":  # the record-by-record reader: opened, then the file shrinks
        os.truncate(path, int(cut))
    return begin(self)
source.CaptureReader.__iter__ = iterate
init = feed.MappedFeed.__init__
def small(self, handle, size, name, length):
    init(self, handle, size, name, min(length, 1 << 20))  # 1 MiB windows: two threads
feed.MappedFeed.__init__ = small
sys.exit(main(argv))
"""


def run(tmp_path: Path, engine: str, mode: str, verb: list[str], pcapng: bool = False
        ) -> tuple[int, str, str, Path]:
    path = tmp_path / ("rotating.pcapng" if pcapng else "rotating.pcap")
    frames = [FRAME] * COUNT
    path.write_bytes(pcapng_file(frames) if pcapng else pcap_file(frames))
    env = {**os.environ, "IBWIRE_NO_EXTENSIONS": ENGINES[engine]}
    done = subprocess.run([sys.executable, "-c", DRIVER, mode, str(CUT), str(path), *verb,
                           "--no-progress", str(path)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode != -signal.SIGBUS, done.stderr
    return done.returncode, done.stdout, done.stderr, path


VERBS = [["check"], ["check", "-c", "100000"], ["show"], ["stats"]]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_a_file_found_shorter_reads_as_cut(tmp_path, engine, verb):
    status, out, err, path = run(tmp_path, engine, "before", verb)
    assert status == 1, err
    cut = f"from {24 + COUNT * RECORD} to {CUT} bytes while it was being read"
    if verb[0] == "check":
        lines = out.splitlines()
        assert lines[0] == f"{path}: record {CUT_RECORD + 1}: the file shrank {cut} (byte {AT})"
        assert f"FAILED: {CUT_RECORD + 1} records" in lines[-1]
        assert err == ""
    else:
        assert err == f"ibwire {verb[0]}: {path}: record {CUT_RECORD + 1}: the file shrank " \
                      f"{cut} (byte {AT})\n"
    if verb[0] == "show":
        assert len(out.splitlines()) == CUT_RECORD + 1


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_bytes_vanishing_under_the_reader_end_it(tmp_path, engine, verb):
    status, out, err, path = run(tmp_path, engine, "after", verb)
    assert status == 2, err
    assert re.fullmatch(rf"ibwire {verb[0]}: {re.escape(str(path))}: the file shrank to \d+ "
                        r"bytes while it was being read \(at record \d+\); it can no longer "
                        r"be read\n", err), err
    if verb[0] == "show":  # no line read from zeros came out
        assert len(out.splitlines()) < COUNT and "?" not in out


@pytest.mark.parametrize("engine", ENGINES)
def test_pcapng_found_shorter(tmp_path, engine):
    status, out, _err, path = run(tmp_path, engine, "before", ["check"], pcapng=True)
    assert status == 1
    number = (CUT - len(pcapng_file([]))) // len(epb(0, 0, FRAME)) + 1  # the EPB cut
    assert out.startswith(f"{path}: record {number}: the file shrank from ")
    assert f"FAILED: {number} records" in out


@pytest.mark.parametrize("engine", ENGINES)
def test_the_dissecting_reader_never_exits_zero(tmp_path, engine):
    """``--where`` reads record by record (``open_capture``): mapped in C, where the bytes
    vanish under the map (exit 2); read in chunks by the twin, where the data ends (exit 1)."""
    status, _out, err, path = run(tmp_path, engine, "iter", ["check", "--where", "frame"])
    assert status == (2 if engine == "c" else 1), err
    if engine == "c":
        assert err.startswith(f"ibwire check: {path}: the file shrank")
        assert f"at record {CUT_RECORD + 1}," in err

"""Outputs written through a temporary file (``ibwire.pcap.atomic``) get the mode a file
opened under their name would have: 0666 less the umask, or the mode of the file they replace;
never the temporary file's 0600. Tried with a known umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ibwire.cli.main import main
from ibwire.pcap import PcapngWriter, PcapWriter
from ibwire.pcap.atomic import AtomicFile, new_file_mode, replace_into, umask

SAMPLE = Path(__file__).resolve().parents[2] / "captures" / "sample-rocev2.pcap"


@pytest.fixture(params=[0o022, 0o027, 0o002])
def mask(request: pytest.FixtureRequest):
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_umask_is_read_without_changing_it(mask: int) -> None:
    assert umask() == mask
    assert umask() == mask  # still


def test_writers_and_atomic_files(tmp_path: Path, mask: int) -> None:
    with PcapWriter(tmp_path / "a.pcap", 1) as writer:
        writer.write(bytes(60), 0)
    with PcapngWriter(tmp_path / "b.pcapng") as ng:
        ng.write(bytes(60), 0, 1)
    out = AtomicFile(tmp_path / "c.json")
    out.file.write(b"{}")
    out.commit()
    for name in ("a.pcap", "b.pcapng", "c.json"):
        assert _mode(tmp_path / name) == 0o666 & ~mask, name


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, mask: int) -> None:
    target = tmp_path / "kept.pcap"
    target.write_bytes(b"old")
    target.chmod(0o604)
    with PcapWriter(target, 1) as writer:
        writer.write(bytes(60), 0)
    assert _mode(target) == 0o604 and new_file_mode(target) == 0o604


def test_a_file_written_by_another_tool(tmp_path: Path, mask: int) -> None:
    """What a tool wrote 0600 under a temporary name (dumpcap's spool, a plot) comes out
    as a new file would."""
    spool = tmp_path / "spool"
    spool.write_bytes(b"x")
    spool.chmod(0o600)
    replace_into(spool, tmp_path / "kept.pcap")
    assert _mode(tmp_path / "kept.pcap") == 0o666 & ~mask and not spool.exists()


@pytest.mark.parametrize("argv", [
    ["convert", str(SAMPLE), "{out}", "--to", "pcapng"],
    ["show", "--where", "bth.opcode == 4", "-w", "{out}", str(SAMPLE)],
    ["rewrite", str(SAMPLE), "{out}", "--ttl", "9"],
])
def test_verbs_outputs(tmp_path: Path, mask: int, argv: list[str]) -> None:
    out = tmp_path / "out.pcap"
    assert main([a.replace("{out}", str(out)) for a in argv]) == 0
    assert _mode(out) == 0o666 & ~mask


def test_plots(tmp_path: Path, mask: int) -> None:
    pytest.importorskip("matplotlib")
    assert main(["qp", "--plot", str(tmp_path / "plots"), "--svg", str(SAMPLE)]) in (0, 1)
    made = sorted((tmp_path / "plots").iterdir())
    assert made and all(_mode(p) == 0o666 & ~mask for p in made)

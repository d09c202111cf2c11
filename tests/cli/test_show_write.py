"""``show FILE [--where EXPR] -w OUT`` (``ibwire.cli.show_write``): the records kept, as
stored, in the input's format; OUT only when complete; the input untouched."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from ibwire.cli.main import main
from ibwire.inspect import inspect
from ibwire.pcap import open_capture, read_capture
from ibwire.where import compile_where
from tests.pcap.capture_synth import T0, epb, erf_record, idb, shb

SAMPLES = Path(__file__).resolve().parents[2] / "captures"
CORRUPT = SAMPLES / "sample-corrupt.pcap"


def _stored(path: Path) -> list[tuple[bytes, int, int]]:
    return [(bytes(r.record_data), r.timestamp_ns, r.linktype) for r in read_capture(path)]


def _kept(path: Path, where: str) -> list[tuple[bytes, int, int]]:
    keep = compile_where(where)
    return [(bytes(r.record_data), r.timestamp_ns, r.linktype) for r in read_capture(path)
            if r.error is None and keep(inspect(r).fields())]


def test_the_bad_icrc_packets_of_a_pcap(tmp_path: Path, capsys) -> None:
    before = hashlib.sha256(CORRUPT.read_bytes()).hexdigest()
    out = tmp_path / "bad.pcap"
    assert main(["show", "--where", "icrc_ok == false", "-w", str(out), str(CORRUPT)]) == 0
    written, err = capsys.readouterr()
    assert written == ""  # as tshark -w: nothing printed
    want = _kept(CORRUPT, "icrc_ok == false")
    assert want and _stored(out) == want
    assert f"{out}: {len(want)} of 22 records written" in err
    assert out.read_bytes()[:4] == CORRUPT.read_bytes()[:4]  # the same magic: nanoseconds
    assert hashlib.sha256(CORRUPT.read_bytes()).hexdigest() == before


def test_one_qp_and_a_count(tmp_path: Path) -> None:
    out = tmp_path / "qp.pcap"
    assert main(["show", "--where", "bth.destqp == 0x22", "-c", "9", "-w", str(out),
                 str(CORRUPT)]) == 0
    first = [r for r in read_capture(CORRUPT)][:9]
    keep = compile_where("bth.destqp == 0x22")
    assert _stored(out) == [(bytes(r.record_data), r.timestamp_ns, r.linktype) for r in first
                            if keep(inspect(r).fields())]


def test_without_where_every_readable_record(tmp_path: Path) -> None:
    out = tmp_path / "all.pcap"
    assert main(["show", "-w", str(out), str(SAMPLES / "sample-ib.pcap")]) == 0
    assert out.read_bytes() == (SAMPLES / "sample-ib.pcap").read_bytes()


def test_a_pcapng_stays_pcapng(tmp_path: Path) -> None:
    frames = [bytes(r.record_data) for r in read_capture(CORRUPT)]
    source = tmp_path / "in.pcapng"
    source.write_bytes(shb() + idb(1, 65535, tsresol=9)
                       + b"".join(epb(0, T0 + 1500 * k, f) for k, f in enumerate(frames)))
    out = tmp_path / "bad.pcapng"
    assert main(["show", "--where", "icrc_ok == false", "-w", str(out), str(source)]) == 0
    with open_capture(out) as reader:
        assert reader.format == "pcapng"
    assert _stored(out) == _kept(source, "icrc_ok == false") != []


def test_a_native_erf_file_becomes_a_pcap_of_erf_records(tmp_path: Path) -> None:
    frames = [bytes(r.frame) for r in read_capture(SAMPLES / "sample-ib.pcap")]
    source = tmp_path / "in.erf"
    source.write_bytes(b"".join(erf_record(T0 + 1000 * k, 21, f) for k, f in enumerate(frames)))
    out = tmp_path / "out.pcap"
    assert main(["show", "--where", "frame >= 2", "-w", str(out), str(source)]) == 0
    with open_capture(out) as reader:
        assert reader.format == "pcap" and reader.header.linktype == 197
    assert [bytes(r.frame) for r in read_capture(out)] == frames[1:]
    assert [r.timestamp_ns for r in read_capture(out)] == \
        [r.timestamp_ns for r in read_capture(source)][1:]


def test_a_gzip_input_is_written_plain(tmp_path: Path) -> None:
    import gzip

    source = tmp_path / "in.pcap.gz"
    source.write_bytes(gzip.compress(CORRUPT.read_bytes()))
    out = tmp_path / "out.pcap"
    assert main(["show", "-w", str(out), "--where", "icrc_ok == false", str(source)]) == 0
    assert _stored(out) == _kept(CORRUPT, "icrc_ok == false")


def test_unreadable_records_are_left_out_and_counted(tmp_path: Path, capsys) -> None:
    data = CORRUPT.read_bytes()
    source = tmp_path / "cut.pcap"
    source.write_bytes(data[:-10])  # the last record cut short
    out = tmp_path / "out.pcap"
    assert main(["show", "-w", str(out), str(source)]) == 0
    assert "21 of 22 records written, 1 unreadable left out" in capsys.readouterr().err
    assert _stored(out) == _stored(CORRUPT)[:21]


def test_an_unknown_field_writes_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out.pcap"
    assert main(["show", "--where", "bth.nosuch == 1", "-w", str(out), str(CORRUPT)]) == 2
    assert "unknown field" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, said", [
    (["-V", "-w", "out.pcap"], "-w writes the records to a file"),
    (["--json", "-w", "out.pcap"], "-w writes the records to a file"),
    (["-w", "-"], "-w takes a file name"),
])
def test_refused_before_anything_is_written(tmp_path: Path, capsys, monkeypatch, argv,
                                            said) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as caught:
        main(["show", *argv, str(CORRUPT)])
    assert caught.value.code == 2
    assert said in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_input_is_never_the_output(tmp_path: Path, capsys) -> None:
    source = tmp_path / "in.pcap"
    source.write_bytes(CORRUPT.read_bytes())
    assert main(["show", "-w", str(source), str(source)]) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert source.read_bytes() == CORRUPT.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.pcap"]


def test_an_unreadable_file_leaves_no_output(tmp_path: Path) -> None:
    source = tmp_path / "junk.pcap"
    source.write_bytes(struct.pack("<I", 0x12345678) + bytes(40))
    out = tmp_path / "out.pcap"
    assert main(["show", "-w", str(out), str(source)]) == 2
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["junk.pcap"]

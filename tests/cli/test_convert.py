"""``ibwire convert --to pcapng`` (``ibwire.pcap.pcap_to_pcapng``): every record as stored,
its time, link type and snaplen kept, the input's timestamp resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from ibwire.cli.main import main
from ibwire.pcap import open_capture, pcap_to_pcapng, pcapng_to_pcap, read_capture
from tests.pcap.capture_synth import erf_record, pcap_file

SAMPLES = Path(__file__).resolve().parents[2] / "captures"


def _records(path: Path) -> list[tuple[bytes, int, int, int]]:
    return [(bytes(r.record_data), r.timestamp_ns, r.linktype, r.record_orig_len)
            for r in read_capture(path)]


def _tsresols(path: Path) -> set[int]:
    with open_capture(path) as reader:
        assert reader.format == "pcapng"
        list(reader)
        return {i.tsresol for i in reader.interfaces}


@pytest.mark.parametrize("name", ["sample-rocev2.pcap", "sample-ib.pcap", "sample-corrupt.pcap"])
def test_a_pcap_becomes_a_pcapng_of_the_same_records(tmp_path: Path, capsys, name: str) -> None:
    out = tmp_path / "out.pcapng"
    assert main(["convert", str(SAMPLES / name), str(out), "--to", "pcapng"]) == 0
    written = len(list(read_capture(SAMPLES / name)))
    assert capsys.readouterr().out == f"{out}: {written} records written, 0 skipped\n"
    assert _records(out) == _records(SAMPLES / name)
    assert _tsresols(out) == {9}  # the samples: nanoseconds
    back = tmp_path / "back.pcap"
    pcapng_to_pcap(out, back)
    assert _records(back) == _records(SAMPLES / name)


def test_microseconds_stay_microseconds(tmp_path: Path) -> None:
    source = tmp_path / "us.pcap"
    source.write_bytes(pcap_file([bytes(60), bytes(70)], step_ns=3_000))
    out = tmp_path / "us.pcapng"
    assert pcap_to_pcapng(source, out).records_written == 2
    assert _records(out) == _records(source) and _tsresols(out) == {6}


def test_a_native_erf_file_keeps_its_erf_records(tmp_path: Path) -> None:
    source = tmp_path / "in.erf"
    source.write_bytes(erf_record(1_700_000_000_123_456_789, 21, bytes(30)))
    out = tmp_path / "out.pcapng"
    pcap_to_pcapng(source, out)
    assert _records(out) == _records(source)
    assert [r.timestamp_ns for r in read_capture(out)] == [r.timestamp_ns for r in
                                                           read_capture(source)]


def test_the_input_is_not_the_output(tmp_path: Path, capsys) -> None:
    source = tmp_path / "same.pcap"
    source.write_bytes((SAMPLES / "sample-ib.pcap").read_bytes())
    assert main(["convert", str(source), str(source), "--to", "pcapng"]) == 2
    assert source.read_bytes() == (SAMPLES / "sample-ib.pcap").read_bytes()

"""``scan_capture`` reads every format window by window and agrees record for record with
the streaming reader (``ibwire.pcap.read_capture``), whatever the window size."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.errors import CaptureError
from ibwire.pcap import LINK_CODES, read_capture
from ibwire.scan import scan_capture
from ibwire.strategies import packets
from tests.pcap.capture_synth import (
    SHARED_CAPTURES,
    T0,
    assert_index_agrees,
    erf_record,
    pcap_file,
    pcap_header,
    pcap_record,
    pcapng_file,
    sll_header,
    warning_key,
)

ROOT = Path(__file__).resolve().parents[2]


def assert_scan_agrees(source: object, records: list, window: int) -> None:
    """Rows of the scan = the reader's records: numbering, frames, timestamps, errors."""
    rows = 0
    for batch in scan_capture(source, window=window):
        for row in range(len(batch)):
            record = records[rows]
            assert batch["record"][row] == record.index == rows
            assert warning_key(batch.warnings.get(row)) == warning_key(record.warning), rows
            if record.error is not None:
                error = batch.error(row)
                assert (type(error), error.offset, error.reason) == (
                    type(record.error), record.error.offset, record.error.reason)
                assert batch["error"][row] == 5
            else:
                assert bytes(batch.frame(row)) == bytes(record.frame)
                assert batch["link"][row] == LINK_CODES[record.link]
                assert batch["timestamp_ns"][row] == record.timestamp_ns
                assert batch["frame.orig_len"][row] == record.orig_len
                assert batch["linktype"][row] == record.linktype
            rows += 1
    assert rows == len(records)


def _frames(n: int) -> list[bytes]:
    ethernet = packets("rocev2_ipv4", max_payload=300).filter(lambda g: g.link == "ethernet")
    @given(st.lists(ethernet, min_size=n, max_size=n))
    @settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    def draw(found):
        out.extend(g.frame for g in found)

    out: list[bytes] = []
    draw()
    return out


FRAMES = _frames(40)


@pytest.mark.parametrize("rows", [7, 1 << 16])
@pytest.mark.parametrize("window", [1, 100, 4096, 1 << 20])
@pytest.mark.parametrize("kind", ["pcap", "pcap-be-ns", "pcapng", "sll", "erf", "gzip"])
def test_formats_and_windows(tmp_path, monkeypatch, kind, window, rows):
    monkeypatch.setattr("ibwire.scan.capture.BATCH_ROWS", rows)
    if kind == "pcap":
        data = pcap_file(FRAMES)
    elif kind == "pcap-be-ns":
        data = pcap_file(FRAMES, order=">", nanoseconds=True)
    elif kind == "pcapng":
        data = pcapng_file(FRAMES)
    elif kind == "sll":
        data = pcap_file([sll_header(0x0800) + f[14:] for f in FRAMES], linktype=113)
    elif kind == "erf":
        data = pcap_file([erf_record(T0, 2, b"\0\0" + f) for f in FRAMES], linktype=197)
    else:
        data = gzip.compress(pcap_file(FRAMES))
    path = tmp_path / "capture"
    path.write_bytes(data)
    records = list(read_capture(path))
    assert len(records) == len(FRAMES)
    assert_scan_agrees(path, records, window)
    assert_scan_agrees(io.BytesIO(data), records, window)


@pytest.mark.parametrize("window", [64, 1 << 20])
def test_erf_records_cut_by_their_pcap_record_are_warned(tmp_path, window):
    """An ERF record whose pcap record ends inside its frame is usable with a warning, in the
    scanner as in the reader; a caplen over the snaplen too (that warning wins)."""
    whole = [erf_record(T0, 2, b"\0\0" + f) for f in FRAMES[:4]]
    cut = [(whole[0], None), (whole[1][:40], None), (whole[2], None), (whole[3][:30], 10)]
    data = pcap_header(197, snaplen=max(map(len, whole)))
    for k, (erf, orig) in enumerate(cut):
        data += pcap_record(T0 + k, erf, orig_len=orig or len(whole[k]))
    path = tmp_path / "capture.pcap"
    path.write_bytes(data)
    records = list(read_capture(path))
    reasons = [r.warning.reason if r.warning else None for r in records]
    assert reasons[0] is None and reasons[2] is None
    assert "ERF record cut" in reasons[1] and "caplen 30 > orig_len 10" in reasons[3]
    assert_scan_agrees(path, records, window)
    assert_index_agrees(data, records)


@pytest.mark.parametrize("tail, window", [
    (b"\0" * 7, 64),  # a partial record header
    (pcap_record(T0, b"abcdef")[:-2], 64),  # record data cut short
    (bytes(8) + (1 << 30).to_bytes(4, "little") + bytes(4), 4096),  # absurd caplen
])
def test_capture_errors_end_the_scan_with_one_row(tmp_path, tail, window):
    path = tmp_path / "bad.pcap"
    path.write_bytes(pcap_file(FRAMES[:5]) + tail)
    records = list(read_capture(path))
    assert records[-1].error is not None and len(records) == 6
    assert_scan_agrees(path, records, window)


def test_corrupt_gzip(tmp_path):
    data = gzip.compress(pcap_file(FRAMES))
    path = tmp_path / "cut.pcap.gz"
    path.write_bytes(data[:len(data) // 2])
    records = list(read_capture(path))
    assert records[-1].error is not None
    assert_scan_agrees(path, records, 4096)


def test_shared_and_sample_captures():
    paths = sorted(p for p in SHARED_CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng",
                                                                         ".erf", ".gz"))
    paths += sorted((ROOT / "captures").glob("*.pcap"))
    assert paths
    for path in paths:
        assert_scan_agrees(path, list(read_capture(path)), 1 << 16)


@pytest.mark.parametrize("data, words", [(b"", "empty"), (b"\x00" * 40, "not a pcap")])
def test_file_level_errors(tmp_path, data, words):
    path = tmp_path / "bad.pcap"
    path.write_bytes(data)
    with pytest.raises(CaptureError, match=words):
        list(scan_capture(path))
    with pytest.raises(CaptureError, match="cannot open"):
        list(scan_capture(tmp_path / "missing.pcap"))


def test_batches_hold_the_verdicts():
    frames = [bytearray(f) for f in FRAMES[:4]]
    frames[2][-1] ^= 0xFF  # ICRC
    batch = next(scan_capture(io.BytesIO(pcap_file([bytes(f) for f in frames]))))
    assert batch["icrc_ok"].tolist() == [1, 1, 0, 1]
    assert batch.failed().tolist() == [False, False, True, False]
    assert batch.is_ib().all()
    assert np.array_equal(batch["offset.network"], 14 + 4 * batch["vlan.count"].astype(int))


def test_arrow_table_has_every_column():
    pa = pytest.importorskip("pyarrow")
    batch = next(scan_capture(io.BytesIO(pcap_file(FRAMES[:3]))))
    table = batch.to_arrow()
    assert table.num_rows == 3 and table.column_names == batch.names
    assert table.column("bth.psn").to_pylist() == batch["bth.psn"].tolist()
    assert table.schema.field("ipv6.src").type == pa.binary(16)
    assert table.column("icrc_ok").to_pylist() == [1, 1, 1]

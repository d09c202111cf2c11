"""Every malformation gives the documented error.

File-level (at open): CaptureError naming the file and a byte offset. Record-level: iteration
never raises; a lying length that desynchronises the stream ends it with one error record; a
problem confined to one record (pcapng block, ERF header, SLL header) is one error record and
reading goes on; caplen > snaplen is a warning on a normal record.
"""

from __future__ import annotations

import gzip
import struct

import pytest

from ibwire.errors import CaptureError, IbwireError, MalformedError, TruncatedError
from ibwire.pcap import LINK_CODES, index_capture, open_capture, read_capture
from tests.pcap.capture_synth import (
    T0,
    block,
    epb,
    erf_record,
    ethernet_frame,
    ib_frame,
    idb,
    option,
    pcap_file,
    pcap_header,
    pcap_record,
    pcapng_file,
    record_key,
    shb,
)

FRAMES = [ethernet_frame(), ethernet_frame(bytes(50))]
GOOD_PCAP = pcap_file(FRAMES)
GOOD_PCAPNG = pcapng_file(FRAMES)
PCAP_END = len(GOOD_PCAP)


@pytest.mark.parametrize(("data", "words"), [
    (b"", "empty file"),
    (b"GIF89a" + bytes(40), "not a pcap, pcapng, gzip or ERF"),
    (pcap_header()[:10], "truncated pcap global header"),
    (pcap_header(version=(3, 0)), "unknown pcap version 3.0"),
    (pcap_header(version=(2, 9)), "unknown pcap version 2.9"),
    (shb()[:20], "truncated pcapng section header"),
    (shb()[:8] + b"\x00\x11\x22\x33" + shb()[12:], "bad pcapng byte-order magic"),
    (shb(major=2), "unsupported pcapng version 2"),
    (shb()[:4] + struct.pack("<I", 30) + shb()[8:], "bad pcapng section header length 30"),
    (struct.pack("<I", 0xA1B2CD34) + bytes(20), "modified (Kuznetzov) pcap"),
    (gzip.compress(b"", mtime=0), "empty file (after gzip decompression)"),
])
def test_file_level_errors(write_capture, data: bytes, words: str) -> None:
    path = write_capture(data)
    with pytest.raises(CaptureError) as caught:
        open_capture(path)
    message = str(caught.value)
    assert words in message and str(path) in message and "byte " in message
    assert "\n" not in message
    with pytest.raises(CaptureError):
        index_capture(path)


def test_missing_file_is_a_capture_error(tmp_path) -> None:
    with pytest.raises(CaptureError, match="cannot open"):
        open_capture(tmp_path / "nope.pcap")


def _only_error(records: list, index: int) -> IbwireError:
    assert [r.error is not None for r in records] == [False] * index + [True]
    record = records[-1]
    assert record.index == index and record.error.record == index
    assert record.frame == b"" and record.link == "other"
    assert f"record {index}" in str(record.error) and f"byte {record.error.offset}" in str(
        record.error)
    return record.error


def _check_index(path, records: list) -> None:
    index = index_capture(path)
    assert len(index.offsets) == len(records)
    assert [e.record for e in index.errors] == [r.index for r in records if r.error]
    assert [(type(e), e.offset, e.reason) for e in index.errors] == [
        (type(r.error), r.error.offset, r.error.reason) for r in records if r.error]
    for row, record in enumerate(records):
        assert index.link_codes[row] == LINK_CODES[record.link]
        assert index.lengths[row] == record.caplen


@pytest.mark.parametrize(("data", "kind", "offset", "words"), [
    (GOOD_PCAP + bytes(5), TruncatedError, PCAP_END, "truncated record header"),
    (GOOD_PCAP + b"garbage-garbage", TruncatedError, PCAP_END, "15 trailing bytes"),
    (GOOD_PCAP + pcap_record(T0, bytes(100))[:60], TruncatedError, PCAP_END + 8,
     "truncated record data: caplen 100, 44 bytes left"),
    (GOOD_PCAP + pcap_record(T0, bytes(30), caplen=300 << 20), MalformedError, PCAP_END + 8,
     "absurd caplen"),
    (GOOD_PCAP + pcap_record(T0, bytes(30), caplen=10 << 20), TruncatedError, PCAP_END + 8,
     "truncated record data"),
])
def test_pcap_record_errors_end_iteration(write_capture, data: bytes, kind: type, offset: int,
                                          words: str) -> None:
    path = write_capture(data)
    records = list(read_capture(path))
    error = _only_error(records, 2)
    assert type(error) is kind and error.offset == offset and words in error.reason
    assert [bytes(r.frame) for r in records[:2]] == FRAMES
    _check_index(path, records)


def test_caplen_over_snaplen_is_a_warning(write_capture) -> None:
    data = pcap_file(FRAMES, snaplen=20) + pcap_record(T0, bytes(10), orig_len=4)
    path = write_capture(data)
    records = list(read_capture(path))
    assert [r.error for r in records] == [None] * 3
    assert [bytes(r.frame) for r in records[:2]] == FRAMES
    assert ["snaplen 20" in str(r.warning) for r in records] == [True, True, False]
    assert "caplen 10 > orig_len 4" in str(records[2].warning)
    assert all(r.warning.record == r.index for r in records)
    _check_index(path, records)


PCAPNG_END = len(GOOD_PCAPNG)


def _bad_block(length: int | None = None, trailing: int | None = None) -> bytes:
    return block(6, struct.pack("<IIIII", 0, 0, 0, 4, 4) + b"abcd", length=length,
                 trailing=trailing)


@pytest.mark.parametrize(("tail", "kind", "offset", "words"), [
    (_bad_block(length=34) + bytes(8), MalformedError, PCAPNG_END + 4, "multiple of 4"),
    (_bad_block(length=8), MalformedError, PCAPNG_END + 4, "block length 8"),
    (_bad_block(trailing=40), MalformedError, PCAPNG_END + 32, "trailing block length"),
    (_bad_block(length=4000), TruncatedError, PCAPNG_END + 4, "runs past the end"),
    (_bad_block()[:10], TruncatedError, PCAPNG_END + 4, "runs past the end"),
    (b"\x06\x00\x00", TruncatedError, PCAPNG_END, "truncated block header"),
    (shb()[:8] + b"\x00\x11\x22\x33" + shb()[12:], MalformedError, PCAPNG_END,
     "byte-order magic"),
    (shb(major=3), MalformedError, PCAPNG_END, "bad section header"),
])
def test_pcapng_lying_block_lengths_end_iteration(write_capture, tail: bytes, kind: type,
                                                  offset: int, words: str) -> None:
    path = write_capture(GOOD_PCAPNG + tail, ".pcapng")
    records = list(read_capture(path))
    error = _only_error(records, 2)
    assert type(error) is kind and error.offset == offset and words in error.reason
    _check_index(path, records)


@pytest.mark.parametrize(("bad", "words"), [
    (epb(0, 1, bytes(8), caplen=400), "exceeds its block"),
    (epb(7, 1, bytes(8)), "undeclared interface 7"),
    (block(6, bytes(8)), "too short"),
    (idb(1, 0, extra_options=option(9, b"\x09")[:4] + b"\x09\x00\x00\x00" +
         struct.pack("<HH", 2, 200)), "runs past its block"),
    (idb(1, 0, extra_options=option(9, b"\x09\x09")), "option 9 has length 2"),
])
def test_pcapng_block_errors_are_skipped(write_capture, bad: bytes, words: str) -> None:
    path = write_capture(GOOD_PCAPNG + bad + epb(0, 99, FRAMES[0]), ".pcapng")
    records = list(read_capture(path))
    assert [r.error is None for r in records] == [True, True, False, True]
    error = records[2].error
    assert isinstance(error, MalformedError) and words in error.reason
    assert error.record == 2 and records[2].offset == PCAPNG_END
    assert bytes(records[3].frame) == FRAMES[0] and records[3].index == 3
    _check_index(path, records)


def test_erf_in_pcap_errors_are_skipped(write_capture) -> None:
    frame = ib_frame()
    bad_rlen = erf_record(T0, 21, frame, rlen=12)
    bad_headers = erf_record(T0, 2, frame, rlen=17)           # shorter than header + pad
    cut_ext = erf_record(T0, 21, frame, ext_headers=3)[:30]    # extension headers cut off
    short = erf_record(T0, 21, frame)[:10]
    data = pcap_header(197)
    for erf in (bad_rlen, bad_headers, cut_ext, short, erf_record(T0, 21, frame)):
        data += pcap_record(T0, erf)
    path = write_capture(data)
    records = list(read_capture(path))
    kinds = [type(r.error).__name__ for r in records[:4]]
    assert kinds == ["MalformedError", "MalformedError", "TruncatedError", "TruncatedError"]
    assert "rlen 12" in records[0].error.reason and "rlen 17" in records[1].error.reason
    assert records[4].error is None and bytes(records[4].frame) == frame
    assert [r.error.offset for r in records[:4]] == [
        records[0].offset + 26, records[1].offset + 26, records[2].offset + 40,
        records[3].offset + 16]
    _check_index(path, records)


@pytest.mark.parametrize(("tail", "kind", "words"), [
    (erf_record(T0, 21, ib_frame(), rlen=8), MalformedError, "rlen 8 < 16"),
    (erf_record(T0, 21, ib_frame())[:-8], TruncatedError, "ERF record truncated"),
    (bytes(9), TruncatedError, "shorter than an ERF header"),
])
def test_native_erf_lying_rlen_ends_iteration(write_capture, tail: bytes, kind: type,
                                              words: str) -> None:
    good = erf_record(T0, 21, ib_frame()) + erf_record(T0 + 1, 21, ib_frame(16))
    path = write_capture(good + tail, ".erf")
    records = list(read_capture(path))
    error = _only_error(records, 2)
    assert type(error) is kind and words in error.reason
    _check_index(path, records)


def test_sll_header_too_short_is_skipped(write_capture) -> None:
    data = pcap_header(113) + pcap_record(T0, bytes(10)) + pcap_record(T0, bytes(16) + b"x")
    path = write_capture(data)
    first, second = read_capture(path)
    assert isinstance(first.error, TruncatedError) and "SLL header truncated" in str(first.error)
    assert second.error is None and bytes(second.frame) == b"x"
    _check_index(path, [first, second])


def test_truncated_gzip_gives_records_then_one_error(write_capture) -> None:
    frames = [ethernet_frame(bytes([k]) * 200) for k in range(50)]
    packed = gzip.compress(pcap_file(frames))
    path = write_capture(packed[: len(packed) * 2 // 3], ".pcap.gz")
    records = list(read_capture(path))
    assert 0 < len(records) < 51
    assert [r.error is None for r in records] == [True] * (len(records) - 1) + [False]
    assert isinstance(records[-1].error, TruncatedError)
    assert "gzip" in str(records[-1].error)
    assert [bytes(r.frame) for r in records[:-1]] == frames[:len(records) - 1]
    index = index_capture(path)
    assert [(e.record, e.offset) for e in index.errors] == [
        (records[-1].index, records[-1].error.offset)]


def test_error_records_keep_everything_before(write_capture) -> None:
    data = GOOD_PCAP + b"\x00" * 7
    mapped = [record_key(r) for r in read_capture(write_capture(data))]
    assert mapped[:2] == [record_key(r) for r in read_capture(write_capture(GOOD_PCAP))]

"""Synthetic captures of every format and link type the readers know."""

from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path

import pytest

from ibwire.pcap import filemap, index_capture, iter_capture_bytes, open_capture, read_capture
from tests.pcap.capture_synth import (
    NS,
    T0,
    assert_index_agrees,
    block,
    end_of_options,
    epb,
    erf_record,
    ethernet_frame,
    ib_frame,
    idb,
    option,
    packet_block,
    pcap_file,
    pcap_header,
    pcap_record,
    pcapng_file,
    record_key,
    shb,
    sll2_header,
    sll_header,
    spb,
)

FRAMES = [ethernet_frame(), ethernet_frame(bytes(40), 0x86DD), ethernet_frame(b"", 0x8915)]


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanoseconds", [False, True])
def test_pcap_byte_orders_and_precisions(write_capture, order: str, nanoseconds: bool) -> None:
    path = write_capture(pcap_file(FRAMES, order=order, nanoseconds=nanoseconds, step_ns=1001))
    with open_capture(path) as reader:
        records = list(reader)
        assert reader.format == "pcap" and not reader.compressed
        assert reader.header is not None and reader.header.nanoseconds == nanoseconds
        assert reader.header.byte_order == order and reader.header.snaplen == 65535
    assert [bytes(r.frame) for r in records] == FRAMES
    assert_index_agrees(path.read_bytes(), records)
    exact = [T0 + k * 1001 for k in range(3)]
    assert [r.timestamp_ns for r in records] == (
        exact if nanoseconds else [t // 1000 * 1000 for t in exact])
    assert {(r.linktype, r.link, r.interface, r.snaplen) for r in records} == {
        (1, "ethernet", 0, 65535)}
    assert [r.offset for r in records] == [24, 24 + 16 + len(FRAMES[0]),
                                           24 + 32 + len(FRAMES[0]) + len(FRAMES[1])]


def test_pcap_old_minor_version_and_no_records(write_capture) -> None:
    data = pcap_header(1, version=(2, 3))
    assert list(read_capture(write_capture(data))) == []


def test_pcap_linktype_high_bits_ignored(write_capture) -> None:
    data = bytearray(pcap_file(FRAMES[:1]))
    data[20:24] = struct.pack("<I", 0x1000_0001)  # FCS length bits set above LINKTYPE_ETHERNET
    assert next(iter(read_capture(write_capture(bytes(data))))).linktype == 1


@pytest.mark.parametrize(("linktype", "link"), [(101, "ip"), (228, "ip"), (229, "ip"),
                                                 (247, "infiniband"), (1, "ethernet"),
                                                 (147, "other")])
def test_direct_link_types(write_capture, linktype: int, link: str) -> None:
    frame = ib_frame() if linktype == 247 else b"\x45" + bytes(19)
    data = pcap_file([frame], linktype)
    record = next(iter(read_capture(write_capture(data))))
    assert (record.link, bytes(record.frame), record.orig_len) == (link, frame, len(frame))
    assert_index_agrees(data, [record])


@pytest.mark.parametrize(("arphrd", "protocol", "link"), [
    (1, 0x0800, "ip"), (1, 0x86DD, "ip"), (1, 0x8915, "grh"), (1, 0x0806, "other"),
    (32, 0x0800, "ip"), (772, 0x86DD, "ip"), (824, 0x0800, "other"), (0xFFFE, 0x0800, "ip")])
@pytest.mark.parametrize("sll2", [False, True])
def test_linux_cooked(write_capture, arphrd: int, protocol: int, link: str, sll2: bool) -> None:
    header = (sll2_header if sll2 else sll_header)(protocol, arphrd)
    payload = bytes(range(30))
    data = pcap_header(276 if sll2 else 113) + pcap_record(T0, header + payload,
                                                           orig_len=len(header) + 100)
    record = next(iter(read_capture(write_capture(data))))
    assert record.error is None and record.link == link
    assert bytes(record.frame) == payload and record.caplen == 30
    assert record.orig_len == 100 and record.record_orig_len == len(header) + 100
    assert bytes(record.record_data) == header + payload
    assert_index_agrees(data, [record])


def _erf_pcap(*records: bytes, caplens: tuple[int | None, ...] = ()) -> bytes:
    out = pcap_header(197)
    for k, erf in enumerate(records):
        caplen = caplens[k] if k < len(caplens) else None
        stored = erf if caplen is None else erf[:caplen]
        out += pcap_record(T0, stored, orig_len=len(erf))
    return out


def test_erf_types_in_pcap(write_capture) -> None:
    frame = ib_frame(16)
    eth = ethernet_frame()
    data = _erf_pcap(erf_record(T0 + 7, 21, frame, flags=5),
                     erf_record(T0 + 8, 2, eth),
                     erf_record(T0 + 9, 21, frame, ext_headers=2),
                     erf_record(T0 + 10, 25, b"\x01\x02\x03\x04"),
                     erf_record(T0 + 11, 22, b"\x45" + bytes(19)),
                     erf_record(T0 + 12, 16, eth, ext_headers=1))
    records = list(read_capture(write_capture(data)))
    assert [(r.link, r.erf_type) for r in records] == [
        ("infiniband", 21), ("ethernet", 2), ("infiniband", 21), ("other", 25), ("ip", 22),
        ("ethernet", 16)]
    assert [bytes(r.frame) for r in records] == [frame, eth, frame, b"\x01\x02\x03\x04",
                                                  b"\x45" + bytes(19), eth]
    assert [r.timestamp_ns for r in records] == [T0 + 7 + k for k in range(6)]
    assert records[0].erf_flags == 5 and records[1].erf_flags == 4
    assert all(r.warning is None and r.error is None for r in records)
    assert_index_agrees(data, records)


def test_erf_lengths(write_capture) -> None:
    frame = ib_frame(40)
    snapped = erf_record(T0, 21, frame[:32], wlen=len(frame))      # DAG snap: rlen < wlen
    unpadded = erf_record(T0, 21, frame)                           # pcap leaves padding out
    cut = erf_record(T0, 21, frame)                                # pcap cuts into the frame
    data = _erf_pcap(snapped, unpadded, cut, caplens=(None, 16 + len(frame), 16 + 20))
    first, second, third = read_capture(write_capture(data))
    assert (bytes(first.frame), first.orig_len, first.truncated) == (frame[:32], len(frame), True)
    assert first.warning is None
    assert (bytes(second.frame), second.warning) == (frame, None)
    assert bytes(third.frame) == frame[:20] and third.truncated
    assert third.warning is not None and "rlen" in str(third.warning)
    assert_index_agrees(data, [first, second, third])


def test_native_erf_file(write_capture) -> None:
    frames = [ib_frame(8 * k) for k in range(1, 5)]
    data = b"".join(erf_record(T0 + k * NS // 10, 21, f) for k, f in enumerate(frames))
    data += erf_record(T0 + NS, 48, bytes(24))  # a pad record: skipped
    data += erf_record(T0 + NS, 2, ethernet_frame())
    path = write_capture(data, ".erf")
    with open_capture(path) as reader:
        records = list(reader)
        assert reader.format == "erf"
    assert [bytes(r.frame) for r in records] == [*frames, ethernet_frame()]
    assert [r.linktype for r in records] == [197] * 5
    assert records[1].timestamp_ns == T0 + NS // 10
    assert_index_agrees(data, records)
    packed = write_capture(gzip.compress(data), ".erf.gz")
    assert [record_key(r) for r in read_capture(packed)] == [record_key(r) for r in records]


def test_pcapng_resolutions_offsets_and_interfaces(write_capture) -> None:
    data = (shb() + idb(1, 1500) + idb(247, 0, tsresol=9) + idb(101, 0, tsresol=3, tsoffset=-2)
            + idb(1, 0, tsresol=0x80 | 20) + idb(1, 0, tsresol=12)
            + block(4, b"\x01\x00\x04\x00\x0a\x00\x00\x01\x00\x00\x00\x00")  # name resolution
            + epb(0, T0 // 1000, FRAMES[0])
            + epb(1, T0, ib_frame())
            + epb(2, 5_000, b"\x45" + bytes(19))
            + epb(3, (3 << 20) + (1 << 19), FRAMES[1])
            + epb(4, 1_234_567_890_123_456, FRAMES[2])
            + block(5, bytes(20))                     # interface statistics
            + block(0x40000BAD, b"custom!")           # custom block
            + packet_block(0, 7 * 10**6, FRAMES[1])
            + spb(FRAMES[0] + bytes(2000), orig_len=3000))
    path = write_capture(data, ".pcapng")
    with open_capture(path) as reader:
        records = list(reader)
        assert reader.format == "pcapng"
        assert [i.linktype for i in reader.interfaces] == [1, 247, 101, 1, 1]
        assert [i.units_per_second for i in reader.interfaces] == [
            10**6, 10**9, 10**3, 2**20, 10**12]
    assert [r.error for r in records] == [None] * 7
    assert [r.link for r in records] == ["ethernet", "infiniband", "ip", "ethernet",
                                         "ethernet", "ethernet", "ethernet"]
    assert [r.interface for r in records] == [0, 1, 2, 3, 4, 0, 0]
    assert [r.timestamp_ns for r in records] == [
        T0 // 1000 * 1000, T0, 5 * NS - 2 * NS, 3 * NS + NS // 2, 1_234_567_890_123, 7 * NS, 0]
    simple = records[-1]
    assert simple.caplen == 1500 and simple.orig_len == 3000 and simple.snaplen == 1500
    assert bytes(simple.frame) == (FRAMES[0] + bytes(2000))[:1500]
    assert_index_agrees(data, records)


def test_pcapng_sections_byte_orders_and_options(write_capture) -> None:
    options = option(1, b"a comment") + option(2988, b"\x01\x02\x03") + end_of_options()
    first = shb("<", options=option(4, b"tool")) + idb(113, 0, extra_options=options) + \
        epb(0, 1, sll_header(0x0800) + b"\x45" + bytes(19))
    second = shb(">") + idb(1, 0, order=">", tsresol=9) + idb(247, 0, order=">") + \
        epb(1, 5, ib_frame(), order=">") + epb(0, 6, FRAMES[0], order=">")
    records = list(read_capture(write_capture(first + second, ".pcapng")))
    assert [(r.linktype, r.link, r.interface) for r in records] == [
        (113, "ip", 0), (247, "infiniband", 1), (1, "ethernet", 0)]
    assert [r.timestamp_ns for r in records] == [1000, 5000, 6]
    assert all(r.error is None and r.warning is None for r in records)
    assert_index_agrees(first + second, records)


@pytest.mark.parametrize("chunk_size", [1, 3, 17, 4096])
def test_stream_reading_in_small_chunks_matches_map(write_capture, chunk_size: int) -> None:
    samples = [pcap_file(FRAMES, order=">", nanoseconds=True),
               pcapng_file(FRAMES) + pcapng_file(FRAMES, order=">"),
               _erf_pcap(erf_record(T0, 21, ib_frame()), erf_record(T0, 2, FRAMES[0])),
               b"".join(erf_record(T0 + k, 21, ib_frame(8 * k)) for k in range(3)),
               pcap_file(FRAMES)[:-5],                                  # ends in an error
               pcapng_file(FRAMES)[:-3]]
    for data in samples:
        path = write_capture(data)
        mapped = [record_key(r) for r in read_capture(path)]
        with open(path, "rb") as handle, open_capture(handle, chunk_size=chunk_size) as reader:
            streamed = [record_key(r) for r in reader]
        assert streamed == mapped
        assert [record_key(r) for r in iter_capture_bytes(data)] == mapped


def test_stdin_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    data = pcapng_file(FRAMES)
    for payload in (data, gzip.compress(data)):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(payload)))
        with open_capture("-") as reader:
            assert reader.name == "<stdin>"
            records = list(reader)
        assert [r.frame for r in records] == FRAMES  # streams give bytes


def test_gzip_file_and_frames_are_bytes(write_capture) -> None:
    path = write_capture(gzip.compress(pcap_file(FRAMES, nanoseconds=True)), ".pcap.gz")
    with open_capture(path) as reader:
        records = list(reader)
        assert reader.compressed and reader.format == "pcap"
    assert [bytes(r.frame) for r in records] == FRAMES
    assert all(isinstance(r.frame, bytes) for r in records)


def test_mapped_frames_outlive_close(write_capture) -> None:
    path: Path = write_capture(pcap_file(FRAMES))
    with open_capture(path) as reader:
        records = list(reader)
        again = list(reader)  # a mapped file can be iterated again
    assert [record_key(r) for r in again] == [record_key(r) for r in records]
    assert [bytes(r.frame) for r in records] == FRAMES
    # views into the map; the twin (IBWIRE_NO_EXTENSIONS=1) reads the file: bytes
    assert isinstance(records[0].frame, memoryview if filemap.maps() else bytes)


def test_index_of_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    data = pcap_file(FRAMES, nanoseconds=True)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(data))))
    index = index_capture("-")
    assert bytes(index.buffer[:len(data)]) == data
    assert_index_agrees(data, list(iter_capture_bytes(data)))
    assert index.lengths.tolist() == [len(f) for f in FRAMES]


def test_corrupt_gzip_gives_records_then_one_error(write_capture) -> None:
    frames = [ethernet_frame(bytes([k]) * 300) for k in range(40)]
    packed = bytearray(gzip.compress(pcap_file(frames), compresslevel=1))
    packed[-6] ^= 0xFF  # inside the CRC32 / length trailer
    records = list(read_capture(write_capture(bytes(packed), ".pcap.gz")))
    assert [bytes(r.frame) for r in records[:-1]] == frames
    assert records[-1].error is not None and "gzip" in str(records[-1].error)


def test_every_link_header_kind_has_a_locator_and_a_length():
    """``linktypes`` answers from the table alone; ``locators`` holds the code: they must
    name the same header kinds, and the table must use no other."""
    from ibwire.pcap import linktypes, locators
    from ibwire.tables import link_types

    assert set(linktypes.HEADER_KINDS) == set(locators.LINK_HEADER_LEN)
    assert set(linktypes.HEADER_KINDS) == set(locators._HEADER_LOCATORS)
    starts = {starts for (family, _v), (_n, starts) in link_types().items() if family == "pcap"}
    assert set(linktypes.HEADER_KINDS) <= starts

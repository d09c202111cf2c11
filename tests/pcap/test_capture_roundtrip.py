"""Writers and conversions: read -> write -> read gives the same records; outputs are atomic."""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import pytest

from ibwire.errors import BuildError, CaptureError, TruncatedError
from ibwire.pcap import (
    PcapngWriter,
    PcapWriter,
    erf_to_infiniband,
    infiniband_to_erf,
    open_capture,
    pcapng_to_pcap,
    read_capture,
)
from tests.corpus import ERF_CAPTURE, captures, needs_shared
from tests.pcap.capture_synth import (
    NS,
    T0,
    epb,
    erf_record,
    ethernet_frame,
    ib_frame,
    idb,
    pcap_file,
    pcap_header,
    pcap_record,
    record_key,
    shb,
    sll_header,
    spb,
)


def _keys(path: Path | str) -> list[tuple]:
    return [record_key(r) for r in read_capture(path)]


def _copy_as_pcap(source: Path, target: Path, nanoseconds: bool) -> None:
    with open_capture(source) as reader:
        records = list(reader)
    with PcapWriter(target, records[0].linktype, nanoseconds=nanoseconds) as writer:
        for record in records:
            writer.write_record(record)


def _copy_as_pcapng(source: Path, target: Path, nanoseconds: bool = True) -> None:
    with PcapngWriter(target, nanoseconds=nanoseconds) as writer:
        for record in read_capture(source):
            writer.write_record(record)


def test_real_captures_round_trip(shared_capture: tuple[Path, dict[str, str]],
                                  tmp_path: Path) -> None:
    path, _row = shared_capture
    original = _keys(path)
    as_pcap, as_pcapng = tmp_path / "copy.pcap", tmp_path / "copy.pcapng"
    _copy_as_pcap(path, as_pcap, nanoseconds=True)  # dumpcap's pcapng have ns resolution
    _copy_as_pcapng(path, as_pcapng, nanoseconds=True)
    assert _keys(as_pcap) == original
    assert _keys(as_pcapng) == original


def _nanosecond_sample() -> bytes:
    frames = [ethernet_frame(bytes([k]) * k) for k in range(1, 6)]
    return pcap_file(frames, nanoseconds=True, step_ns=333)


def test_nanosecond_round_trip(write_capture, tmp_path: Path) -> None:
    source = write_capture(_nanosecond_sample())
    original = _keys(source)
    assert len({key[1] % 1000 for key in original}) > 1  # sub-microsecond parts present
    _copy_as_pcap(source, tmp_path / "ns.pcap", nanoseconds=True)
    _copy_as_pcapng(source, tmp_path / "ns.pcapng", nanoseconds=True)
    assert _keys(tmp_path / "ns.pcap") == original
    assert _keys(tmp_path / "ns.pcapng") == original
    _copy_as_pcap(source, tmp_path / "us.pcap", nanoseconds=False)
    assert [k[1] for k in _keys(tmp_path / "us.pcap")] == [k[1] // 1000 * 1000 for k in original]


def test_pcapng_writer_mixed_link_types(write_capture, tmp_path: Path) -> None:
    data = (shb() + idb(1, 1500) + idb(113, 0, tsresol=9) + idb(247, 0, tsresol=0x80 | 30)
            + epb(0, T0 // 1000, ethernet_frame())
            + epb(1, T0 + 1, sll_header(0x8915) + bytes(40))
            + epb(2, (T0 // NS << 30) + 5, ib_frame())
            + spb(ethernet_frame(bytes(10))))
    source = write_capture(data, ".pcapng")
    original = _keys(source)
    target = tmp_path / "mixed.pcapng"
    _copy_as_pcapng(source, target)
    assert _keys(target) == original
    with open_capture(target) as reader:
        list(reader)
        assert [(i.linktype, i.snaplen) for i in reader.interfaces] == [(1, 1500), (113, 0),
                                                                         (247, 0)]
    big = tmp_path / "big-endian.pcapng"
    with PcapngWriter(big, big_endian=True) as writer:
        for record in read_capture(source):
            writer.write_record(record)
    assert big.read_bytes()[8:12] == b"\x1a\x2b\x3c\x4d"
    assert _keys(big) == original


def _ib_capture(nanoseconds: bool = True) -> tuple[bytes, list[bytes]]:
    frames = [ib_frame(4 * k) for k in range(1, 9)]
    out = pcap_header(247, nanoseconds=nanoseconds)
    for k, frame in enumerate(frames):
        cut = frame[:20] if k == 3 else frame  # one truncated by snaplen
        out += pcap_record(T0 + k * 1_001, cut, orig_len=len(frame), nanoseconds=nanoseconds)
    return out, frames


def test_infiniband_erf_round_trip(write_capture, tmp_path: Path) -> None:
    data, _frames = _ib_capture()
    source = write_capture(data)
    original = list(read_capture(source))
    as_erf, back = tmp_path / "erf.pcap", tmp_path / "back.pcap"
    report = infiniband_to_erf(source, as_erf)
    assert report.records_written == 8 and not report.errors and not report.records_skipped
    wrapped = list(read_capture(as_erf))
    assert [(r.linktype, r.link, r.erf_type) for r in wrapped] == [(197, "infiniband", 21)] * 8
    for old, new in zip(original, wrapped, strict=True):
        assert bytes(new.frame) == bytes(old.frame)
        assert (new.timestamp_ns, new.orig_len, new.caplen) == (
            old.timestamp_ns, old.orig_len, old.caplen)
        rlen, wlen = struct.unpack_from(">H2xH", bytes(new.record_data), 10)
        assert rlen == len(new.record_data) and wlen == old.orig_len
        assert rlen % 8 == 0 or old.truncated
    assert erf_to_infiniband(as_erf, back).records_written == 8
    assert _keys(back) == _keys(source)


@needs_shared
def test_real_erf_to_infiniband_and_back(tmp_path: Path) -> None:
    original = list(read_capture(ERF_CAPTURE))
    ib, erf = tmp_path / "ib.pcap", tmp_path / "erf.pcap"
    erf_to_infiniband(ERF_CAPTURE, ib)
    infiniband_to_erf(ib, erf)
    for path in (ib, erf):
        again = list(read_capture(path))
        assert [bytes(r.frame) for r in again] == [bytes(r.frame) for r in original]
        assert [r.timestamp_ns for r in again] == [r.timestamp_ns for r in original]
        assert {r.link for r in again} == {"infiniband"}
    assert {r.linktype for r in read_capture(ib)} == {247}


def test_conversion_refuses_other_link_types(write_capture, tmp_path: Path) -> None:
    data = pcap_file([ethernet_frame()])
    source = write_capture(data)
    target = tmp_path / "out.pcap"
    target.write_bytes(b"keep me")
    # records numbered from 1 in messages, as show and check number them
    with pytest.raises(CaptureError, match="record 1 has link type 1, not LINKTYPE_INFINIBAND"):
        infiniband_to_erf(source, target)
    with pytest.raises(CaptureError, match="record 1 is not an ERF InfiniBand record"):
        erf_to_infiniband(source, target)
    assert target.read_bytes() == b"keep me"
    assert infiniband_to_erf(source, target, others="skip").records_skipped == 1
    assert list(read_capture(target)) == []
    with pytest.raises(CaptureError, match="overwrite the input"):
        infiniband_to_erf(source, source)
    assert source.read_bytes() == data


def test_pcapng_to_pcap(write_capture, tmp_path: Path) -> None:
    frames = [ethernet_frame(bytes(k)) for k in range(4)]
    single = shb() + idb(1, 9000, tsresol=9) + idb(1, 0) + b"".join(
        epb(k % 2, T0 + k if k % 2 == 0 else T0 // 1000 + k, f) for k, f in enumerate(frames))
    source = write_capture(single, ".pcapng")
    target = tmp_path / "single.pcap"
    report = pcapng_to_pcap(source, target)
    assert report.records_written == 4
    with open_capture(target) as reader:
        assert reader.header is not None and reader.header.snaplen == 9000
        assert reader.header.nanoseconds
        assert [record_key(r)[1:] for r in reader] == [k[1:] for k in _keys(source)]

    mixed = single + epb(0, T0, ethernet_frame())
    mixed = shb() + idb(1, 0) + idb(113, 0) + epb(0, 1, frames[0]) + \
        epb(1, 2, sll_header(0x0800) + bytes(20)) + epb(0, 3, frames[1])
    source = write_capture(mixed, ".pcapng")
    target.write_bytes(b"previous")
    with pytest.raises(CaptureError, match="different link types"):
        pcapng_to_pcap(source, target)
    assert target.read_bytes() == b"previous"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    report = pcapng_to_pcap(source, target, linktype=113)
    assert (report.records_written, report.records_skipped) == (1, 2)
    assert [r.link for r in read_capture(target)] == ["ip"]


@needs_shared
def test_pcapng_to_pcap_real(tmp_path: Path) -> None:
    sources = captures((".pcapng",))
    assert sources
    for source in sources:
        target = tmp_path / (source.stem + ".pcap")
        pcapng_to_pcap(source, target)
        assert [k[1:] for k in _keys(target)] == [k[1:] for k in _keys(source)]


def test_conversion_from_gzip_and_errors_counted(write_capture, tmp_path: Path) -> None:
    data, _frames = _ib_capture(nanoseconds=False)
    source = write_capture(gzip.compress(data + b"\x01\x02\x03"), ".pcap.gz")
    report = infiniband_to_erf(source, tmp_path / "erf.pcap")
    assert report.records_written == 8 and len(report.errors) == 1
    assert "record 9" in str(report.errors[0])   # the 9th, as show and check number it
    with pytest.raises(TruncatedError, match=r"truncated record header.*record 9"):
        infiniband_to_erf(write_capture(data + b"\x01\x02\x03"), tmp_path / "x.pcap",
                          strict=True)
    assert not (tmp_path / "x.pcap").exists()


def test_writer_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "atomic.pcap"
    target.write_bytes(b"old content")
    os.chmod(target, 0o640)
    with pytest.raises(RuntimeError), PcapWriter(target, 1) as writer:
        writer.write(ethernet_frame(), T0)
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.pcap"]
    with PcapWriter(target, 1) as writer:
        writer.write(ethernet_frame(), T0)
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert [bytes(r.frame) for r in read_capture(target)] == [ethernet_frame()]
    writer = PcapngWriter(tmp_path / "dropped.pcapng")
    writer.write(ethernet_frame(), T0, 1)
    writer.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.pcap"]


def test_writer_rejects_unwritable_values(tmp_path: Path) -> None:
    with PcapWriter(tmp_path / "w.pcap", 1) as writer:
        with pytest.raises(BuildError):
            writer.write(b"abc", -1)
        with pytest.raises(BuildError):
            writer.write(b"abc", T0, orig_len=2)
        with pytest.raises(BuildError):
            writer.write(b"abc", (1 << 32) * NS)
        writer.write(bytes(300_000), T0)
    with open_capture(tmp_path / "w.pcap") as reader:
        assert reader.header is not None and reader.header.snaplen == 300_000
        assert [r.warning for r in reader] == [None]
    native = tmp_path / "native.erf"
    native.write_bytes(erf_record(T0, 21, ib_frame()) + erf_record(T0 + 1, 2, ethernet_frame()))
    with PcapWriter(tmp_path / "erf.pcap", 197) as writer:
        for record in read_capture(native):
            writer.write_record(record)
    assert _keys(tmp_path / "erf.pcap") == _keys(native)
    with pytest.raises(BuildError, match="link type"), PcapWriter(tmp_path / "x.pcap", 1) as w:
        w.write_record(next(iter(read_capture(native))))


@pytest.mark.parametrize("setting,synced", [(None, 0), ("0", 0), ("1", 2)])
def test_outputs_are_fsynced_only_when_asked(tmp_path, monkeypatch, setting, synced):
    """Outputs are atomic either way; IBWIRE_FSYNC=1 also forces the file and then its
    directory entry to the disk (two fsyncs), as tcpdump and tcprewrite by default do not."""
    import ibwire.pcap.writer as writer_module
    from ibwire.pcap.writer import FSYNC_ENV, PcapWriter

    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(writer_module.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    if setting is None:
        monkeypatch.delenv(FSYNC_ENV, raising=False)
    else:
        monkeypatch.setenv(FSYNC_ENV, setting)
    out = tmp_path / "out.pcap"
    with PcapWriter(out, 1) as w:
        w.write(b"\x00" * 60, 1_000)
        assert not out.exists()
    assert len(calls) == synced
    assert [bytes(r.frame) for r in open_capture(out)] == [b"\x00" * 60]

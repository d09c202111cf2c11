"""The counting scan of ``ibwire check`` (``ibwire.scan.tally``): both twins of ``check_pcap``
and ``pcap_sync`` agree, and a tally, split between threads or not, whatever the window and
whatever boundary is guessed, gives the counts, flagged records and ending error that the full
scanner (``scan_capture``) gives, and the frames the reader reads. pcapng files:
``test_tally_pcapng.py``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.errors import IbwireError
from ibwire.pcap import LINK_CODES, read_capture
from ibwire.scan import _layout, declared, scan_capture, tally
from ibwire.scan import _tally_python as twin
from ibwire.strategies import packets, placed_mutations
from tests import corpus
from tests.pcap.capture_synth import (
    T0,
    pcap_file,
    pcap_header,
    pcap_record,
    sll2_header,
    sll_header,
    warning_key,
)
from tests.scan.conftest import tally_c_engine as c_engine

ROOT = Path(__file__).resolve().parents[2]
DIRECT = {1, 101, 228, 229, 247}  # link types whose records are the frames themselves
COOKED = {113, 276}  # Linux SLL and SLL2: the cooked header is read in C too


def error_key(error: IbwireError | None) -> tuple | None:
    return None if error is None else (type(error), error.offset, error.reason)


Flags = list[tuple[int, tuple | None, tuple | None]]
"""Records to look at again: (record, its capture error, its capture warning)."""


def reference(path: Path) -> tuple[dict[str, int], Flags]:
    """What the full scanner says: counts, and the records to look at again (failed, a
    capture warning, or a record that could not be read)."""
    counts = dict.fromkeys(twin.TALLY, 0)
    flagged: Flags = []
    for batch in scan_capture(path, fields=()):
        c = batch.columns
        failed, cut, cut_header = batch.failed(), batch.cut(), batch.cut_header()
        for row in range(len(batch)):
            counts["records"] += 1
            counts["ib"] += int(batch.is_ib()[row])
            counts["other"] += int(c["error"][row] == 1)
            counts["failed"] += int(failed[row])
            counts["icrc_bad"] += int(c["icrc_ok"][row] == 0)
            counts["vcrc_bad"] += int(c["vcrc_ok"][row] == 0)
            counts["errors"] += int(c["error"][row] > 1 and not cut_header[row])
            counts["cut"] += int(cut[row])
            if cut[row]:  # a snap length: the most frame bytes one of them kept
                counts["cut_kept"] = max(counts["cut_kept"], int(c["frame.len"][row]))
            if failed[row] or row in batch.warnings:
                flagged.append((int(c["record"][row]), error_key(batch.errors.get(row)),
                                warning_key(batch.warnings.get(row))))
    return counts, flagged


def tallied(path: Path, threads: int, window: int) -> tuple[dict[str, int], Flags]:
    """What a tally says, in the same terms; each flagged record is the reader's record."""
    found = tally.open_tally(path, threads=threads, window=window)
    assert found is not None, path
    records = list(read_capture(path))
    counts = dict.fromkeys(twin.TALLY, 0)
    flagged: Flags = []
    with found:
        for window_ in found.windows():
            for name, value in zip(found.names, window_.counts, strict=True):
                counts[name] = max(counts[name], value) if name == "cut_kept" else \
                    counts[name] + value
            for f in window_.flagged:
                flagged.append((f.record, error_key(f.error), warning_key(f.warning)))
                record = records[f.record]
                assert error_key(f.error) == error_key(record.error)
                if f.error is None:  # the bytes, lengths, time and link are the record's
                    assert (f.frame, f.orig_len, f.link, f.linktype) == (
                        bytes(record.frame), record.orig_len, LINK_CODES[record.link],
                        record.linktype)
                    assert f.timestamp_ns == min(max(record.timestamp_ns, -(1 << 63)),
                                                 (1 << 63) - 1)
                    assert bytes(path.read_bytes()[f.offset:f.offset + len(f.frame)]) == f.frame
            if window_.error is not None:  # the walk ends on it: counted apart
                flagged.append((window_.error_record, error_key(window_.error), None))
                assert error_key(window_.error) == error_key(records[window_.error_record].error)
                for name in ("records", "failed", "errors"):
                    counts[name] += 1
    return counts, flagged


LINKS = {"ethernet": 1, "infiniband": 247, "ip": 101, "sll": 113, "sll2": 276}


def cooked(draw: st.DrawFn, frame: bytes, link: str, kind: str) -> bytes:
    """An Ethernet, IP or GRH-first frame behind a Linux SLL or SLL2 header, as ``tcpdump -i
    any`` writes it (ARPHRD_ETHER mostly; others, some not in the table, too)."""
    if link == "ethernet":
        protocol, frame = int.from_bytes(frame[12:14], "big"), frame[14:]
    elif link == "ip":
        protocol = 0x0800 if frame[0] >> 4 == 4 else 0x86DD
    else:
        protocol = 0x8915
    arphrd = draw(st.sampled_from([1, 1, 1, 772, 32, 24]))
    return (sll_header if kind == "sll" else sll2_header)(protocol, arphrd) + frame


def broken(draw: st.DrawFn, frame: bytes) -> bytes:
    """The frame as it is, or with a broken CRC, cut, or with any byte changed."""
    out = bytearray(frame)
    kind = draw(st.sampled_from(["good", "good", "icrc", "cut", "byte"]))
    if kind == "icrc" and out:
        out[-1] ^= 0xFF
    elif kind == "cut" and out:
        del out[draw(st.integers(0, len(out) - 1)):]
    elif kind == "byte" and out:
        out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    return bytes(out)


def frame_of(draw: st.DrawFn, link: str) -> bytes:
    """A RoCE or native IB frame for records of ``link`` (cooked for SLL/SLL2), maybe
    broken (also where its CRCs stay placed)."""
    links = ("ethernet", "ip", "grh") if link in ("sll", "sll2") else (link,)
    g = draw(packets(max_payload=96).filter(lambda g: g.link in links))
    placed = draw(st.integers(0, 5)) == 0  # broken headers, CRCs placed, resealed or not
    frame = draw(placed_mutations(g)).frame if placed else g.frame
    if link in ("sll", "sll2"):
        frame = cooked(draw, frame, g.link, link)
    return frame if placed else broken(draw, frame)


@st.composite
def captures(draw: st.DrawFn) -> bytes:
    """A classic pcap file (either byte order, us or ns) of such frames; some records with a
    caplen over the snaplen or over orig_len; sometimes cut at the end (in its records)."""
    order = draw(st.sampled_from("<>"))
    nanoseconds = draw(st.booleans())
    snaplen = draw(st.sampled_from([0, 65535, 80]))
    link = draw(st.sampled_from(sorted(LINKS)))
    data = bytearray(pcap_header(LINKS[link], order=order, nanoseconds=nanoseconds,
                                 snaplen=snaplen))
    header = len(data)
    for i in range(draw(st.integers(1, 12))):
        frame = frame_of(draw, link)
        orig = max(0, len(frame) - draw(st.sampled_from([0, 0, 0, 1])))
        data += pcap_record(T0 + i * 1000, frame, orig_len=orig, order=order,
                            nanoseconds=nanoseconds)
    tail = draw(st.sampled_from(["none", "none", "cut", "absurd"]))
    if tail == "cut":  # into the records, not the file header (a tally needs a whole one)
        del data[max(header, len(data) - draw(st.integers(1, 20))):]
    elif tail == "absurd":
        data += struct.pack(order + "IIII", 1, 0, 0x7FFFFFFF, 0x7FFFFFFF)
    return bytes(data)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck),
                    database=None)


def test_the_layout_module_is_what_program_derives():
    """``_layout.py`` (numpy- and Construct-free) is current: run tools/gen_scan_layout.py."""
    derived = declared.layout()
    assert {name: getattr(_layout, name) for name in derived} == derived
    assert (ROOT / "src/ibwire/scan/_layout.py").read_text() == declared.layout_source()


def test_the_twins_name_the_counts_alike():
    assert c_engine().TALLY == twin.TALLY


@SETTINGS
@given(data=captures(), cap=st.integers(1, 5), start=st.integers(0, 3))
def test_check_pcap_twins_agree(data, cap, start):
    engine = c_engine()
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    swapped = order != "<"
    snaplen = struct.unpack_from(order + "I", data, 16)[0]
    pos = 24
    for _ in range(start):  # start at a later record too
        if len(data) - pos < 16:
            break
        pos += 16 + struct.unpack_from(order + "I", data, pos + 8)[0]
    pos = min(pos, len(data))
    for link, header in ((0, 0), (255, 0), (2, 0), (0, 1), (0, 2)):  # frames, SLL, SLL2
        assert engine.check_pcap(data, pos, len(data), swapped, 1 << 18, snaplen, link, header,
                                 cap) == \
            twin.check_pcap(data, pos, len(data), swapped, 1 << 18, snaplen, link, header, cap)


@SETTINGS
@given(data=st.one_of(captures(), st.binary(max_size=400)), at=st.integers(0, 400),
       depth=st.integers(1, 4), search=st.integers(0, 400), swapped=st.booleans())
def test_pcap_sync_twins_agree(data, at, depth, search, swapped):
    at = min(at, len(data))
    for limit in (1_000_000, 1_000_000_000):
        assert c_engine().pcap_sync(data, at, len(data), swapped, 1 << 18, limit, depth,
                                    search) == \
            twin.pcap_sync(data, at, len(data), swapped, 1 << 18, limit, depth, search)


def test_pcap_sync_finds_a_record_start():
    frames = [bytes((k * 7 + 1) % 256 for k in range(60 + i)) for i in range(20)]
    data = pcap_file(frames)
    starts, pos = [], 24
    for f in frames:
        starts.append(pos)
        pos += 16 + len(f)
    for engine in (twin, c_engine()):
        for at in range(24, starts[12]):
            found = engine.pcap_sync(data, at, len(data), False, 1 << 18, 1_000_000, 8, 4096)
            assert found == min(s for s in starts if s >= at), at


def test_argument_errors():
    for engine in (twin, c_engine()):
        with pytest.raises(ValueError):
            engine.check_pcap(b"x" * 10, 5, 11, False, 1 << 18, 0, 0, 0, 1)
        with pytest.raises(ValueError):
            engine.check_pcap(b"x" * 10, 0, 10, False, 1 << 18, 0, 0, 3, 1)
        with pytest.raises(ValueError):
            engine.check_pcapng(b"x" * 10, 5, 11, False, 1 << 18, [], 1)
        with pytest.raises(ValueError):
            engine.check_pcapng(b"x" * 10, 0, 10, False, 1 << 18, [(0, 0, 3)], 1)
        with pytest.raises(ValueError):
            engine.pcapng_sync(b"x" * 10, 11, 10, False, 1 << 18, 1, 1)
        with pytest.raises(ValueError):
            engine.pcap_sync(b"x" * 10, 11, 10, False, 1 << 18, 10**6, 1, 1)


@SETTINGS
@given(data=captures(), window=st.sampled_from([64, 300, 4096, 1 << 20]),
       threads=st.sampled_from([1, 2]))
def test_a_tally_is_what_the_scanner_says(engine, tmp_path_factory, data, window, threads):
    path = tmp_path_factory.mktemp("tally") / "capture.pcap"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tally, "SPLIT_AT_LEAST", 0)  # split even the smallest window
        patch.setattr(tally, "SYNC_DEPTH", 2)
        assert tallied(path, threads, window) == reference(path)


@pytest.mark.parametrize("guess", ["after", "inside", "before"])
def test_a_wrong_guess_changes_nothing(engine, tmp_path, monkeypatch, guess):
    """The second thread's start is only used when the first thread's walk ends on it."""
    frames = [bytes(range(256))[:60 + 7 * i] for i in range(300)]
    path = tmp_path / "capture.pcap"
    path.write_bytes(pcap_file(frames))
    truth = reference(path)
    real = engine.pcap_sync
    guesses = []

    def wrong(buf, start, end, *args):
        found = real(buf, start, end, *args)
        moved = {"after": found + 1, "inside": found + 20, "before": found - 1}[guess]
        guesses.append(moved)
        return moved if found >= 0 else found

    monkeypatch.setattr(engine, "pcap_sync", wrong)
    monkeypatch.setattr(tally, "SPLIT_AT_LEAST", 0)
    assert tallied(path, 2, 4096) == truth
    assert len(guesses) > 3


@pytest.mark.parametrize("lure", ["records", "zeros"])
def test_a_payload_that_looks_like_records_is_not_trusted(engine, tmp_path, monkeypatch, lure):
    """Frames that carry a pcap record stream of their own (or zero bytes) lure the guess into
    the middle of a frame: the walk of the first half shows it wrong."""
    inner = b"".join(pcap_record(T0, bytes(40)) for _ in range(30)) if lure == "records" \
        else bytes(1500)
    frames = [bytes(14) + inner for _ in range(40)]
    path = tmp_path / "capture.pcap"
    path.write_bytes(pcap_file(frames))
    monkeypatch.setattr(tally, "SPLIT_AT_LEAST", 0)
    assert tallied(path, 2, 1 << 20) == reference(path)


def _linktype(path: Path) -> int:
    head = path.read_bytes()[:24]
    order = "<" if head[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    return struct.unpack_from(order + "I", head, 20)[0] & 0xFFFF


SHARED_PCAPS = corpus.captures((".pcap",))


@corpus.needs_shared
def test_the_counting_scan_takes_the_shared_captures_it_reads():
    """Those whose records are frames or cooked; the others (ERF here) are left to the
    scanner."""
    for path in SHARED_PCAPS:
        found = tally.open_tally(path)
        assert (found is not None) == (_linktype(path) in DIRECT | COOKED), path
        if found is not None:
            found.feed.close()


@pytest.mark.parametrize("path", corpus.params([p for p in SHARED_PCAPS
                                                if _linktype(p) in DIRECT | COOKED]),
                         ids=lambda p: p.name if p else "none")
def test_shared_captures(engine, path, monkeypatch):
    monkeypatch.setattr(tally, "SPLIT_AT_LEAST", 0)
    for window in (4096, 1 << 20):
        assert tallied(path, 2, window) == reference(path)


def test_samples(engine):
    for name in ("sample-rocev2.pcap", "sample-ib.pcap", "sample-corrupt.pcap"):
        path = ROOT / "captures" / name
        assert tallied(path, 2, 1 << 20) == reference(path)


def test_what_the_counting_scan_leaves_to_the_scanner(tmp_path):
    pcap = pcap_file([bytes(60)])
    cases = {
        "capture.pcapng": bytes.fromhex("0a0d0d0a") + bytes(24),  # a bad section header
        "capture.pcap.gz": __import__("gzip").compress(pcap),
        "erf.pcap": pcap_file([bytes(60)], linktype=197),
        "garbage": b"not a capture at all",
        "header.pcap": pcap[:20],
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert tally.open_tally(tmp_path / name) is None, name
    assert tally.open_tally("-") is None  # standard input is left to the scanner, unread
    with open(tmp_path / "erf.pcap", "rb") as handle:
        assert tally.open_tally(handle) is None
        assert handle.tell() == 0
    with pytest.raises(Exception, match="empty"):
        (tmp_path / "empty.pcap").write_bytes(b"")
        tally.open_tally(tmp_path / "empty.pcap")

"""The counting scan of ``ibwire check`` (``ibwire.scan.tally``): both twins of ``check_pcap``
and ``pcap_sync`` agree, and a tally, split between threads or not, whatever the window and
whatever boundary is guessed, gives the counts, flagged records and ending error that the full
scanner (``scan_capture``) gives."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.scan import _layout, program, scan_capture, tally
from ibwire.scan import _tally_python as twin
from ibwire.strategies import packets
from tests.crc.conftest import built_or_skip
from tests.pcap.capture_synth import SHARED_CAPTURES, T0, pcap_file, pcap_header, pcap_record

try:
    from ibwire.scan import _tally
except ImportError:
    _tally = None

ROOT = Path(__file__).resolve().parents[2]
DIRECT = {1, 101, 228, 229, 247}  # link types whose records are the frames themselves


def c_engine() -> ModuleType:
    return built_or_skip(_tally, "ibwire.scan._tally")


@pytest.fixture(params=["python", "c"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Tallies run on this twin."""
    chosen = twin if request.param == "python" else c_engine()
    monkeypatch.setattr(tally, "engine", lambda: (chosen, request.param))
    return chosen


def reference(path: Path) -> tuple[dict[str, int], list[int], tuple | None]:
    """What the full scanner says: counts, the records to look at again (failed or with a
    capture warning), and the ending error (record, type, offset, reason)."""
    counts = dict.fromkeys(twin.TALLY, 0)
    flagged: list[int] = []
    ending = None
    for batch in scan_capture(path, fields=()):
        c = batch.columns
        failed = batch.failed()
        for row in range(len(batch)):
            record = int(c["record"][row])
            if c["error"][row] == program.CAPTURE_ERROR:
                error = batch.error(row)
                ending = (record, type(error), error.offset, error.reason)
            else:
                counts["icrc_bad"] += int(c["icrc_ok"][row] == 0)
                counts["vcrc_bad"] += int(c["vcrc_ok"][row] == 0)
                if failed[row] or row in batch.warnings:
                    flagged.append(record)
            counts["records"] += 1
            counts["ib"] += int(batch.is_ib()[row])
            counts["other"] += int(c["error"][row] == 1)
            counts["failed"] += int(failed[row])
            counts["errors"] += int(c["error"][row] > 1)
    if ending is not None:  # the tally counts its ending error apart from its windows
        counts["records"] -= 1
        counts["failed"] -= 1
        counts["errors"] -= 1
    return counts, flagged, ending


def tallied(path: Path, threads: int, window: int) -> tuple[dict[str, int], list[int],
                                                          tuple | None]:
    found = tally.open_tally(path, threads=threads, window=window)
    assert found is not None, path
    counts = dict.fromkeys(twin.TALLY, 0)
    flagged: list[int] = []
    ending = None
    with found:
        for window_ in found.windows():
            for name, value in zip(found.names, window_.counts, strict=True):
                counts[name] += value
            flagged += [f.record for f in window_.flagged]
            data = path.read_bytes()
            order = found.header.byte_order
            for f in window_.flagged:  # the bytes, lengths and time are the record's
                seconds, fraction, caplen, orig = struct.unpack_from(order + "IIII", data,
                                                                     f.offset - 16)
                assert (f.frame, f.orig_len) == (data[f.offset:f.offset + caplen], orig)
                assert f.timestamp_ns == seconds * 10**9 + fraction * found.fraction_ns
            if window_.error is not None:
                e = window_.error
                ending = (window_.error_record, type(e), e.offset, e.reason)
    return counts, flagged, ending


LINKS = {"ethernet": 1, "infiniband": 247, "ip": 101}


def _frames(draw: st.DrawFn, link: str) -> list[bytes]:
    """RoCE or native IB frames, some with a broken CRC, cut, or with any byte changed."""
    frames = draw(st.lists(packets(max_payload=96).filter(lambda g: g.link == link),
                           min_size=1, max_size=12))
    out = []
    for g in frames:
        frame = bytearray(g.frame)
        kind = draw(st.sampled_from(["good", "good", "icrc", "cut", "byte"]))
        if kind == "icrc":
            frame[-1] ^= 0xFF
        elif kind == "cut":
            del frame[draw(st.integers(0, len(frame) - 1)):]
        elif kind == "byte":
            frame[draw(st.integers(0, len(frame) - 1))] = draw(st.integers(0, 255))
        out.append(bytes(frame))
    return out


@st.composite
def captures(draw: st.DrawFn) -> bytes:
    """A classic pcap file (either byte order, us or ns) of such frames; some records with a
    caplen over the snaplen or over orig_len; sometimes cut at the end."""
    order = draw(st.sampled_from("<>"))
    nanoseconds = draw(st.booleans())
    snaplen = draw(st.sampled_from([0, 65535, 80]))
    link = draw(st.sampled_from(sorted(LINKS)))
    data = bytearray(pcap_header(LINKS[link], order=order, nanoseconds=nanoseconds,
                                 snaplen=snaplen))
    for i, frame in enumerate(_frames(draw, link)):
        orig = max(0, len(frame) - draw(st.sampled_from([0, 0, 0, 1])))
        data += pcap_record(T0 + i * 1000, frame, orig_len=orig, order=order,
                            nanoseconds=nanoseconds)
    tail = draw(st.sampled_from(["none", "none", "cut", "absurd"]))
    if tail == "cut":
        del data[len(data) - draw(st.integers(1, 20)):]
    elif tail == "absurd":
        data += struct.pack(order + "IIII", 1, 0, 0x7FFFFFFF, 0x7FFFFFFF)
    return bytes(data)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck),
                    database=None)


def test_the_layout_module_is_what_program_derives():
    """``_layout.py`` (numpy- and Construct-free) is current: run tools/gen_scan_layout.py."""
    assert {name: getattr(_layout, name) for name in program.layout()} == program.layout()
    assert (ROOT / "src/ibwire/scan/_layout.py").read_text() == program.layout_source()


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
    for link in (0, 255):
        assert engine.check_pcap(data, pos, len(data), swapped, 1 << 18, snaplen, link, cap) \
            == twin.check_pcap(data, pos, len(data), swapped, 1 << 18, snaplen, link, cap)


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
            engine.check_pcap(b"x" * 10, 5, 11, False, 1 << 18, 0, 0, 1)
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


SHARED_PCAPS = sorted(SHARED_CAPTURES.glob("*.pcap"))


def test_the_counting_scan_takes_the_shared_captures_it_reads():
    """Those whose records are frames; the others (SLL here) are left to the scanner."""
    for path in SHARED_PCAPS:
        found = tally.open_tally(path)
        assert (found is not None) == (_linktype(path) in DIRECT), path
        if found is not None:
            found.feed.close()


@pytest.mark.parametrize("path", [p for p in SHARED_PCAPS if _linktype(p) in DIRECT],
                         ids=lambda p: p.name)
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
        "capture.pcapng": bytes.fromhex("0a0d0d0a") + bytes(24),
        "capture.pcap.gz": __import__("gzip").compress(pcap),
        "sll.pcap": pcap_file([bytes(60)], linktype=113),
        "erf.pcap": pcap_file([bytes(60)], linktype=197),
        "garbage": b"not a capture at all",
        "header.pcap": pcap[:20],
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert tally.open_tally(tmp_path / name) is None, name
    assert tally.open_tally("-") is None  # standard input is left to the scanner, unread
    with open(tmp_path / "sll.pcap", "rb") as handle:
        assert tally.open_tally(handle) is None
        assert handle.tell() == 0
    with pytest.raises(Exception, match="empty"):
        (tmp_path / "empty.pcap").write_bytes(b"")
        tally.open_tally(tmp_path / "empty.pcap")

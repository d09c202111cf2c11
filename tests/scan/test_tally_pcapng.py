"""The counting scan of pcapng files (``ibwire.scan.tally_pcapng``): both twins of
``check_pcapng`` and ``pcapng_sync`` agree, and a tally, split between threads or not, paused
for flagged records or not, whatever the window, gives the counts and flagged records that the
full scanner gives, and the frames the reader reads: sections of either byte order, interfaces
of every link type with any clock, blocks the C walk does not take, cut tails."""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.pcap import LINK_CODES
from ibwire.scan import _tally_python as twin
from ibwire.scan import tally, tally_pcapng
from tests import corpus
from tests.pcap.capture_synth import (
    T0,
    block,
    epb,
    erf_record,
    idb,
    packet_block,
    pcapng_file,
    shb,
    sll2_header,
    spb,
)
from tests.scan.conftest import tally_c_engine as c_engine
from tests.scan.test_tally import frame_of, reference, tallied

#: link types of interfaces: frames, cooked (SLL, SLL2), ERF (the walker's), unknown (other)
LINKTYPES = {1: "ethernet", 101: "ip", 247: "infiniband", 113: "sll", 276: "sll2", 197: "erf",
             999: "other"}
TSRESOLS = [None, 6, 9, 0, 12, 100, 0x80 | 20, 0x80 | 127]


def _frame(draw: st.DrawFn, linktype: int) -> bytes:
    link = LINKTYPES[linktype]
    if link == "erf":
        return erf_record(T0, 2, b"\0\0" + frame_of(draw, "ethernet"))
    if link == "other":
        return draw(st.binary(max_size=60))
    return frame_of(draw, link)


def _interface(draw: st.DrawFn, faces: list[tuple[int, int]], order: str) -> bytes:
    """An IDB of any link type, snaplen and clock (appended to ``faces``)."""
    linktype = draw(st.sampled_from([1, 1, 113, 276, 276, 101, 247, 197, 999]))
    snaplen = draw(st.sampled_from([0, 0, 65535, 80]))
    faces.append((linktype, snaplen))
    return idb(linktype, snaplen, order=order, tsresol=draw(st.sampled_from(TSRESOLS)),
               tsoffset=draw(st.sampled_from([None, 0, -5, 1 << 62])))


@st.composite
def pcapng_captures(draw: st.DrawFn, sections: int = 3,
                    faces: list[tuple[int, int]] | None = None) -> bytes:
    """Up to ``sections`` sections of either byte order, each with interfaces of any link
    type, snaplen and clock (more may come between packets; ``faces`` gets (link type,
    snaplen) of each); EPBs plain (most) or not: over orig_len, on an undeclared interface,
    with a lying trailing length (the walk ends); SPBs, obsolete Packet Blocks, unknown
    blocks; a cut tail."""
    out = b""
    for _section in range(draw(st.integers(1, sections))):
        order = draw(st.sampled_from("<>"))
        out += shb(order)
        if faces is None or _section:
            faces = []
        for _face in range(draw(st.integers(1, 2))):
            out += _interface(draw, faces, order)
        for _ in range(draw(st.integers(0, 10))):
            face = draw(st.integers(0, len(faces) - 1))
            frame = _frame(draw, faces[face][0])
            kind = draw(st.sampled_from(["plain"] * 8 + ["orig", "iface", "spb", "pb",
                                                          "unknown", "idb", "length"]))
            units = draw(st.sampled_from([0, T0 // 1000, (1 << 64) - 1]))
            if kind == "plain":
                out += epb(face, units, frame, order=order)
            elif kind == "orig":
                out += epb(face, units, frame, orig_len=max(0, len(frame) - 1), order=order)
            elif kind == "iface":
                out += epb(len(faces) + 2, units, frame, order=order)
            elif kind == "spb":
                out += spb(frame, order=order)
            elif kind == "pb":
                out += packet_block(face, units, frame, order=order)
            elif kind == "unknown":
                out += block(0x0BAD, b"ignored", order=order)
            elif kind == "idb":
                out += _interface(draw, faces, order)
            else:
                out += epb(face, units, frame, order=order)[:-4] + bytes(4)
                return out  # a lying trailing length ends the walk
    return out + draw(st.sampled_from([b"", b"", b"\0" * 6, shb()[:20],
                                       epb(0, 1, bytes(40))[:-8]]))


SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck),
                    database=None)
RULES = st.lists(st.tuples(st.sampled_from([0, 0, 80, 65535]), st.sampled_from([0, 1, 2, 255]),
                           st.sampled_from([-1, 0, 0, 1, 2])), max_size=4)


def _rules(faces: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """The counting walk's rules for interfaces (link type, snaplen), as the tally makes them:
    written here from the link-type table, not taken from the tally."""
    headers = {113: 1, 276: 2, 197: -1}
    return [(snaplen, LINK_CODES[LINKTYPES.get(linktype, "other")]
             if linktype not in headers else 0, headers.get(linktype, 0))
            for linktype, snaplen in faces]


@SETTINGS
@given(data=st.data(), cap=st.integers(1, 4))
def test_check_pcapng_twins_agree(data, cap):
    """On one section, with its interfaces' rules (or any others)."""
    engine = c_engine()
    faces: list[tuple[int, int]] = []
    capture = data.draw(pcapng_captures(sections=1, faces=faces))
    rules = _rules(faces) if data.draw(st.integers(0, 3)) else data.draw(RULES)
    swapped = (capture[8:12] == b"\x1a\x2b\x3c\x4d") == (sys.byteorder == "little")
    epb_type = (6).to_bytes(4, "little" if (sys.byteorder == "little") != swapped else "big")
    at = data.draw(st.integers(0, len(capture)))
    found = capture.find(epb_type, at)  # a block start, most of the time
    pos = found if found >= 0 and data.draw(st.integers(0, 5)) else at
    for end in (len(capture), (pos + len(capture)) // 2):
        assert engine.check_pcapng(capture, pos, end, swapped, 1 << 18, rules, cap) == \
            twin.check_pcapng(capture, pos, end, swapped, 1 << 18, rules, cap)


@SETTINGS
@given(data=st.one_of(pcapng_captures(), st.binary(max_size=400)), at=st.integers(0, 400),
       depth=st.integers(1, 4), search=st.integers(0, 400), swapped=st.booleans())
def test_pcapng_sync_twins_agree(data, at, depth, search, swapped):
    at = min(at, len(data))
    assert c_engine().pcapng_sync(data, at, len(data), swapped, 1 << 18, depth, search) == \
        twin.pcapng_sync(data, at, len(data), swapped, 1 << 18, depth, search)


def test_pcapng_sync_finds_a_block_start():
    frames = [bytes((k * 7 + 1) % 256 for k in range(60 + i)) for i in range(20)]
    data = pcapng_file(frames)
    starts = [data.find(epb(0, T0 // 1000 + k, f)) for k, f in enumerate(frames)]
    for engine in (twin, c_engine()):
        for at in range(starts[0], starts[12], 4):
            found = engine.pcapng_sync(data, at, len(data), False, 1 << 18, 8, 4096)
            assert found == min(s for s in starts if s >= at), at


@SETTINGS
@given(data=pcapng_captures(), window=st.sampled_from([64, 300, 4096, 1 << 20]),
       threads=st.sampled_from([1, 2]), cap=st.sampled_from([1, 2, 4096]))
def test_a_pcapng_tally_is_what_the_scanner_says(engine, tmp_path_factory, data, window, threads,
                                                cap):
    path = tmp_path_factory.mktemp("tally") / "capture.pcapng"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tally, "SPLIT_AT_LEAST", 0)  # split even the smallest run
        patch.setattr(tally, "SYNC_DEPTH", 2)
        patch.setattr(tally, "FLAGGED_CAP", cap)  # pause the window after so many
        assert tallied(path, threads, window) == reference(path)


def _cooked_capture(count: int, bad: set[int], order: str = "<") -> bytes:
    """One section, an SLL2 interface, ``count`` RoCEv2 packets (ICRC broken in ``bad``)."""
    from ibwire import build

    frame = build("rocev2_ipv4", {"bth.destqp": 0x11}, bytes(16), opcode=0x04)
    out = shb(order) + idb(276, order=order, tsresol=9)
    for k in range(count):
        data = bytearray(sll2_header(0x0800) + frame[14:])
        if k in bad:
            data[-1] ^= 1
        out += epb(0, T0 + k, bytes(data), order=order)
    return out


@pytest.mark.parametrize("guess", ["after", "inside", "before"])
def test_a_wrong_guess_changes_nothing(engine, tmp_path, monkeypatch, guess):
    """The second thread's start is only used when the first thread's walk ends on it."""
    path = tmp_path / "capture.pcapng"
    path.write_bytes(_cooked_capture(300, {5, 150, 299}, ">"))
    truth = reference(path)
    real = engine.pcapng_sync
    guesses = []

    def wrong(buf, start, end, *args):
        found = real(buf, start, end, *args)
        moved = {"after": found + 4, "inside": found + 20, "before": found - 4}[guess]
        guesses.append(moved)
        return moved if found >= 0 else found

    monkeypatch.setattr(engine, "pcapng_sync", wrong)
    monkeypatch.setattr(tally, "SPLIT_AT_LEAST", 0)
    assert tallied(path, 2, 4096) == truth
    assert len(guesses) > 3 and truth[0]["failed"] == 3


def test_plain_runs_are_counted_in_c(engine, tmp_path, monkeypatch):
    """A capture as dumpcap writes it leaves no packet to the walker: every EPB is counted by
    the C walk (or its twin), and the scanner is not loaded for them."""
    path = tmp_path / "capture.pcapng"
    path.write_bytes(_cooked_capture(200, {7}) + block(5, bytes(8)))  # an ISB at the end
    left = []
    monkeypatch.setattr(tally_pcapng.PcapngTally, "_scan_left",
                        lambda self, buf, base, records: left.extend(records))
    found = tally.open_tally(path, threads=1, window=1 << 20)
    assert isinstance(found, tally_pcapng.PcapngTally)
    with found:
        windows = list(found.windows())
    assert left == []
    assert [w.counts[:4] for w in windows] == [(200, 200, 0, 1)]
    assert [f.record for f in windows[0].flagged] == [7]


@pytest.mark.parametrize("path", corpus.params(corpus.captures((".pcapng",))),
                         ids=lambda p: p.name if p else "none")
def test_shared_captures(engine, path, monkeypatch):
    monkeypatch.setattr(tally, "SPLIT_AT_LEAST", 0)
    for window in (4096, 1 << 20):
        assert tallied(path, 2, window) == reference(path)


def test_a_bad_first_section_is_left_to_the_scanner(tmp_path):
    path = tmp_path / "bad.pcapng"
    path.write_bytes(shb(major=2) + idb(1))
    assert tally.open_tally(path) is None


@pytest.fixture
def rotating(tmp_path):
    """A pcapng file of 3000 EPBs of 1000-byte frames, and where each EPB starts."""
    from tests.scan.test_shrink import COUNT, FRAME

    data = pcapng_file([FRAME] * COUNT)
    path = tmp_path / "rotating.pcapng"
    path.write_bytes(data)
    first, size = len(pcapng_file([])), len(epb(0, 0, FRAME))
    return path, [first + k * size for k in range(COUNT)]


def test_a_pcapng_tally_finds_the_file_shorter(filemap_twin, rotating):
    import os

    from ibwire.errors import ShrunkError

    path, starts = rotating
    found = tally.open_tally(path, threads=2, window=1 << 20)
    with found:
        windows = found.windows()
        counted = next(windows).counts[0]
        os.truncate(path, starts[2500] + 40)  # inside EPB 2500
        rest = list(windows)
    assert counted + sum(w.counts[0] for w in rest) == 2500
    assert isinstance(rest[-1].error, ShrunkError)
    assert rest[-1].error_record == 2500


def test_a_pcapng_tally_raises_when_bytes_vanish(filemap_twin, rotating, monkeypatch):
    import ibwire.scan.feed
    from ibwire.errors import CaptureError
    from tests.scan.test_shrink import truncate_on_map

    path, _starts = rotating
    truncate_on_map(monkeypatch, ibwire.scan.feed, path, 2, after=True)
    counted = 0
    with tally.open_tally(path, threads=2, window=1 << 20) as found, \
            pytest.raises(CaptureError, match=f"{path}.*shrank.*record"):
        for window in found.windows():
            counted += window.counts[0]
            assert window.error is None
    assert counted < 3000

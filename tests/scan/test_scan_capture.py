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
from tests import corpus
from tests.pcap.capture_synth import (
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
                # the reader's nanoseconds are Python ints; columns hold them clamped to int64
                assert batch["timestamp_ns"][row] == min(max(record.timestamp_ns, -(1 << 63)),
                                                         (1 << 63) - 1)
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


@pytest.mark.parametrize("kind", ["pcap", "erf"])
def test_batches_start_small_and_double(tmp_path, monkeypatch, kind):
    """On both classic pcap paths (frames scanned as walked; ERF records located first) the
    first batch holds FIRST_ROWS rows, each next one twice as many up to BATCH_ROWS, so
    that a caller starts soon while the next ones are scanned; in one thread, whole batches
    at once. Every record is still there once, in order."""
    monkeypatch.setattr("ibwire.scan.capture.FIRST_ROWS", 3)
    monkeypatch.setattr("ibwire.scan.capture.BATCH_ROWS", 16)
    if kind == "pcap":
        data = pcap_file(FRAMES)
    else:
        data = pcap_file([erf_record(T0, 2, b"\0\0" + f) for f in FRAMES], linktype=197)
    path = tmp_path / "capture"
    path.write_bytes(data)
    sizes = [len(batch) for batch in scan_capture(path)]
    assert sizes == [3, 6, 12, 16, 3]
    assert [len(batch) for batch in scan_capture(path, threads=1)] == [16, 16, 8]
    assert_scan_agrees(path, list(read_capture(path)), 1 << 20)


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
    """The shared captures (when there) and the samples."""
    paths = corpus.captures((".pcap", ".pcapng", ".erf", ".gz"))
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


# --- pcapng: runs of plain EPBs take the C walk (_Columns.epb_hook), the rest the walker ---

#: if_tsresol values: micro/nano, coarse, binary, and beyond any uint64 (Python's walk only).
TSRESOLS = [None, 6, 9, 0, 3, 12, 28, 29, 100, 0x80 | 10, 0x80 | 30, 0x80 | 127]


@st.composite
def pcapng_captures(draw: st.DrawFn) -> bytes:
    """Sections of either byte order, interfaces of direct, cooked and unknown link types with
    any clock, and blocks plain or not: EPBs over snaplen or orig_len, past their block, on an
    undeclared interface, with lying lengths; SPBs, PBs, unknown blocks, a cut tail."""
    from tests.pcap.capture_synth import block, epb, idb, packet_block, shb, spb

    out = b""
    frames = st.sampled_from(FRAMES[:6])
    for _section in range(draw(st.integers(1, 2))):
        order = draw(st.sampled_from("<>"))
        out += shb(order)
        faces = []
        for _face in range(draw(st.integers(1, 3))):
            linktype = draw(st.sampled_from([1, 1, 101, 113, 247, 999]))
            snaplen = draw(st.sampled_from([0, 65535, 80]))
            faces.append(linktype)
            out += idb(linktype, snaplen, order=order, tsresol=draw(st.sampled_from(TSRESOLS)),
                       tsoffset=draw(st.sampled_from([None, 0, 1_700_000_000, -5, 1 << 62])))
        for _ in range(draw(st.integers(0, 12))):
            frame = draw(frames)
            if faces[0] == 113:
                frame = sll_header(0x0800) + frame[14:]
            kind = draw(st.sampled_from(["plain"] * 6 + ["cut", "caplen", "orig", "iface",
                                                          "spb", "pb", "unknown", "length"]))
            units = draw(st.sampled_from([0, 1, T0 // 1000, (1 << 64) - 1, 1 << 40]))
            iface = draw(st.integers(0, len(faces) - 1))
            if kind == "plain":
                out += epb(iface, units, frame, order=order)
            elif kind == "cut":
                out += epb(iface, units, frame[:30], orig_len=len(frame), order=order)
            elif kind == "caplen":
                out += epb(iface, units, frame, caplen=len(frame) + 8, order=order)
            elif kind == "orig":
                out += epb(iface, units, frame, orig_len=len(frame) - 4, order=order)
            elif kind == "iface":
                out += epb(len(faces) + 2, units, frame, order=order)
            elif kind == "spb":
                out += spb(frame, order=order)
            elif kind == "pb":
                out += packet_block(iface, units, frame, order=order)
            elif kind == "unknown":
                out += block(0x0BAD, b"ignored", order=order)
            else:
                out += epb(iface, units, frame, order=order)[:-4] + bytes(4)
                break  # a lying trailing length ends the walk
    return out + draw(st.sampled_from([b"", b"\0" * 6, shb()[:20]]))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(pcapng_captures(), st.sampled_from([64, 200, 4096, 1 << 20]))
def test_pcapng_through_the_c_epb_walk_agrees_with_the_reader(tmp_path_factory, data, window):
    path = tmp_path_factory.mktemp("ng") / "capture.pcapng"
    path.write_bytes(data)
    records = list(read_capture(path))
    assert_scan_agrees(path, records, window)
    assert_scan_agrees(io.BytesIO(data), records, window)
    assert_index_agrees(data, records)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(pcapng_captures(), st.integers(0, 400), st.integers(1, 9),
       st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 1 << 63),
                          st.integers(-(1 << 62), 1 << 62), st.sampled_from([0, 80, 65535]),
                          st.sampled_from([0, 1, 1])), min_size=0, max_size=3),
       st.booleans())
def test_pcapng_epb_walk_twins_agree(pcap_engine, data, pos, cap, faces, swapped):
    from ibwire.pcap import _python

    faces = [(kind, param % 128 if kind == 2 else max(param, 1), off, snap, direct)
             for kind, param, off, snap, direct in faces]
    epb = (6).to_bytes(4, "big" if swapped == (np.little_endian) else "little")
    found = data.find(epb, min(pos, len(data)))  # a block start, most of the time
    pos = found if found >= 0 else min(pos, len(data))
    got = pcap_engine.pcapng_epbs(data, pos, len(data), swapped, 1 << 20, faces, cap)
    want = _python.pcapng_epbs(data, pos, len(data), swapped, 1 << 20, faces, cap)
    assert [np.asarray(x).tolist() for x in got] == [np.asarray(x).tolist() for x in want]


def test_a_plain_pcapng_run_is_walked_in_c(tmp_path, monkeypatch):
    """Every plain EPB of a window goes through the C walk (one call takes them all), and the
    rows are still the reader's."""
    import ibwire.pcap

    data = pcapng_file(FRAMES)
    path = tmp_path / "plain.pcapng"
    path.write_bytes(data)
    taken = []
    walk = ibwire.pcap.pcapng_epbs

    def counted(*args):
        found = walk(*args)
        taken.append(len(found[0]))
        return found

    monkeypatch.setattr(ibwire.pcap, "pcapng_epbs", counted)
    records = list(read_capture(path))
    assert taken == []  # the reader walks in Python
    assert_scan_agrees(path, records, 1 << 20)
    assert taken == [len(FRAMES)]


@pytest.mark.parametrize("kind, param", [(1, 0), (3, 1), (0, 1 << 64), (2, -1)])
def test_a_clock_the_walker_never_makes_is_refused(pcap_engine, kind, param):
    data = pcapng_file(FRAMES[:2])
    with pytest.raises((ValueError, OverflowError)):
        pcap_engine.pcapng_epbs(data, 0, len(data), False, 1 << 20, [(kind, param, 0, 0, 1)], 4)


def test_sections_with_their_own_clocks(tmp_path):
    """Each section's interfaces keep their own clock and link type in the C walk, however
    many sections come and go (a section's rules are not those of an earlier one)."""
    from tests.pcap.capture_synth import epb, idb, shb

    data = b""
    for k, (tsresol, linktype) in enumerate([(6, 1), (9, 1), (3, 999), (6, 1), (0x80 | 20, 1)]):
        data += shb() + idb(linktype, tsresol=tsresol, tsoffset=k)
        data += b"".join(epb(0, T0 // 1000 + j, frame) for j, frame in enumerate(FRAMES[:3]))
    path = tmp_path / "sections.pcapng"
    path.write_bytes(data)
    records = list(read_capture(path))
    assert len({r.timestamp_ns for r in records}) == len(records) == 15
    assert_scan_agrees(path, records, 1 << 20)
    assert_index_agrees(data, records)


def test_a_cooked_header_cut_in_a_later_window_is_placed_in_the_file(tmp_path):
    """The error of an SLL record too short for its header names its byte in the file, not
    in the window (windows of a big file start past 0)."""
    from tests.pcap.capture_synth import epb, idb, shb

    data = shb() + idb(113) + b"".join(epb(0, k, sll_header(0x0800) + f[14:])
                                       for k, f in enumerate(FRAMES * 50)) + epb(0, 1, bytes(10))
    path = tmp_path / "cut.pcapng"
    path.write_bytes(data)
    records = list(read_capture(path))
    assert len(data) > 1 << 17 and records[-1].error.offset > 1 << 17
    for window in (4096, 1 << 20):
        assert_scan_agrees(path, records, window)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("source", ["file", "stream"])
def test_meanwhile_runs_once_before_the_first_batch(tmp_path, monkeypatch, threads, source):
    """The caller's setting up (``meanwhile``) runs once, before any batch is handed out;
    the windows scanned ahead meanwhile (START_AHEAD, a file's) change no row."""
    monkeypatch.setattr("ibwire.scan.capture.BATCH_ROWS", 3)
    monkeypatch.setattr("ibwire.scan.capture.FIRST_ROWS", 1)
    path = tmp_path / "c.pcap"
    path.write_bytes(pcap_file(FRAMES))

    def src():
        return str(path) if source == "file" else io.BytesIO(path.read_bytes())

    plain = [(b["record"].tolist(), [bytes(b.frame(r)) for r in range(len(b))])
             for b in scan_capture(src(), window=300, threads=threads)]
    calls: list[int] = []
    handed: list[int] = []

    def opened():
        calls.append(len(handed))

    def scanned():
        for b in scan_capture(src(), window=300, threads=threads, meanwhile=opened):
            handed.append(len(b))
            # frames of a batch scanned ahead are read after later windows were mapped
            yield b["record"].tolist(), [bytes(b.frame(r)) for r in range(len(b))]

    got = list(scanned())
    assert calls == [0]
    assert len(got) > 4  # more windows than START_AHEAD
    assert [r for rows, _ in got for r in rows] == list(range(len(FRAMES)))
    assert got == plain

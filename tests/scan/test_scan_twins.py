"""The C scanner and its pure-Python twin give identical columns."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.pcap import index_capture
from ibwire.pcap.records import MAX_CAPLEN
from ibwire.scan import _python
from ibwire.strategies import mutated, packets
from tests import corpus
from tests.scan.expect import rows_equal

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _batch(frames: list[tuple[bytes, int]]) -> tuple[bytes, list[int], list[int], list[int]]:
    buffer = b"".join(f for f, _ in frames)
    lengths = [len(f) for f, _ in frames]
    offsets = list(np.cumsum([0, *lengths[:-1]]))
    return buffer, offsets, lengths, [link for _, link in frames]


LINKS = {"ethernet": 0, "infiniband": 1, "ip": 2, "grh": 3}


@SETTINGS
@given(st.lists(st.one_of(packets().map(lambda g: (g.frame, LINKS[g.link])),
                          mutated().map(lambda m: (m.frame, LINKS[m.link])),
                          st.tuples(st.binary(max_size=120), st.sampled_from([0, 1, 2, 3, 255]))),
                min_size=1, max_size=12))
def test_twins_agree_on_batches(scan_engine, frames):
    args = _batch(frames)
    assert rows_equal(scan_engine.scan_frames(*args), _python.scan_frames(*args)) == []


@corpus.needs_shared
def test_twins_agree_on_shared_captures(scan_engine):
    paths = corpus.captures()
    assert paths
    for path in paths:
        index = index_capture(path)
        args = (index.buffer, index.offsets, index.lengths, index.link_codes)
        assert rows_equal(scan_engine.scan_frames(*args), _python.scan_frames(*args)) == [], path


def test_records_outside_the_buffer_are_truncated(scanner):
    cols = scanner.scan_frames(b"\0" * 10, [0, 8, -1, 11], [10, 4, 1, 0], [0, 0, 0, 0])
    assert cols["error"].tolist() == [2, 2, 2, 2]


def test_argument_errors(scanner):
    with pytest.raises(ValueError, match="offsets"):
        scanner.scan_frames(b"", [0, 1], [1], [0, 0])
    with pytest.raises(ValueError, match="link codes"):
        scanner.scan_frames(b"", [0], [1], [0, 0])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.booleans(), st.integers(0, 64), st.integers(1, 40),
       st.sampled_from([1, 1000]))
def test_pcap_record_walk_twins_agree(scan_engine, data, swapped, pos, cap, fraction):
    pos = min(pos, len(data))
    got = scan_engine.pcap_records(data, pos, len(data), swapped, fraction, 64, cap)
    want = _python.pcap_records(data, pos, len(data), swapped, fraction, 64, cap)
    assert [np.asarray(x).tolist() for x in got] == [np.asarray(x).tolist() for x in want]


def test_pcap_record_walk_stops_at_an_absurd_caplen(scanner):
    record = (1).to_bytes(4, "little") * 2 + (4).to_bytes(4, "little") * 2 + b"abcd"
    absurd = bytes(8) + (MAX_CAPLEN + 1).to_bytes(4, "little") + bytes(4)
    offs, caplen, orig, ts, stop, status = scanner.pcap_records(
        record + absurd, 0, 36, False, 1000, MAX_CAPLEN, 10)
    assert (offs.tolist(), caplen.tolist(), ts.tolist(), stop, status) == (
        [16], [4], [1_000_001_000], 20, 1)
    offs, *_rest, stop, status = scanner.pcap_records(record + b"\0" * 5, 0, 25, False, 1000,
                                                      MAX_CAPLEN, 10)
    assert (len(offs), stop, status) == (1, 20, 2)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(packets().map(lambda g: g.frame), mutated().map(lambda m: m.frame),
                          st.binary(max_size=80)), max_size=8),
       st.sampled_from([0, 1, 2, 255]), st.integers(1, 9), st.binary(max_size=20))
def test_walk_and_scan_in_one_pass_twins_agree(scan_engine, frames, link, cap, tail):
    """scan_pcap (walk + scan fused, with prefetch) = pcap_records then scan_frames."""
    data = b"".join(len(f).to_bytes(4, "little") * 4 + f for f in frames) + tail
    got = scan_engine.scan_pcap(data, 0, len(data), False, 1000, MAX_CAPLEN, cap, link)
    want = _python.scan_pcap(data, 0, len(data), False, 1000, MAX_CAPLEN, cap, link)
    assert [np.asarray(x).tolist() for x in got[:6]] == [np.asarray(x).tolist() for x in want[:6]]
    assert rows_equal(got[6], want[6]) == []


def _unverified_is_verified_without_verdicts(scanner, args) -> None:
    """``Unverified`` fields: every column as the verified scan's, but no verdict (-1)."""
    from ibwire.scan.program import Unverified

    checked = scanner.scan_frames(*args)
    read = scanner.scan_frames(*args, Unverified(None))
    assert (read["icrc_ok"] == -1).all() and (read["vcrc_ok"] == -1).all()
    for name in ("icrc_ok", "vcrc_ok"):
        checked[name][:] = -1
    assert rows_equal(read, checked) == []


@SETTINGS
@given(st.lists(st.one_of(packets().map(lambda g: (g.frame, LINKS[g.link])),
                          mutated().map(lambda m: (m.frame, LINKS[m.link]))),
                min_size=1, max_size=12))
def test_unverified_scans_read_the_crcs_without_checking_them(scanner, frames):
    _unverified_is_verified_without_verdicts(scanner, _batch(frames))


def test_unverified_scans_of_shared_captures(scanner):
    """The shared captures (when there) and the corrupt sample."""
    paths = corpus.captures()
    paths.append(corpus.ROOT / "captures" / "sample-corrupt.pcap")  # bad CRCs: verdicts 0 there
    for path in paths:
        index = index_capture(path)
        _unverified_is_verified_without_verdicts(
            scanner, (index.buffer, index.offsets, index.lengths, index.link_codes))

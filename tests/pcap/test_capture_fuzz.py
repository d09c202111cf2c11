"""Hypothesis: random bytes and random mutations of valid captures give only ibwire errors or
error records, iteration ends, and the mapped reader, the chunked stream reader and the index
fast path all agree."""

from __future__ import annotations

import io
import os

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ibwire.errors import CaptureError, IbwireError
from ibwire.pcap import LINK_CODES, iter_capture_bytes, open_capture
from ibwire.pcap.erf import erf_timestamp_to_ns, ns_to_erf_timestamp
from tests.pcap.capture_synth import (
    NS,
    T0,
    assert_index_agrees,
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

FRAMES = [ethernet_frame(), ethernet_frame(bytes(33), 0x8915)]
SEEDS = [
    pcap_file(FRAMES),
    pcap_file(FRAMES, order=">", nanoseconds=True),
    pcapng_file(FRAMES, order=">"),
    shb() + idb(1, 64, tsresol=0x80 | 10, tsoffset=3,
                extra_options=option(2, b"eth0")) + idb(247, 0, tsresol=9)
    + epb(0, 12345, FRAMES[0]) + epb(1, T0, ib_frame()) + spb(FRAMES[1])
    + packet_block(1, 99, ib_frame(4)),
    pcap_header(197) + pcap_record(T0, erf_record(T0, 21, ib_frame(), ext_headers=1))
    + pcap_record(T0, erf_record(T0 + 5, 2, FRAMES[0])),
    b"".join(erf_record(T0 + k * NS, 21, ib_frame(4 * k)) for k in range(3)),
    pcap_header(113) + pcap_record(T0, sll_header(0x0800) + bytes(20))
    + pcap_record(T0, sll_header(0x8915, 32) + bytes(40)),
    pcap_header(276) + pcap_record(T0, sll2_header(0x86DD) + bytes(40)),
    pcap_file([ib_frame(), ib_frame(12)], 247, snaplen=30),
]
FUZZ = settings(max_examples=int(os.environ.get("IBWIRE_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _read_all(data: bytes) -> list | None:
    """Records of ``data``, or None when it is refused at open (a CaptureError)."""
    records = iter_capture_bytes(data)
    try:
        first = next(records, None)
    except CaptureError:
        return None
    return ([] if first is None else [first]) + list(records)


def _check_records(data: bytes, records: list) -> None:
    assert len(records) <= len(data) // 12 + 1
    for index, record in enumerate(records):
        assert record.index == index
        if record.error is not None:
            assert isinstance(record.error, IbwireError) and record.error.record == index
            assert record.error.offset is not None and 0 <= record.error.offset <= len(data)
            continue
        assert record.caplen == len(record.frame) <= len(record.record_data)
        assert record.link in LINK_CODES
        assert record.warning is None or record.warning.record == index


def _check(data: bytes, chunk_size: int = 5) -> None:
    records = _read_all(data)
    if records is None:
        try:
            open_capture(io.BytesIO(data))
        except CaptureError:
            return
        raise AssertionError("the stream reader opened what the buffer reader refused")
    _check_records(data, records)
    with open_capture(io.BytesIO(data), chunk_size=chunk_size) as reader:
        assert [record_key(r) for r in reader] == [record_key(r) for r in records]
    assert_index_agrees(data, records)


@FUZZ
@given(st.binary(max_size=3000))
@example(b"")
@example(b"\x1f\x8b")
@example(b"\n\r\r\n")
def test_random_bytes(data: bytes) -> None:
    _check(data)


@FUZZ
@given(seed=st.sampled_from(SEEDS),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6),
       cut=st.one_of(st.none(), st.integers(0, 1 << 16)),
       extra=st.binary(max_size=40), chunk_size=st.integers(1, 64))
def test_mutated_captures(seed: bytes, flips: list[tuple[int, int]], cut: int | None,
                          extra: bytes, chunk_size: int) -> None:
    data = bytearray(seed)
    for position, value in flips:
        data[position % len(data)] = value
    if cut is not None:
        del data[cut % (len(data) + 1):]
    _check(bytes(data) + extra, chunk_size)


def test_seeds_are_clean() -> None:
    for seed in SEEDS:
        records = _read_all(seed)
        assert records and all(r.error is None for r in records)
        _check(seed)


@given(st.integers(0, (1 << 32) * NS - 1))
@example(999_999_999)
def test_erf_timestamp_round_trip(ns: int) -> None:
    assert erf_timestamp_to_ns(ns_to_erf_timestamp(ns)) == ns

"""The block locator of ERF records in pcap: the C loop (``ibwire.pcap._engine.erf_block``)
and its numpy twin move the same rows to the same frames, and leave the same rows (extension
headers, lengths that lie, records cut short) to the per-record locator."""

from __future__ import annotations

import numpy as np
import pytest

from ibwire.pcap import _python
from ibwire.pcap.index_links import erf_tables
from tests.crc.conftest import built_or_skip

try:
    from ibwire.pcap import _engine
except ImportError:
    _engine = None


def _records(seed: int, count: int) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """A buffer of ERF records (some with lies in them) and the index columns over it."""
    rng = np.random.default_rng(seed)
    chunks, offsets, lengths, wire = [], [], [], []
    at = 0
    for _ in range(count):
        body = int(rng.integers(0, 80))
        erf_type = int(rng.choice([21, 2, 16, 22, 25, 0x80 | 21, 99, 48]))
        rlen = 16 + body + (2 if erf_type in (2, 16) else 0)
        rlen = int(rng.choice([rlen, rlen, rlen, rng.integers(0, 200)]))
        wlen = int(rng.choice([body, body, rng.integers(0, 300)]))
        head = bytearray(rng.integers(0, 256, 8, dtype=np.uint8).tobytes())  # timestamp
        head += bytes([erf_type, 4]) + rlen.to_bytes(2, "big") + bytes(2) \
            + wlen.to_bytes(2, "big")
        record = bytes(head) + rng.integers(0, 256, body + 2, dtype=np.uint8).tobytes()
        held = int(rng.choice([len(record), len(record), rng.integers(0, len(record) + 1)]))
        chunks.append(record)
        offsets.append(at)
        lengths.append(held)
        wire.append(int(rng.integers(0, 2000)))
        at += len(record)
    octets = np.frombuffer(b"".join(chunks), np.uint8)
    columns = (np.array(offsets, np.int64), np.array(lengths, np.uint32),
               np.zeros(count, np.int64), np.full(count, 7, np.uint8),
               np.array(wire, np.uint32))
    return octets, columns


@pytest.mark.parametrize("seed", range(5))
def test_the_twins_move_the_same_rows(seed):
    engine = built_or_skip(_engine, "ibwire.pcap._engine")
    octets, columns = _records(seed, 3000)
    ours = tuple(c.copy() for c in columns)
    theirs = tuple(c.copy() for c in columns)
    left_c = engine.erf_block(octets, *ours, *erf_tables())
    left_py = _python.erf_block(octets, *theirs, *erf_tables())
    assert left_c.tolist() == left_py.tolist()
    assert 100 < len(left_c) < 2900  # both kinds of rows are there
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    moved = np.setdiff1d(np.arange(3000), left_c)
    assert (ours[0][moved] != columns[0][moved]).all()  # moved past the header


def test_a_record_past_the_buffer_is_left_not_read():
    engine = built_or_skip(_engine, "ibwire.pcap._engine")
    octets, columns = _records(9, 4)
    columns[0][2] = len(octets) - 3  # 16 bytes from here run past the end
    columns[0][3] = -5
    left = engine.erf_block(octets, *columns, *erf_tables())
    assert {2, 3} <= set(left.tolist())


def test_columns_that_do_not_match_are_refused():
    engine = built_or_skip(_engine, "ibwire.pcap._engine")
    octets, columns = _records(3, 10)
    with pytest.raises(ValueError):
        engine.erf_block(octets, columns[0][:5], *columns[1:], *erf_tables())
    with pytest.raises(ValueError):  # a wrong dtype
        engine.erf_block(octets, columns[0].astype(np.int32), *columns[1:], *erf_tables())

"""fix_batch: the same bytes as per-packet ``fix`` on every record of a mixed buffer, the
gaps between records untouched, and a verdict per record that says what it wrote."""

from __future__ import annotations

import numpy as np
import pytest

from ibwire.crc import _python
from ibwire.errors import IbwireError
from tests.crc.test_crc_batch import NAMES, _mixed


def _per_packet(crc, buf: bytes, offs: np.ndarray, lens: np.ndarray, links: np.ndarray
                ) -> tuple[bytes, list[int]]:
    """The buffer after ``fix`` of each record (strict: a fault writes nothing), and what
    fix_batch should say of each: 1 already right, 0 rewritten, -1 not fixed."""
    out = bytearray(buf)
    expected = []
    for off, n, link in zip(offs.tolist(), lens.tolist(), links.tolist(), strict=True):
        frame = bytearray(out[off:off + n])
        before = bytes(frame)
        try:
            crc.fix(frame, NAMES[link])
        except IbwireError:
            expected.append(-1)
            continue
        out[off:off + n] = frame
        expected.append(int(bytes(frame) == before))
    return bytes(out), expected


def test_fix_batch_equals_fix_of_each(crc):
    buf, offs, lens, links = _mixed(3, 1500)
    want, expected = _per_packet(crc, buf, offs, lens, links)
    got = bytearray(buf)
    was_right = crc.fix_batch(got, offs, lens, links)
    assert was_right.dtype == np.int8
    assert was_right.tolist() == expected
    assert bytes(got) == want
    assert set(expected) == {-1, 0, 1}, "the mixed buffer lacks a kind of record"
    assert bytes(got) != buf  # something was rewritten
    again = crc.fix_batch(got, offs, lens, links)  # a second pass finds everything right
    assert again.tolist() == [-1 if e < 0 else 1 for e in expected]


def test_fix_batch_one_link_and_numpy_buffer(crc):
    buf, offs, lens, links = _mixed(4, 400)
    keep = links == 0
    offs, lens = offs[keep], lens[keep]
    want, expected = _per_packet(crc, buf, offs, lens, links[keep])
    arr = np.frombuffer(buf, np.uint8).copy()
    assert crc.fix_batch(arr, offs, lens, "ethernet").tolist() == expected
    assert arr.tobytes() == want


def test_fix_batch_refuses_read_only_and_outside(crc):
    buf, offs, lens, links = _mixed(5, 20)
    with pytest.raises(TypeError):
        crc.fix_batch(buf, offs, lens, links)
    with pytest.raises(ValueError, match="outside"):
        crc.fix_batch(bytearray(buf), offs + len(buf), lens, links)


def test_twins_fix_the_same(engine):
    buf, offs, lens, links = _mixed(6, 2000)
    a, b = bytearray(buf), bytearray(buf)
    ra = engine.fix_batch(a, offs, lens, links)
    rb = _python.fix_batch(b, offs, lens, links)
    assert np.array_equal(ra, rb) and a == b

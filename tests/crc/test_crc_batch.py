"""verify_batch: columns equal to per-packet verify on a mixed buffer, any buffer type; fix."""

from __future__ import annotations

import mmap
import random
import tempfile
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.crc import _python
from ibwire.crc._common import ERROR_CODES, ERROR_NAMES, KIND_NAMES, LINK_CODES
from ibwire.errors import IbwireError
from tests.crc.crc_frames import KINDS, Built, bth, frames, native_ib, native_raw, rocev1, rocev2

SETTINGS = {"deadline": None, "derandomize": True, "database": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


def _samples(rng: random.Random) -> list[Built]:
    """Good frames of every encapsulation with random fields and payloads."""
    out = []
    for _ in range(6):
        body = bth(rng.randrange(256), byte4=rng.randrange(256), psn=rng.randrange(1 << 24))
        body += rng.randbytes(rng.randrange(0, 400, 4))
        tags = [(rng.choice([0x8100, 0x88A8, 0x9100]), rng.randrange(65536))
                for _ in range(rng.randrange(3))]
        trailer = rng.randbytes(rng.randrange(6))
        opts = rng.randbytes(4 * rng.randrange(11))
        out += [
            native_ib(body, trailer=trailer, lrh_fields={"vl": rng.randrange(16)}),
            native_ib(body, lnh=3, trailer=trailer, g={"tclass": rng.randrange(256)}),
            rocev1(body, vlans=tags, trailer=trailer), rocev1(body, link="grh"),
            rocev2(body, vlans=tags, trailer=trailer, ip={"options": opts, "ttl": 3}),
            rocev2(body, link="ip", ip={"options": opts}),
            rocev2(body, v6=True, vlans=tags, trailer=trailer, ip={"flow": rng.randrange(9999)}),
            rocev2(body, v6=True, link="ip"),
        ]
    return out


def _mixed(seed: int, count: int) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """A buffer of `count` records: good frames of every kind, bad CRCs, cuts, noise, gaps."""
    rng = random.Random(seed)
    buf = bytearray(rng.randbytes(3))
    offs, lens, links = [], [], []
    samples = _samples(rng)
    for i in range(count):
        b = rng.choice(samples)
        frame, link = bytearray(b.frame), b.link
        roll = rng.random()
        if roll < 0.15:  # bad ICRC or VCRC
            frame[rng.choice([b.end, b.vcrc_at if b.vcrc_at > 0 else b.end])] ^= 0x40
        elif roll < 0.25:
            frame = frame[:rng.randrange(len(frame))]
        elif roll < 0.35:
            frame[rng.randrange(len(frame))] = rng.randrange(256)
        elif roll < 0.40:
            frame = bytearray(rng.randbytes(rng.randrange(120)))
        elif roll < 0.45:
            frame, link = bytearray(native_raw(rng.randbytes(16), lnh=i % 2)), "infiniband"
        elif roll < 0.50:
            link = rng.choice(list(LINK_CODES))  # the wrong link
        offs.append(len(buf))
        lens.append(len(frame))
        links.append(LINK_CODES[link])
        buf += frame + rng.randbytes(rng.randrange(4))
    return (bytes(buf), np.array(offs, np.int64), np.array(lens, np.int64),
            np.array(links, np.uint8))


def _expected(crc, frame: bytes, link: str) -> tuple[int, int, int, int | None]:
    """(icrc_ok, vcrc_ok, error, kind) from the per-packet calls: a fault's error code, with
    the verdicts of the CRCs it leaves placed (``lenient``)."""
    try:
        v = crc.verify(frame, link)
    except IbwireError as exc:
        try:
            v = crc.verify(frame, link, lenient=True)
        except IbwireError:
            return -1, -1, ERROR_CODES[type(exc)], None
        ok = [-1 if x is None else int(x) for x in (v.icrc_ok, v.vcrc_ok)]
        return ok[0], ok[1], ERROR_CODES[type(exc)], None
    kind = KIND_NAMES.index(crc.locate(frame, link).kind)
    ok = [-1 if x is None else int(x) for x in (v.icrc_ok, v.vcrc_ok)]
    return ok[0], ok[1], 0, kind


NAMES = {code: name for name, code in LINK_CODES.items()}


def test_batch_equals_per_packet(crc):
    buf, offs, lens, links = _mixed(1, 1500)
    got = crc.verify_batch(buf, offs, lens, links)
    assert got.icrc_ok.dtype == np.int8 and got.vcrc_ok.dtype == np.int8
    assert got.error.dtype == np.uint8 and got.kind.dtype == np.uint8
    for i in range(len(offs)):
        frame = buf[offs[i]:offs[i] + lens[i]]
        icrc_ok, vcrc_ok, error, kind = _expected(crc, frame, NAMES[int(links[i])])
        assert (got.icrc_ok[i], got.vcrc_ok[i], got.error[i]) == (icrc_ok, vcrc_ok, error), i
        if kind is not None:
            assert got.kind[i] == kind, i
    errors = {ERROR_NAMES[e] for e in got.error}
    assert errors >= {"ok", "not_ib", "truncated", "malformed"}
    broken = got.error == ERROR_NAMES.index("malformed")  # some with their CRCs placed
    assert set(got.icrc_ok[broken]) == {-1, 0}, "no malformed record had its ICRC placed"
    assert set(got.icrc_ok) == {-1, 0, 1} and set(got.vcrc_ok) == {-1, 0, 1}


def test_twins_give_identical_columns(engine):
    buf, offs, lens, links = _mixed(2, 3000)
    a = engine.verify_batch(buf, offs, lens, links)
    b = _python.verify_batch(buf, offs, lens, links)
    for name in a._fields:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_kind_is_kept_on_a_fault(crc):
    """A RoCE frame cut by the snaplen still says what it is."""
    good = rocev2(bth() + b"payload").frame
    got = crc.verify_batch(good[:-5], [0], [len(good) - 5])
    assert ERROR_NAMES[got.error[0]] == "truncated"
    assert KIND_NAMES[got.kind[0]] == "rocev2_ipv4"


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy", "mmap"])
def test_buffer_types(crc, kind):
    buf, offs, lens, links = _mixed(3, 200)
    want = crc.verify_batch(buf, offs, lens, links)
    if kind == "mmap":
        with tempfile.TemporaryFile() as fh:
            fh.write(buf)
            fh.flush()
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                got = crc.verify_batch(mm, offs, lens, links)
    else:
        obj = {"bytes": buf, "bytearray": bytearray(buf), "memoryview": memoryview(buf),
               "numpy": np.frombuffer(buf, np.uint8)}[kind]
        got = crc.verify_batch(obj, offs.tolist(), lens.tolist(), links.tolist())
    for name in want._fields:
        assert np.array_equal(getattr(want, name), getattr(got, name)), name


def test_one_link_for_all(crc):
    good = [rocev2(bth(psn=i) + bytes(i), v6=True).frame for i in range(5)]
    buf = b"".join(good)
    offs = np.cumsum([0] + [len(f) for f in good[:-1]])
    got = crc.verify_batch(buf, offs, [len(f) for f in good], "ethernet")
    assert got.icrc_ok.tolist() == [1] * 5 and got.vcrc_ok.tolist() == [-1] * 5
    assert [KIND_NAMES[k] for k in got.kind] == ["rocev2_ipv6"] * 5


def test_empty_batch(crc):
    got = crc.verify_batch(b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert all(len(col) == 0 for col in got)


@pytest.mark.parametrize(("offs", "lens", "links"), [
    ([0, 5], [4, 6], "ethernet"),  # runs past the end
    ([-1], [2], "ethernet"),
    ([2], [-1], "ethernet"),
    ([11], [0], "ethernet"),
    ([0], [1, 2], "ethernet"),  # shapes differ
    ([0], [1], np.array([4], np.uint8)),  # no such link code
    ([0, 0], [1, 1], np.array([1], np.uint8)),
    ([0], [1], "fddi"),
    ([0], [1], np.array([0.5])),
])
def test_bad_batch_arguments(crc, offs, lens, links):
    with pytest.raises(ValueError):
        crc.verify_batch(b"0123456789", offs, lens, links)


def test_outside_message_names_the_record(crc):
    with pytest.raises(ValueError, match="record 1: offset 5 "):
        crc.verify_batch(b"0123456789", [0, 5], [4, 6])


def test_batch_runs_in_threads(engine):
    """The C batch releases the GIL; concurrent calls give the same columns."""
    buf, offs, lens, links = _mixed(4, 2000)
    want = engine.verify_batch(buf, offs, lens, links)
    results = []

    def run() -> None:
        results.append(engine.verify_batch(buf, offs, lens, links))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for got in results:
        assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))


@settings(max_examples=200, **SETTINGS)
@given(data=st.data())
def test_fix_then_verify(crc, data):
    b = data.draw(frames(data.draw(st.sampled_from(KINDS)), max_payload=600))
    broken = bytearray(b.frame)
    for i in range(b.end, b.end + 4):
        broken[i] ^= data.draw(st.integers(0, 255))
    if b.vcrc_at >= 0:
        broken[b.vcrc_at] ^= 0xFF
    crc.fix(broken, b.link)
    assert bytes(broken) == b.frame
    verdict = crc.verify(broken, b.link)
    assert verdict.icrc_ok is True and verdict.vcrc_ok in (None, True)
    arr = np.frombuffer(bytearray(b.frame), np.uint8).copy()
    arr[b.end] ^= 1
    crc.fix(arr, b.link)  # any writable buffer
    assert arr.tobytes() == b.frame

"""Known answers: CRC check values, the 49 vectors of vectors.json, the twin selection.

tests/data/vectors.json (its sources in tests/data/README.md), and where the shared facts
are, the 43 native IB frames captured by an Endace DAG card (ICRC and VCRC: their capture has
no licence, so they are not shipped); the ConnectX-4 Lx CNP and the RoCEv1/RoCEv2
frames of scapy's test/contrib/roce.uts, and one disputed frame (known_bad). Provenance per
vector in the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import pytest

import ibwire.crc
from ibwire.crc import _common, _python
from tests.corpus import UNSHIPPED_VECTORS, load_vectors
from tests.crc.crc_frames import crc16_reference

VECTORS = load_vectors()
GOOD = [v for v in VECTORS if not v["known_bad"]]
BAD = [v for v in VECTORS if v["known_bad"]]
KIND_OF = {"ib_lrh": "ib_lrh", "ib_grh": "ib_grh", "rocev1": "rocev1",
           "rocev2_ipv4": "rocev2_ipv4", "rocev2_ipv6": "rocev2_ipv6"}


def _frame(v: dict) -> tuple[bytes, str]:
    link = "infiniband" if v["starts_with"] == "LRH" else "ethernet"
    return bytes.fromhex(v["packet_hex"]), link


def test_vector_counts():
    native = 43 if UNSHIPPED_VECTORS.is_file() else 0  # the Endace frames: shared/ only
    assert len(GOOD) == 5 + native and len(BAD) == 1
    assert sum(v["starts_with"] == "LRH" for v in GOOD) == native
    assert all(v["expected_vcrc"] for v in GOOD if v["starts_with"] == "LRH")


def test_check_values(crc):
    assert crc.crc32(b"123456789") == 0xCBF43926
    assert crc.crc16(b"123456789") == 0x0A3D
    assert crc.crc32(b"") == 0 and crc.crc16(b"") == 0
    assert crc.crc32(b"6789", crc.crc32(b"12345")) == 0xCBF43926


LENGTHS = [*range(0, 700), 1023, 1024, 1025, 4095, 4096, 4097, 65536, 70000]
DATA = bytes((i * 131 + 7) & 0xFF for i in range(70000))


def test_crc32_matches_zlib(crc):
    for n in LENGTHS:
        chunk = DATA[:n]
        assert crc.crc32(chunk) == zlib.crc32(chunk), n
        assert crc.crc32(chunk, 0x12345678) == zlib.crc32(chunk, 0x12345678), n


def test_crc32_every_backend(engine, backend):
    for n in LENGTHS:
        for start in (0, 1, 13):
            chunk = memoryview(DATA)[start:start + n]
            assert engine.crc32(chunk, n) == zlib.crc32(chunk, n), (backend, start, n)


def test_crc16_matches_reference(crc):
    data = bytes((i * 97 + 3) & 0xFF for i in range(1200))
    for n in [*range(0, 70), 255, 256, 1000, 1200]:
        assert crc.crc16(data[:n]) == crc16_reference(data[:n]), n


@pytest.mark.parametrize("v", GOOD, ids=[v["id"] for v in GOOD])
def test_good_vector(crc, v):
    frame, link = _frame(v)
    verdict = crc.verify(frame, link)
    icrc = int(v["expected_icrc"], 16)
    assert verdict.icrc_ok is True
    assert verdict.icrc_computed == verdict.icrc_wire == icrc
    assert crc.icrc(frame, link) == icrc
    assert icrc.to_bytes(4, "little").hex() == v["expected_icrc_wire_bytes"]
    span = crc.locate(frame, link)
    assert span.kind == KIND_OF[v["encapsulation"]]
    assert frame[span.icrc:span.icrc + 4].hex() == v["expected_icrc_wire_bytes"]
    if v["expected_vcrc"]:
        vcrc = int(v["expected_vcrc"], 16)
        assert verdict.vcrc_ok is True and verdict.vcrc_computed == vcrc
        assert crc.vcrc(frame) == vcrc
        assert frame[span.vcrc:span.vcrc + 2].hex() == v["expected_vcrc_wire_bytes"]
    else:
        assert verdict.vcrc_ok is None and verdict.vcrc_computed is None and span.vcrc == -1


def test_known_bad_vector(crc):
    (v,) = BAD
    frame, link = _frame(v)
    verdict = crc.verify(frame, link)
    assert verdict.icrc_ok is False
    assert verdict.icrc_wire == int(v["expected_icrc"], 16)
    assert verdict.icrc_computed == 0xEF1BFCDA  # what crc.md says it computes


def test_vectors_on_every_backend(engine, backend):
    for v in GOOD:
        frame, link = _frame(v)
        assert engine.icrc(frame, link) == int(v["expected_icrc"], 16), (backend, v["id"])


def test_a_flipped_bit_fails(crc):
    for v in GOOD[::7]:
        frame, link = _frame(v)
        span = crc.locate(frame, link)
        broken = bytearray(frame)
        broken[span.icrc - 1] ^= 0x10
        assert crc.verify(bytes(broken), link).icrc_ok is False


def test_implementation_is_c():
    if os.environ.get("IBWIRE_NO_EXTENSIONS") == "1":
        assert ibwire.crc.implementation == "python"
    else:
        assert ibwire.crc.implementation == "c", "the C engine did not load"
        assert ibwire.crc.icrc.__module__ != _python.__name__


def test_no_extensions_env_forces_the_twin():
    code = "import ibwire.crc as c; print(c.implementation, c.icrc.__module__)"
    env = {**os.environ, "IBWIRE_NO_EXTENSIONS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["python", "ibwire.crc._python"]


def test_twins_export_the_same_names(engine):
    assert sorted(engine.__all__) == sorted(_python.__all__)
    for name in _python.__all__:
        assert hasattr(engine, name) and hasattr(ibwire.crc, name), name


def test_site_tables_agree(engine):
    assert engine.SITES == _common.SITES


def test_backend_names(engine):
    assert engine.crc32_backend() in ("vpclmulqdq", "pclmulqdq", "slice-by-8")
    assert engine.set_crc32_backend("no-such-thing") is False

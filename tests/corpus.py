"""Where the tests' material is: the facts shipped in ``tests/data`` (test vectors, the opcode
table; their sources in ``tests/data/README.md``) and the corpus of real captures that is not
shipped (most have no licence), found at ``$IBWIRE_SHARED/captures`` (default: ``shared``
beside the project's folder).

A test that needs the corpus is skipped with one line naming ``IBWIRE_SHARED`` when it is
absent; with ``IBWIRE_REQUIRE_SHARED=1`` (as ``.ci/run`` sets) its absence stops the session
instead (``tests/conftest.py``). The one definition of these paths: every test imports them
from here.
"""

from __future__ import annotations

import csv
import json
import os
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SHARED_ENV = "IBWIRE_SHARED"
REQUIRE_ENV = "IBWIRE_REQUIRE_SHARED"
SHARED = Path(os.environ.get(SHARED_ENV) or ROOT.parent / "shared")
CAPTURES = SHARED / "captures"
PROVENANCE = CAPTURES / "PROVENANCE.tsv"
PRESENT = PROVENANCE.is_file()
MISSING = (f"shared captures not found at {CAPTURES}: set {SHARED_ENV} to the folder holding "
           f"captures/ to run this test")
CAPTURE_SUFFIXES = (".pcap", ".pcapng")
ERF_CAPTURE = CAPTURES / "softroce-demo_infiniband.pcap"
"""The corpus's native InfiniBand capture (ERF records in a LINKTYPE_ERF pcap)."""
RDMA_CM = CAPTURES / "linlinw5-rdma_ib_tutorial_rdma_cm.pcap"
"""The corpus's RDMA CM capture (CM MADs over RoCEv2)."""

needs_shared = pytest.mark.skipif(not PRESENT, reason=MISSING)
"""Mark of a test (or ``pytestmark`` of a module) that reads the shared captures."""


def required() -> bool:
    """Whether the shared captures must be there (``IBWIRE_REQUIRE_SHARED=1``)."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def skip_missing() -> NoReturn:
    """Inside a test or fixture that has found no shared captures: skip it (fail it when they
    are required)."""
    if required():
        pytest.fail(MISSING)
    pytest.skip(MISSING)


def captures(suffixes: tuple[str, ...] = CAPTURE_SUFFIXES) -> list[Path]:
    """The shared captures whose names end with one of ``suffixes``, sorted; none when the
    corpus is absent."""
    if not CAPTURES.is_dir():
        return []
    return sorted(p for p in CAPTURES.iterdir() if p.suffix in suffixes)


def capture(name: str) -> Path:
    """The shared capture ``name`` (it may be absent: mark its test ``needs_shared``)."""
    return CAPTURES / name


def params(items: list[Any]) -> list[Any]:
    """``items`` for ``pytest.mark.parametrize``, or, when the corpus is absent (and
    ``items`` empty), one parameter that skips with :data:`MISSING`."""
    if items or PRESENT:
        return items
    return [pytest.param(None, marks=needs_shared, id="no-shared-captures")]


@cache
def provenance_rows() -> tuple[dict[str, str], ...]:
    """The rows of the corpus's PROVENANCE.tsv (file, source, licence, counts); none when
    absent."""
    if not PRESENT:
        return ()
    with open(PROVENANCE, encoding="utf-8", newline="") as fh:
        return tuple(csv.DictReader(fh, delimiter="\t"))


#: The vectors of a capture without a licence (the 43 native IB frames of an Endace capture):
#: not shipped, read from the shared reference facts when they are there.
UNSHIPPED_VECTORS = SHARED / "reference" / "vectors.json"


@cache
def _vectors() -> tuple[dict[str, Any], ...]:
    shipped = json.loads((DATA / "vectors.json").read_text(encoding="utf-8"))["vectors"]
    if not UNSHIPPED_VECTORS.is_file():
        return tuple(shipped)
    known = {v["id"] for v in shipped}
    more = json.loads(UNSHIPPED_VECTORS.read_text(encoding="utf-8"))["vectors"]
    return tuple(shipped + [v for v in more if v["id"] not in known])


def load_vectors() -> list[dict[str, Any]]:
    """The ICRC/VCRC test vectors: those shipped in ``tests/data/vectors.json`` (scapy's, with
    their licence) and, where the shared reference facts are, the hardware-captured native IB
    frames they hold (not shipped: their capture has no licence)."""
    return list(_vectors())


def vector_link(vector: dict[str, Any]) -> str:
    return "infiniband" if vector["starts_with"] == "LRH" else "ethernet"

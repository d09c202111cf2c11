"""An export of every shared capture, made once per session (with ``ibwire export``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CAPTURES
from tests.export.helpers import run

pytest.importorskip("pyarrow")


def shared_captures() -> list[Path]:
    found = sorted(p for p in CAPTURES.glob("*") if p.suffix in (".pcap", ".pcapng", ".erf"))
    if not found:
        pytest.fail(f"no shared captures under {CAPTURES} (set IBWIRE_SHARED)")
    return found


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every shared capture exported with other traffic, the ``--qp`` table, two jobs."""
    out = tmp_path_factory.mktemp("export") / "ds"
    status, _, err = run("export", "--all", "--qp", "-j", "2", "-o", str(out),
                         *map(str, shared_captures()))
    assert status == 0, err
    return out


@pytest.fixture(scope="session")
def client():
    """A Dask LocalCluster of two workers (threads of this process), for the session."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c

"""An export of every shared capture, made once per session (with ``ibwire export``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import corpus
from tests.export.helpers import run

pytest.importorskip("pyarrow")


SUFFIXES = (".pcap", ".pcapng", ".erf")


def shared_captures() -> list[Path]:
    """The shared captures, for parametrize (one skipping parameter when they are absent)."""
    return corpus.params(corpus.captures(SUFFIXES))


@pytest.fixture(scope="session")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every shared capture exported with other traffic, the ``--qp`` table, two jobs."""
    if not corpus.PRESENT:
        corpus.skip_missing()
    out = tmp_path_factory.mktemp("export") / "ds"
    status, _, err = run("export", "--all", "--qp", "-j", "2", "-o", str(out),
                         *map(str, corpus.captures(SUFFIXES)))
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

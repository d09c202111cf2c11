"""The observer's two twins (``ibwire.transport._observer``, compiled, and
``_observer_python``) give byte-identical outputs: ``ibwire qp`` as text, JSON and CSV and
``ibwire export --qp``'s connections dataset, on every shipped capture, every capture of the
shared corpus, and generated captures with every fault kind at every tap."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from unittest import mock

import pytest

from ibwire.analysis import connections
from ibwire.cli.main import main
from ibwire.gen import Fault, QpSpec, Scenario, write_pcap
from ibwire.transport.observed import observer_on
from tests import corpus
from tests.transport.test_observer import compiled

SHIPPED = sorted((corpus.ROOT / "captures").glob("**/*.pcap"))
#: A fault of every kind at a rate (an RNR NAK names its QP and PSN).
FAULTS = (Fault("drop", rate=0.05), Fault("corrupt", rate=0.03), Fault("lose_ack", rate=0.1),
          Fault("ecn", rate=0.2), Fault("ecn_resp", rate=0.2), Fault("rnr", 0, 7, timer=3))


def outputs(path: Path, tmp: Path, twin: str) -> dict[str, bytes]:
    """qp's three outputs and export's connections files, with the observer of ``twin``."""
    if twin == "c":
        compiled()
    observer = observer_on(twin)
    out: dict[str, bytes] = {}
    with mock.patch.object(connections, "Observed", observer):
        for flags in ([], ["--json"], ["--csv"]):
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                rc = main(["qp", str(path), *flags])
            out[f"qp {flags} {rc}"] = text.getvalue().encode()
        target = tmp / twin
        rc = main(["export", str(path), "-o", str(target), "--qp", "--fields", "bth",
                   "--format", "csv"])
        out[f"export {rc}"] = b""
        for f in sorted(target.rglob("*")):
            if f.is_file() and "connections" in f.parts:
                out[str(f.relative_to(target))] = f.read_bytes()
    return out


def same(path: Path, tmp: Path) -> None:
    c, python = outputs(path, tmp, "c"), outputs(path, tmp, "python")
    assert c.keys() == python.keys()
    for k in c:
        assert c[k] == python[k], k
    assert any(k.startswith("connections") or "/connections" in k for k in c), c.keys()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_captures(path, tmp_path):
    same(path, tmp_path)


@pytest.mark.parametrize("path", corpus.params(corpus.captures()),
                         ids=lambda p: getattr(p, "name", "none"))
def test_corpus_captures(path, tmp_path):
    same(path, tmp_path)


@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.kind)
def test_generated_with_each_fault(fault, tap, tmp_path):
    qps = (QpSpec("write", 5000, iters=30, mtu=1024, start_psn=0xFFFF00, timeout=6),
           QpSpec("send", 3000, iters=20, mtu=512, timeout=6),
           QpSpec("read", 9000, iters=12, mtu=2048, timeout=6),
           QpSpec("fetch_add", iters=20, timeout=6))
    if fault.kind == "rnr":  # RNR NAKs answer SENDs and WRITEs
        qps = qps[:2]
    path = tmp_path / "lossy.pcap"
    write_pcap(str(path), Scenario(qps=qps, faults=(fault,), tap=tap, seed=3))
    same(path, tmp_path)

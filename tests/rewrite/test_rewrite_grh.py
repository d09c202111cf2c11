"""``--dscp``/``--ecn`` on the GRH traffic class of RoCEv1 and of native InfiniBand packets
with a GRH: the class changes, the ICRC (which masks it) is kept, the VCRC is recomputed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ibwire import crc
from ibwire.cli.main import main
from ibwire.errors import IbwireError
from tests.corpus import ROOT
from tests.rewrite.frames import frames


def _tool(name: str) -> object:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import mixed_capture
    finally:
        sys.path.pop(0)
    return getattr(mixed_capture, name)


def _grh_at(link: str, frame: bytes) -> int | None:
    """Offset of the GRH of a RoCEv1 or LNH-3 native IB packet, else None."""
    try:
        span = crc.locate(frame, link)
    except IbwireError:
        return None
    if span.kind == "ib_grh":
        return 8
    if span.kind == "rocev1":
        return span.bth - 40
    return None


@pytest.mark.parametrize("kind", ["ethernet", "infiniband"])
def test_dscp_ecn_on_the_grh(kind: str, tmp_path: Path) -> None:
    write = _tool("write_ethernet" if kind == "ethernet" else "write_infiniband")
    src = write(tmp_path / "in.pcap", 1500)  # type: ignore[operator]
    out, report = tmp_path / "out.pcap", tmp_path / "r.jsonl"
    assert main(["rewrite", str(src), str(out), "--dscp", "46", "--ecn", "1",
                 "--report", str(report)]) == 0
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    edited = 0
    for (link, a), (_, b), line in zip(frames(src), frames(out), lines, strict=True):
        at = _grh_at(link, a)
        if at is None:
            continue
        before = crc.verify(a, link)
        old, new = (int.from_bytes(f[at:at + 4], "big") for f in (a, b))
        assert new >> 20 & 0xFF == 46 << 2 | 1
        assert old & 0xF00FFFFF == new & 0xF00FFFFF  # version and flow label kept
        span = crc.locate(b, link)
        if before.icrc_ok:
            assert a[span.icrc:span.icrc + 4] == b[span.icrc:span.icrc + 4]  # masked
            verdict = crc.verify(b, link)
            assert verdict.icrc_ok and verdict.vcrc_ok is not False
            assert line["icrc"] == "kept"
        if old != new:
            assert "grh.tclass" in line["changed"]
            edited += 1
    assert edited > 20

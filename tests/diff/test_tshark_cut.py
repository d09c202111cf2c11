"""tshark on headers-only captures: the header fields tshark decodes from a capture cut by a
snap length equal ibwire's on the same capture (``show --json``), field by field.

The whole-capture comparison (``test_tshark.py``) models every field, payload and expert
item; here only the headers a snap length keeps are compared: the Ethernet, IP, UDP, LRH,
GRH and transport header fields, of the shipped samples and a generated lossy conversation,
cut at several snap lengths. A field either side leaves out (a header past the bytes kept)
is not compared; the test counts what it compared so that it cannot pass by comparing
nothing. Native IB goes to tshark as ERF (it cannot open LINKTYPE_INFINIBAND).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ibwire.pcap import infiniband_to_erf
from ibwire.pcap.snap import snap_capture
from tests.cli.test_malformed import cli
from tests.corpus import ROOT

#: tshark field -> ibwire's key (show --json); numbers compared as integers, addresses as text.
FIELDS = {
    "ip.src": "ip.src", "ip.dst": "ip.dst", "ip.len": "ip.len", "ip.ttl": "ip.ttl",
    "ipv6.src": "ipv6.src", "ipv6.dst": "ipv6.dst", "ipv6.plen": "ipv6.plen",
    "udp.srcport": "udp.srcport", "udp.length": "udp.length",
    **{f"infiniband.{k}": k for k in (
        "lrh.vl", "lrh.sl", "lrh.lnh", "lrh.dlid", "lrh.slid", "lrh.pktlen",
        "grh.paylen", "grh.nxthdr", "grh.hoplmt", "grh.sgid", "grh.dgid",
        "bth.opcode", "bth.se", "bth.m", "bth.padcnt", "bth.tver", "bth.p_key", "bth.destqp",
        "bth.a", "bth.psn", "deth.q_key", "deth.srcqp", "reth.va", "reth.r_key",
        "reth.dmalen", "aeth.syndrome", "aeth.msn")},
}
SNAPLENS = (64, 96, 128, 256)


@pytest.fixture(scope="module")
def tshark() -> str:
    found = shutil.which("tshark")
    if found is None:
        if os.environ.get("IBWIRE_REQUIRE_TSHARK") == "1":
            pytest.fail("tshark not found (IBWIRE_REQUIRE_TSHARK=1)")
        pytest.skip("tshark not found")
    return found


def _tshark_rows(tshark: str, path: Path) -> dict[int, dict[str, str]]:
    """frame number -> {field: value} of the fields tshark printed."""
    names = ["frame.number", *FIELDS]
    out = subprocess.run([tshark, "-r", str(path), "-T", "fields", "-E", "separator=\t",
                          "-E", "occurrence=f", *(arg for n in names for arg in ("-e", n))],
                         capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        values = line.split("\t")
        rows[int(values[0])] = {n: v for n, v in zip(names[1:], values[1:], strict=True) if v}
    return rows


def _same(theirs: str, mine: object) -> bool:
    if isinstance(mine, int):
        return int(theirs, 0) == mine
    return str(theirs).lower() == str(mine).lower()


def _captures(tmp_path: Path) -> list[tuple[str, Path]]:
    lossy = tmp_path / "lossy.pcap"
    status = cli("gen", "-o", lossy, "--verb", "read", "--size", "8192", "--iters", "20",
                 "--drop", "rate=0.05", "--seed", "7", "--no-progress")
    assert status.status == 0, status
    erf = tmp_path / "ib-erf.pcap"
    infiniband_to_erf(ROOT / "captures" / "sample-ib.pcap", erf)
    return [("rocev2", ROOT / "captures" / "sample-rocev2.pcap"), ("lossy-read", lossy),
            ("ib-erf", erf)]


@pytest.mark.parametrize("snaplen", SNAPLENS)
def test_tshark_reads_the_headers_a_snap_length_kept_as_ibwire_does(
        tmp_path: Path, tshark: str, snaplen: int) -> None:
    compared = cut_packets = 0
    for name, source in _captures(tmp_path):
        cut = tmp_path / f"{name}-{snaplen}.pcap"
        snap_capture(source, cut, snaplen)
        theirs = _tshark_rows(tshark, cut)
        mine = [json.loads(line) for line in cli("show", "--json", cut).lines]
        assert len(mine) == len(theirs), name
        for row in mine:
            cut_packets += bool(row.get("cut"))
            fields = theirs[row["frame"]]
            for field, key in FIELDS.items():
                if field in fields and key in row:
                    assert _same(fields[field], row[key]), (name, row["frame"], field,
                                                            fields[field], row[key])
                    compared += 1
    assert cut_packets > 0 and compared > 10 * cut_packets, (cut_packets, compared)

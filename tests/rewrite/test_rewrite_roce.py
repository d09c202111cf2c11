"""``ibwire rewrite`` on RoCE and native InfiniBand captures: every option, every ICRC.

Each option set runs on the sample captures and on shared real captures; every packet of every
output that has an ICRC must verify by ibwire's engine and, for RoCEv2 over Ethernet, by
scapy's contrib roce. The edited fields are checked against the input, field by field.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ibwire import crc
from ibwire.cli.main import main
from ibwire.errors import IbwireError
from tests import corpus
from tests.corpus import ERF_CAPTURE, RDMA_CM, ROOT, needs_shared
from tests.rewrite.frames import frames, icrc_verdicts, scapy_icrc_ok

SAMPLES = ROOT / "captures"
OPTION_SETS: dict[str, list[str]] = {
    "srcipmap": ["--srcipmap", "10.0.0.0/8:192.168.0.0/16"],
    "dstipmap": ["--dstipmap", "10.0.0.2/32:10.7.7.7,10.1.16.61:10.1.99.61"],
    "pnat-v4-v6": ["--pnat", "10.0.0.0/8:172.16.0.0/12,[fd00::/16]:[fd99::/32]"],
    "portmap": ["--portmap", "4791:4791,1-4790:5000"],
    "mac": ["--enet-smac", "02:aa:bb:cc:dd:01", "--enet-dmac", "02:aa:bb:cc:dd:02"],
    "vlan-add": ["--enet-vlan", "add", "--enet-vlan-tag", "100", "--enet-vlan-pri", "3"],
    "ttl": ["--ttl", "-3"],
    "tos": ["--tos", "0x60"],
    "tclass-flowlabel": ["--tclass", "0x20", "--flowlabel", "0x12345"],
    "dscp-ecn": ["--dscp", "26", "--ecn", "3"],
    "qpmap": ["--qpmap", "0x22:0x122,0x11:0x111,0x44:0x144,0x40:0x1040"],
    "psn-offset": ["--psn-offset", "0xfffff0"],
    "psn-offset-qp": ["--psn-offset", "0x22:1000"],
    "pkey": ["--pkey", "0x8001"],
    "lid-gid": ["--lidmap", "1:0x11,2:0x12", "--gidmap", "fe80::1=fe80::11"],
    "fixcsum": ["--fixcsum"],
}
MASKED = ("mac", "vlan-add", "ttl", "tos", "tclass-flowlabel", "dscp-ecn")
"""Edits outside the ICRC (Ethernet) or of the fields it masks: the ICRC must be kept."""
SAMPLE_FILES = [SAMPLES / "sample-rocev2.pcap", SAMPLES / "sample-ib.pcap"]
SHARED_FILES = [corpus.capture("linlinw5-rdma_ib_tutorial_rdma_read_bw.pcap"),
                corpus.capture("linlinw5-rdma_ib_tutorial_pingpong_ud.pcap"),
                corpus.capture("sanderw71-SoftRoce_Frame_req_and_response.pcapng"), ERF_CAPTURE,
                RDMA_CM]
CAPTURE_FILES = [*SAMPLE_FILES, *SHARED_FILES]
GOLDEN = Path(__file__).with_name("golden.json")


def rewrite(src: Path, dst: Path, *argv: str) -> list[dict]:
    report = dst.with_suffix(".jsonl")
    assert main(["rewrite", str(src), str(dst), "--report", str(report), *argv]) == 0
    return [json.loads(line) for line in report.read_text().splitlines()]


def bth_fields(link: str, frame: bytes) -> tuple[int, int, int, int] | None:
    """(opcode, P_Key, destination QP, PSN), or None."""
    try:
        span = crc.locate(frame, link)
    except IbwireError:
        return None
    b = span.bth
    return (frame[b], int.from_bytes(frame[b + 2:b + 4], "big"),
            int.from_bytes(frame[b + 5:b + 8], "big"), int.from_bytes(frame[b + 9:b + 12], "big"))


@pytest.mark.parametrize("capture", [*SAMPLE_FILES, *(pytest.param(p, marks=needs_shared)
                                                      for p in SHARED_FILES)],
                         ids=lambda p: p.name)
@pytest.mark.parametrize("name", sorted(OPTION_SETS))
def test_every_icrc_of_every_output_verifies(capture: Path, name: str, tmp_path: Path) -> None:
    if not capture.exists():
        pytest.fail(f"{capture} missing (set IBWIRE_SHARED)")
    out = tmp_path / ("out" + capture.suffix)
    before = icrc_verdicts(capture)
    report = rewrite(capture, out, *OPTION_SETS[name])
    after = icrc_verdicts(out)
    assert len(after) == len(before) == len(report)
    for i, (was, now) in enumerate(zip(before, after, strict=True)):
        assert (was is None) == (now is None), f"packet {i}: ICRC appeared or vanished"
        assert now is not False, f"packet {i}: ICRC wrong after {name} ({report[i]})"
    scapy_checked = 0
    for link, frame in frames(out):
        if link == "ethernet":
            verdict = scapy_icrc_ok(frame)
            assert verdict is not False, f"scapy disagrees on {frame.hex()}"
            scapy_checked += verdict is True
    if name in MASKED:
        changed = [r for r in report if r["changed"] and r["icrc"] != "none"]
        assert all(r["icrc"] == "kept" for r in changed), changed
        for (_, a), (_, b) in zip(frames(capture), frames(out), strict=True):
            if bth_fields("ethernet", a) and not name.startswith("vlan"):
                assert a[-4:] == b[-4:]


def test_scapy_checked_real_rocev2(tmp_path: Path) -> None:
    """The scapy cross-check above is not vacuous: it sees every RoCEv2 frame of the sample."""
    out = tmp_path / "o.pcap"
    rewrite(SAMPLES / "sample-rocev2.pcap", out, *OPTION_SETS["qpmap"])
    verdicts = [scapy_icrc_ok(f) for _, f in frames(out)]
    assert verdicts.count(True) == 20
    broken = bytearray(frames(out)[0][1])
    broken[-10] ^= 1
    assert scapy_icrc_ok(bytes(broken)) is False


def test_qpmap_and_psn_offset_with_wrap(tmp_path: Path) -> None:
    src = SAMPLES / "sample-rocev2.pcap"
    out = tmp_path / "o.pcap"
    rewrite(src, out, "--qpmap", "0x22:0x122,0x44:0x144", "--psn-offset", "0xfffff0")
    for (link, a), (_, b) in zip(frames(src), frames(out), strict=True):
        old, new = bth_fields(link, a), bth_fields(link, b)
        if old is None:
            assert a == b
            continue
        assert new[2] == {0x22: 0x122}.get(old[2], old[2])
        expected_psn = old[3] if old[0] == 0x81 else (old[3] + 0xFFFFF0) & 0xFFFFFF
        assert new[3] == expected_psn
        if old[0] == 0x64:  # UD SEND ONLY: DETH source QP 0x44
            deth = crc.locate(b, link).bth + 12
            assert int.from_bytes(b[deth + 5:deth + 8], "big") == 0x144


def test_psn_offset_of_one_qp_moves_its_responses_too(tmp_path: Path) -> None:
    """Requests to QP 0x22 and the ACKs/READ responses going back (to QP 0x11) carry the same
    PSN space: both move; the UD and IPv6 QPs do not."""
    src = SAMPLES / "sample-rocev2.pcap"
    out = tmp_path / "o.pcap"
    rewrite(src, out, "--psn-offset", "0x22:1000")
    moved = {0x22: 0, 0x11: 0}
    for (link, a), (_, b) in zip(frames(src), frames(out), strict=True):
        old, new = bth_fields(link, a), bth_fields(link, b)
        if old is None or old[0] == 0x81:
            continue
        if old[2] in moved:
            assert new[3] == old[3] + 1000
            moved[old[2]] += 1
        else:
            assert new[3] == old[3]
    assert moved[0x22] and moved[0x11]


def test_native_ib_lid_gid_pkey(tmp_path: Path) -> None:
    src = SAMPLES / "sample-ib.pcap"
    out = tmp_path / "o.pcap"
    report = rewrite(src, out, "--lidmap", "1:0x11", "--gidmap", "fe80::1=fe80::11",
                     "--pkey", "0x8001")
    for (link, a), (_, b) in zip(frames(src), frames(out), strict=True):
        assert crc.verify(b, link).vcrc_ok is True
        assert bth_fields(link, b)[1] == 0x8001
        slid, dlid = int.from_bytes(a[6:8], "big"), int.from_bytes(a[2:4], "big")
        assert int.from_bytes(b[6:8], "big") == {1: 0x11}.get(slid, slid)
        assert int.from_bytes(b[2:4], "big") == {1: 0x11}.get(dlid, dlid)
    assert bytes.fromhex("fe800000000000000000000000000011") == frames(out)[2][1][16:32]
    assert all(r["icrc"] == "recomputed" for r in report)


def test_bad_icrc_fixed_by_default_kept_on_request(tmp_path: Path) -> None:
    src = SAMPLES / "sample-corrupt.pcap"
    before = icrc_verdicts(src)
    bad = [i for i, v in enumerate(before) if v is False]
    assert bad
    fixed = rewrite(src, tmp_path / "a.pcap", "--ttl", "9")
    kept = rewrite(src, tmp_path / "b.pcap", "--ttl", "9", "--qpmap", "1:2",
                   "--keep-bad-icrc")
    after_fixed, after_kept = icrc_verdicts(tmp_path / "a.pcap"), icrc_verdicts(tmp_path / "b.pcap")
    for i in bad:
        assert after_fixed[i] is True and fixed[i]["icrc"] == "bad-fixed"
        assert after_kept[i] is False and kept[i]["icrc"] == "bad-kept"
    good = [i for i, v in enumerate(before) if v is True]
    assert all(after_kept[i] is True for i in good)


def test_twins_give_the_same_bytes(twin: object, tmp_path: Path) -> None:
    """The rewrite through either CRC twin gives the golden output of the sample."""
    digests = json.loads(GOLDEN.read_text())
    for name, argv in OPTION_SETS.items():
        out = tmp_path / f"{name}.pcap"
        rewrite(SAMPLES / "sample-rocev2.pcap", out, *argv)
        frames_only = b"".join(f for _, f in frames(out))
        assert hashlib.sha256(frames_only).hexdigest() == digests[name], name


def test_input_untouched_output_atomic_same_file_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.pcap"
    src.write_bytes((SAMPLES / "sample-rocev2.pcap").read_bytes())
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    rewrite(src, tmp_path / "o.pcap", "--pnat", "10.0.0.0/8:11.0.0.0/8")
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
    assert main(["rewrite", str(src), str(src), "--ttl", "1"]) == 2
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
    assert main(["rewrite", str(src), str(tmp_path / "x.pcap"), "--qpmap", "0x1000000:1"]) == 2
    assert not (tmp_path / "x.pcap").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_summary_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rewrite(SAMPLES / "sample-rocev2.pcap", tmp_path / "o.pcap", "--qpmap", "0x22:0x23")
    err = capsys.readouterr().err
    assert "22 packets, 10 edited; ICRC: 10 kept, 10 recomputed" in err


def test_mtu_trunc_cuts_ip_packets_and_marks_roce_cut(tmp_path: Path) -> None:
    src = SAMPLES / "sample-rocev2.pcap"
    out = tmp_path / "o.pcap"
    report = rewrite(src, out, "--mtu-trunc", "200")
    for (_, a), (_, b), r in zip(frames(src), frames(out), report, strict=True):
        ip_len = len(a) - 14
        if a[12:14] == b"\x08\x00" and ip_len > 200:
            assert len(b) == 214 and int.from_bytes(b[16:18], "big") == 200
            assert r["icrc"] == "cut" and "mtu-trunc" in r["changed"]
        elif ip_len <= 200:
            assert len(b) == len(a)


@needs_shared
def test_qpmap_and_psn_offset_reach_cm_req_and_rep(tmp_path: Path) -> None:
    """The QPNs a CM REQ/REP sets up move with --qpmap, their starting PSNs with
    --psn-offset; the data packets that follow agree (checked against tshark's fields by the
    offsets: REQ Local QPN 0x3d, Starting PSN 0x7cc204; REP Local QPN 0x3b, PSN 0x727d6d)."""
    src = RDMA_CM
    out = tmp_path / "o.pcap"
    report = rewrite(src, out, "--qpmap", "0x3d:0x13d,0x3b:0x13b", "--psn-offset", "0x10")
    (_, req), (_, rep) = frames(out)[:2]
    mad = crc.locate(req, "ethernet").bth + 20 + 24
    assert req[mad + 32:mad + 35] == bytes.fromhex("00013d")
    assert req[mad + 44:mad + 47] == bytes.fromhex("7cc214")
    mad = crc.locate(rep, "ethernet").bth + 20 + 24
    assert rep[mad + 12:mad + 15] == bytes.fromhex("00013b")
    assert rep[mad + 20:mad + 23] == bytes.fromhex("727d7d")
    assert "cm.req.localqpn" in report[0]["changed"] and "cm.rep.startpsn" in report[1]["changed"]
    qps = {bth_fields(link, f)[2] for link, f in frames(out)[3:] if bth_fields(link, f)}
    assert {0x13d, 0x13b} <= qps and not {0x3d, 0x3b} & qps

"""``ibwire gen`` end to end: the capture it writes passes ``ibwire check`` but for the frames
the manifest lists as corrupted, the manifest's counts are what the capture shows, the same
seed gives the same bytes, impossible settings are one-line errors that write nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ibwire
from ibwire.cli.main import main
from ibwire.pcap import open_capture

from .test_gen import COUNTED, recount

FAULTS = ["--drop", "qp=0,psn=2", "--corrupt", "qp=1,psn=3", "--lose-ack", "qp=0,psn=5",
          "--rnr", "qp=1,psn=0,timer=3", "--ecn-mark", "rate=0.2", "--lose-ack", "rate=0.05"]


#: 2026-01-01T00:00:00Z: runs whose bytes are compared pin the start (the default is now).
START = ("--start-time", "1767225600")


def gen(tmp_path: Path, *extra: str, name: str = "out.pcap") -> tuple[Path, dict]:
    out, manifest = tmp_path / name, tmp_path / (name + ".json")
    start = () if "--start-time" in extra else START
    assert main(["gen", "-o", str(out), "--manifest", str(manifest), "--no-progress",
                 "--no-cm", *start, *extra]) == 0
    return out, json.loads(manifest.read_text())


def frames(path: Path) -> list[tuple[int, bytes]]:
    with open_capture(str(path)) as capture:
        return [(r.timestamp_ns, bytes(r.frame)) for r in capture]


@pytest.mark.parametrize("transport", ["rc", "xrc"])
@pytest.mark.parametrize("encap", ["rocev2_ipv4", "rocev2_ipv6", "ib_global"])
def test_check_fails_exactly_the_corrupted_frames(tmp_path, capsys, encap, transport):
    out, manifest = gen(tmp_path, "--iters", "12", "--qps", "3", "--size", "3000",
                        "--encap", encap, "--seed", "9", "--transport", transport, *FAULTS)
    corrupted = {f["record"] for f in manifest["faults"] if f["kind"] == "corrupt"}
    assert corrupted and None not in corrupted
    capsys.readouterr()
    assert main(["check", str(out)]) == 1
    failed = {int(line.split()[2].rstrip(":")) for line in capsys.readouterr().out.splitlines()
              if line.split()[1:2] == ["record"]}
    link = "infiniband" if encap.startswith("ib_") else "ethernet"
    verdicts = [ibwire.parse(f, link=link).verify() for _, f in frames(out)]
    assert {i for i, v in enumerate(verdicts, 1) if not v.icrc_ok} == corrupted
    assert all(v.vcrc_ok is not False for v in verdicts)
    assert failed == corrupted   # check and the manifest both count records from 1
    assert manifest["records"] == len(verdicts)


@pytest.mark.parametrize("transport", ["rc", "xrc"])
def test_manifest_counts_are_what_the_capture_shows(tmp_path, transport):
    out, manifest = gen(tmp_path, "--iters", "20", "--qps", "2", "--size", "2500",
                        "--ack-every", "2", "--tap", "switch", "--transport", transport,
                        *FAULTS)
    records = frames(out)
    assert manifest["version"] == 1 and manifest["records"] == len(records)
    for q, c in zip(manifest["qps"], recount(records, manifest, "rocev2_ipv4"), strict=True):
        assert {key: q[key] for key in COUNTED} == {key: c[key] for key in COUNTED}
        for key in ("requester", "responder", "transport", "verb", "mtu", "start_psn",
                    "messages", "message_bytes", "cm_packets"):
            assert key in q
    assert sum(q["retransmitted_packets"] for q in manifest["qps"]) > 0
    assert sum(q["ecn_ce_packets"] for q in manifest["qps"]) > 0


@pytest.mark.parametrize("transport", ["rc", "xrc"])
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, transport):
    args = ("--iters", "30", "--drop", "rate=0.1", "--ecn-mark", "rate=0.3", "--transport",
            transport)
    a, ma = gen(tmp_path, *args, "--seed", "1", name="a.pcap")
    b, mb = gen(tmp_path, *args, "--seed", "1", name="b.pcap")
    c, _ = gen(tmp_path, *args, "--seed", "2", name="c.pcap")
    assert a.read_bytes() == b.read_bytes() and ma == mb
    assert a.read_bytes() != c.read_bytes()


def test_the_capture_starts_now_unless_start_time_pins_it(tmp_path):
    out = tmp_path / "now.pcap"
    before = time.time_ns()
    assert main(["gen", "-o", str(out), "--no-progress", "--iters", "2"]) == 0
    first = frames(out)[0][0]
    assert before <= first <= time.time_ns()
    iso, _ = gen(tmp_path, "--start-time", "2026-01-02T03:04:05.25Z", name="iso.pcap")
    epoch, _ = gen(tmp_path, "--start-time", "1767323045.25", name="epoch.pcap")
    assert frames(iso)[0][0] == 1_767_323_045_250_000_000
    assert iso.read_bytes() == epoch.read_bytes()


@pytest.mark.parametrize("when", ["yesterday", "nan", "-1"])
def test_a_bad_start_time_is_a_clear_error(tmp_path, capsys, when):
    try:
        code = main(["gen", "-o", str(tmp_path / "x.pcap"), "--start-time", when])
    except SystemExit as exc:
        code = exc.code
    assert code not in (0, None)
    assert "start time" in capsys.readouterr().err.replace("-", " ")
    assert not (tmp_path / "x.pcap").exists()


def test_a_psn_without_qp_is_the_only_qps(tmp_path, capsys):
    _, manifest = gen(tmp_path, "--iters", "3", "--drop", "psn=0")
    assert [(f["kind"], f["qp"]) for f in manifest["faults"]] == [("drop", 0)]
    assert manifest["faults"][0]["psn"] == manifest["qps"][0]["start_psn"]
    assert main(["gen", "-o", str(tmp_path / "two.pcap"), "--qps", "2",
                 "--drop", "psn=0"]) == 2
    assert "add qp=K (0..1)" in capsys.readouterr().err


def test_pcapng_holds_the_same_frames(tmp_path):
    a, _ = gen(tmp_path, "--iters", "5", "--verb", "read", "--size", "5000", name="a.pcap")
    b, _ = gen(tmp_path, "--iters", "5", "--verb", "read", "--size", "5000", name="b.pcapng")
    assert b.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    assert frames(a) == frames(b)


def test_vlan_dscp_ecn_settings_reach_the_frames(tmp_path):
    out, _ = gen(tmp_path, "--iters", "3", "--vlan", "100:5", "--vlan", "7", "--dscp", "10",
                 "--ecn", "1", "--ecn-mark", "qp=0,psn=1", "--tap", "responder",
                 "--cnp-dscp", "40")
    seen = [ibwire.parse(f).fields() for _, f in frames(out)]
    assert all(f["vlan.id"] == (100, 7) and f["vlan.priority"] == (5, 0) for f in seen)
    data = [f for f in seen if f["bth.opcode"] != 0x81]
    cnps = [f for f in seen if f["bth.opcode"] == 0x81]
    assert all(f["ip.dsfield.dscp"] == 10 for f in data)
    assert sorted(f["ip.dsfield.ecn"] for f in data).count(3) == 1
    assert {f["ip.dsfield.ecn"] for f in data} == {1, 3}
    assert [f["ip.dsfield.dscp"] for f in cnps] == [40]


@pytest.mark.parametrize("srq", [None, "0x4242"])
def test_xrc_requests_name_the_srq_and_qp_reports_xrc(tmp_path, capsys, srq):
    """``--transport xrc``: XRC opcodes, an XRCETH with the SRQ (``--xrc-srq``, else 0x200 +
    the QP's position) on every request and on nothing else; the CM REQ says XRC (type 3,
    extended type 1); ``ibwire qp`` reports XRC with the manifest's counts."""
    out, manifest = tmp_path / "x.pcap", tmp_path / "x.json"
    extra = ["--xrc-srq", srq] if srq else []
    assert main(["gen", "-o", str(out), "--manifest", str(manifest), "--no-progress",
                 "--transport", "xrc", "--qps", "2", "--iters", "3", "--size", "2500",
                 "--drop", "qp=1,psn=2", *extra]) == 0
    m = json.loads(manifest.read_text())
    requesters = {q["responder"]["qpn"]: k for k, q in enumerate(m["qps"])}
    seen = [ibwire.parse(f).fields() for _, f in frames(out)]
    data = [f for f in seen if f["bth.destqp"] != 1]
    cm = [f for f in seen if f["bth.destqp"] == 1]
    assert {f["bth.opcode"] >> 5 for f in data} == {5}            # 0xA0-0xBF: XRC
    for f in data:
        k = requesters.get(f["bth.destqp"])
        if k is None:
            assert "xrceth.xrcsrq" not in f                         # answers carry none
        else:
            assert f["xrceth.xrcsrq"] == (int(srq, 0) if srq else 0x200 + k)
    reqs = [f for f in cm if "cm.req.transpsvctype" in f]
    assert [(f["cm.req.transpsvctype"], f["cm.req.ext_transport"]) for f in reqs] == [(3, 1)] * 2
    capsys.readouterr()
    assert main(["check", str(out)]) == 0
    capsys.readouterr()
    main(["qp", "--json", str(out)])
    lines = capsys.readouterr().out.splitlines()
    got = {d["responder"]["qpn"]: d for d in map(json.loads, lines)}
    for q in m["qps"]:
        r = got[q["responder"]["qpn"]]
        assert r["transport"] == q["transport"] == "XRC"
        assert r["requester"] == q["requester"] and r["cm_packets"] == q["cm_packets"] == 5
        assert {k: r[k] for k in COUNTED} == {k: q[k] for k in COUNTED}
    assert m["qps"][1]["naks_psn_seq_error"] == 1


@pytest.mark.parametrize("args,message", [
    (["--mtu", "3000"], "path MTU 3000"),
    (["--verb", "read", "--transport", "ud"], "READ"),
    (["--iters", "2", "--drop", "qp=0,psn=2"], "past QP 0's last PSN"),
    (["--verb", "read", "--size", "3000", "--drop", "qp=0,psn=1"], "reserved by a READ"),
    (["--drop", "qp=0"], "psn"),
    (["--rnr", "rate=0.1"], "rnr"),
    (["--drop", "qp=0,psn=x"], "not a number"),
    (["--corrupt", "when=1"], "expected rate=R"),
    (["--encap", "ib_local", "--vlan", "3"], "VLAN"),
    (["--dscp", "64"], "dscp"),
    (["--qps", "0"], "--qps"),
    (["--size", "3000", "--iters", "2", "--lose-ack", "qp=0,psn=3"],
     "no ACK carries PSN offset 3 of QP 0: AckReq is set on the last packet of each message, "
     "so the ACK of offset 5 covers it"),
    (["--size", "3000", "--iters", "2", "--ack-every", "2", "--lose-ack", "qp=0,psn=4"],
     "once every 2 packets (--ack-every), so the ACK of offset 5"),
    (["--transport", "uc", "--lose-ack", "qp=0,psn=0"], "never acknowledged"),
    (["--xrc-srq", "5"], "an XRC SRQ number is for XRC requests, not RC's"),
    (["--transport", "xrc", "--xrc-srq", "0x1000000"], "is not 24 bits"),
    (["--transport", "xrc", "--verb", "read", "--size", "3000", "--drop", "qp=0,psn=1"],
     "reserved by a READ"),
])
def test_impossible_settings_are_one_line_errors(tmp_path, capsys, args, message):
    out = tmp_path / "x.pcap"
    assert main(["gen", "-o", str(out), "--no-cm", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ibwire gen: ") and err.count("\n") == 1 and message in err
    assert os.listdir(tmp_path) == []


def test_start_up_does_not_load_the_generator():
    code = ("import sys; from ibwire.cli.main import parser; parser('gen'); "
            "print(sorted(m for m in sys.modules if m.startswith(('ibwire.gen', "
            "'ibwire.transport', 'numpy', 'construct'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ})
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="mounts a small tmpfs: root only (CI is root)")
def test_a_full_filesystem_is_an_error_not_a_crash(tmp_path):
    """The fast path writes into the file's mapped pages: a disk that fills up must give a
    one-line error (its blocks are reserved before they are mapped), never a SIGBUS, and
    leave nothing behind."""
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)],
                      capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ibwire.cli.main", "gen", "-o", str(small / "x.pcap"),
             "--verb", "write", "--size", "1024", "--iters", "20000", "--no-progress"],
            capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done
        assert done.stderr.strip() == "ibwire gen: No space left on device"
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)], check=True)


@pytest.mark.parametrize("profile, dscp, ecn", [(None, 26, 2), ("dcqcn", 26, 2), ("rxe", 0, 0)])
def test_profile_sets_how_packets_are_marked(tmp_path, profile, dscp, ecn):
    """``--profile``: dcqcn (the default) sends ECT(0) with DSCP 26, rxe (Linux soft-RoCE, as
    the rig showed it) Not-ECT with DSCP 0; ``--dscp``/``--ecn`` still override it."""
    extra = ("--profile", profile) if profile else ()
    out, _ = gen(tmp_path, "--iters", "3", *extra)
    seen = {(f["ip.dsfield.dscp"], f["ip.dsfield.ecn"])
            for f in (ibwire.parse(fr).fields() for _, fr in frames(out))}
    assert seen == {(dscp, ecn)}
    out, _ = gen(tmp_path, "--iters", "3", *extra, "--dscp", "12", "--ecn", "1", name="o.pcap")
    assert {ibwire.parse(fr).fields()["ip.dsfield.ecn"] for _, fr in frames(out)} == {1}


@pytest.mark.parametrize("flags", [("--profile", "rxe"), ("--ecn", "0")])
def test_ecn_marks_of_not_ect_packets_are_refused(tmp_path, capsys, flags):
    """A router never marks a Not-ECT packet CE (RFC 3168 section 5): asking for marks on
    packets sent Not-ECT is a one-line error that writes nothing."""
    out = tmp_path / "n.pcap"
    for mark in ("--ecn-mark", "--ecn-mark-resp"):
        verb = ("--verb", "read") if mark == "--ecn-mark-resp" else ()
        assert main(["gen", "-o", str(out), "--no-progress", *flags, *verb, mark,
                     "rate=0.1"]) == 2
        err = capsys.readouterr().err
        assert "Not-ECT" in err and "--ecn 2" in err and len(err.strip().splitlines()) == 1
        assert not out.exists()

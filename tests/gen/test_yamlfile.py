"""Scenario files: what a YAML flow list says is the scenario generated, and each mistake is
one line naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ibwire.cli.main import main
from ibwire.gen import Fault, Link, QpSpec, Scenario

pytest.importorskip("yaml")

from ibwire.gen.yamlfile import load_scenario

GOOD = """\
seed: 7
encapsulation: rocev2_ipv6
tap: switch
link: {gbps: 25, delay_ns: 500}
dscp: 10
vlans: [{id: 100, priority: 3}]
cnp: {interval_us: 8, scope: ip-pair, dscp: 40}
endpoints:
  responder: {ip6: "2001:db8::2"}
flows:
  - {name: bulk, verb: write, size: 8192, iters: 5, qps: 2, mtu: 4096}
  - {verb: read, size: 3000, iters: 4, transport: rc, start_psn: 0xFFFFF0}
  - {verb: send, size: 256, iters: 5, transport: ud}
  - {verb: write, size: 2000, iters: 3, transport: xrc, xrc_srq: 0x40}
faults:
  - {kind: drop, qp: 0, psn: 3}
  - {kind: ecn, rate: 0.05}
  - {kind: rnr, qp: 2, psn: 3, timer: 3}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return path


def test_the_file_is_the_scenario(tmp_path):
    scenario = load_scenario(write(tmp_path, GOOD))
    bulk = QpSpec("write", 8192, iters=5, mtu=4096)
    assert scenario.qps == (bulk, bulk, QpSpec("read", 3000, iters=4, start_psn=0xFFFFF0),
                            QpSpec("send", 256, iters=5, transport="UD"),
                            QpSpec("write", 2000, iters=3, transport="XRC", xrc_srq=0x40))
    assert scenario.faults == (Fault("drop", 0, 3), Fault("ecn", rate=0.05),
                               Fault("rnr", 2, 3, timer=3))
    assert (scenario.seed, scenario.encapsulation, scenario.tap, scenario.dscp) == (
        7, "rocev2_ipv6", "switch", 10)
    assert scenario.link == Link(25, 500) and scenario.vlans == ((100, 3),)
    assert (scenario.cnp_interval_us, scenario.cnp_scope, scenario.cnp_dscp) == (8, "ip-pair", 40)
    assert scenario.responder.ip6 == "2001:db8::2" and scenario.requester == Scenario.requester


def test_cli_generates_the_file(tmp_path, capsys):
    out, manifest = tmp_path / "out.pcap", tmp_path / "out.json"
    assert main(["gen", str(write(tmp_path, GOOD)), "-o", str(out), "--manifest",
                 str(manifest), "--no-progress", "--no-cm"]) == 0
    m = json.loads(manifest.read_text())
    assert [q["verb"] for q in m["qps"]] == ["write", "write", "read", "send", "write"]
    assert [q["transport"] for q in m["qps"]] == ["RC", "RC", "RC", "UD", "XRC"]
    assert m["qps"][2]["rnr_naks"] == 1 and m["seed"] == 7
    capsys.readouterr()
    assert main(["check", str(out)]) == 0


@pytest.mark.parametrize("change,message", [
    (("mtu: 4096", "mtu: 3000"), "flows[0]: path MTU 3000"),
    (("iters: 5, qps", "iterz: 5, qps"), "flows[0].iterz: unknown key"),
    (("size: 256", "size: big"), "flows[2].size: expected an integer"),
    (("verb: send, size: 256, iters: 5, transport: ud",
      "verb: read, size: 256, iters: 5, transport: ud"), "flows[2]: UD has no READ"),
    (("psn: 3}", "psn: 99}"), "faults[0]: drop: psn offset 99 is past"),
    (("rate: 0.05", "rate: often"), "faults[1].rate: expected a number"),
    (("kind: rnr, qp: 2, psn: 3", "kind: rnr, qp: 2, psn: 1"), "faults[2]: rnr: psn offset 1"),
    (("tap: switch", "tap: nic"), "scenario: tap 'nic'"),
    (("vlans: [{id: 100, priority: 3}]", "vlans: [{priority: 3}]"), "vlans[0].id: missing"),
    (("seed: 7", "seed: 7\ncolour: red"), "colour: unknown key"),
    (("flows:", "flowz:"), "flowz: unknown key"),
    (("xrc_srq: 0x40", "xrc_srq: 0x1000000"), "flows[3]: QP 0: XRC SRQ number 16777216"),
    (("transport: ud}", "transport: ud, xrc_srq: 1}"), "flows[2]: QP 0: an XRC SRQ number"),
])
def test_errors_name_the_key(tmp_path, capsys, change, message):
    path = write(tmp_path, GOOD.replace(*change))
    assert main(["gen", str(path), "-o", str(tmp_path / "x.pcap"), "--no-cm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: {message}" in err, err
    assert not (tmp_path / "x.pcap").exists()


@pytest.mark.parametrize("flag", [["--size", "10"], ["--xrc-srq", "3"]])
def test_queue_pair_flags_are_refused_with_a_file(tmp_path, capsys, flag):
    assert main(["gen", str(write(tmp_path, GOOD)), "-o", str(tmp_path / "x.pcap"), *flag]) == 2
    assert f"{flag[0]} sets the queue pairs" in capsys.readouterr().err


def test_not_yaml(tmp_path, capsys):
    assert main(["gen", str(write(tmp_path, "flows: [\n")), "-o", str(tmp_path / "x.pcap")]) == 2
    assert "not YAML" in capsys.readouterr().err

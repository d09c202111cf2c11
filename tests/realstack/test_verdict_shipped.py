"""The verdict on rxe's own recovery, in the shipped rig capture of an RDMA WRITE run with
two frames dropped on the bridge (no rig needed): the 21st WRITE packet (PSN 8900515) and
the 3rd ACKNOWLEDGE, which was the NAK of that PSN. rxe NAKed once, the NAK was lost, and it
recovered by its retransmission timer: every rule passes; the lost NAK is no failure."""

from __future__ import annotations

import json

from ibwire.analysis.verdict import judge
from ibwire.cli.main import main
from tests.corpus import ROOT
from tests.realstack.drops_manifest import manifest_from_drops

SHIPPED = ROOT / "captures" / "rxe"
CAPTURE = SHIPPED / "rxe-write-drops-headers.pcap"


def manifest() -> dict:
    scenario = json.loads((SHIPPED / "rxe-write-drops-headers.scenario.json").read_text())
    return manifest_from_drops(CAPTURE, scenario)


def test_the_drops_become_a_manifest():
    m = manifest()
    assert m["faults"] == [
        {"kind": "drop", "qp": 0, "psn": 8900515, "record": 43, "direction": "request"},
        {"kind": "drop", "qp": 0, "psn": 8900515, "record": 101, "direction": "answer"}]
    assert (m["qps"][0]["requester"]["address"], m["qps"][0]["responder"]["address"]) == (
        "10.77.0.2", "10.77.0.1")


def test_rxe_passes_with_its_nak_lost():
    verdict = judge(CAPTURE, manifest())
    drop, lost_nak = verdict.judgements
    assert [drop.outcome, lost_nak.outcome] == ["pass", "pass"] and not verdict.broken
    checks = {c.rule: c for c in drop.checks}
    # one NAK (record 101), after the next packet (record 44) found 8900515 missing, as the
    # responder's out_of_seq_request counter says (+1)
    counters = json.loads((SHIPPED / "rxe-write-drops-headers.counters.json").read_text())
    assert counters["guest1"]["delta"]["out_of_seq_request"] == 1
    assert checks["nak-once"].records == [44, 101]
    # that NAK never reached the requester: it resent from its oldest unacknowledged PSN
    # (8900511, record 106) when its ACK timer fired, 65 ms after its last frame
    resend = checks["resend"]
    assert resend.records == [106] and "resent from PSN 8900511" in resend.detail
    assert 60e6 < resend.measured["idle_ns"] < 70e6
    assert checks["recovered"].records == [118]
    assert lost_nak.checks[0].rule == "nak-lost-retry" and lost_nak.checks[0].records == [106]


def test_cli_on_the_rxe_capture(tmp_path, capsys):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(manifest()))
    assert main(["qp", str(CAPTURE), "--manifest", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "2 faults in 200 records: 2 pass"

"""``qp --manifest``: gen's own conversations pass every rule gen's model follows, over every
fault kind gen has, each encapsulation, several verbs and the three taps; the CLI's lines,
``--json`` and exit status; manifests it cannot read."""

from __future__ import annotations

import json

import pytest

from ibwire.analysis.verdict import RULES, judge
from ibwire.analysis.verdict_manifest import KINDS, ManifestError, parse_manifest
from ibwire.cli.main import main
from ibwire.gen import ENCAPSULATIONS, FAULT_KINDS, Fault, QpSpec, Scenario

#: A fault of each kind gen has, at a PSN offset each verb's requests (or answers) carry:
#: READs of 4 KiB take 4 PSNs, atomics 1, 4 KiB SEND/WRITE messages 4.
OFFSETS = {"write": {"drop": 2, "corrupt": 6, "lose_ack": 7, "rnr": 8, "ecn": 1, "ecn_resp": None},
           "send_imm": {"drop": 5, "corrupt": 0, "lose_ack": 11, "rnr": 4, "ecn": 9,
                        "ecn_resp": None},
           "read": {"drop": 4, "corrupt": 8, "lose_ack": 5, "rnr": 12, "ecn": 0, "ecn_resp": 2},
           "fetch_add": {"drop": 1, "corrupt": 2, "lose_ack": 3, "rnr": 4, "ecn": 0,
                         "ecn_resp": None}}
CASES = [(kind, encap, verb, tap)
         for i, (kind, encap) in enumerate((k, e) for k in FAULT_KINDS for e in ENCAPSULATIONS)
         for verb, tap in [(list(OFFSETS)[i % 4], ("requester", "responder", "switch")[i % 3]),
                           (list(OFFSETS)[(i + 1) % 4], ("requester", "responder",
                                                         "switch")[(i + 2) % 3])]
         if OFFSETS[verb][kind] is not None
         and not (kind == "ecn_resp" and not encap.startswith("rocev2"))]


def test_every_gen_kind_is_a_manifest_kind():
    assert set(FAULT_KINDS) <= set(KINDS)


@pytest.mark.parametrize(("kind", "encap", "verb", "tap"), CASES)
def test_gen_passes_its_own_rules(generated, kind, encap, verb, tap):
    size = 8 if verb == "fetch_add" else 4096
    path, manifest = generated(Scenario(
        qps=(QpSpec(verb, size, iters=6),), encapsulation=encap, tap=tap,
        faults=(Fault(kind, qp=0, psn=OFFSETS[verb][kind], timer=3),)))
    verdict = judge(path, manifest)
    (judgement,) = verdict.judgements
    rocev2 = encap.startswith("rocev2")
    expected = "not-applicable" if kind == "ecn" and not rocev2 else "pass"
    assert judgement.outcome == expected, judgement.line()
    assert not verdict.broken
    if expected == "pass":
        assert judgement.as_dict()["records"], judgement.line()


@pytest.mark.parametrize("verb", ["write", "send", "read", "fetch_add", "cmp_swap"])
@pytest.mark.parametrize("tap", ["requester", "responder", "switch"])
def test_gen_passes_with_many_faults_on_two_qps(generated, verb, tap):
    """Seeded rates: losses in the same window, lost NAKs, lost answers of resends, two QPs
    (one coalescing its ACKs); every fault judged pass (or not-applicable: a CE mark on a
    packet that was also lost)."""
    size = 8 if verb in ("fetch_add", "cmp_swap") else 3000
    kinds = ("drop", "lose_ack", "corrupt", "ecn") + (("ecn_resp",) if verb == "read" else ())
    path, manifest = generated(Scenario(
        qps=(QpSpec(verb, size, iters=12, start_psn=0xFFFFF0),     # across the PSN wrap
             QpSpec(verb, size, iters=5, ack_every=2 if verb in ("write", "send") else None)),
        faults=tuple(Fault(k, rate=0.12) for k in kinds), tap=tap, seed=3))
    verdict = judge(path, manifest)
    outcomes = {j.outcome for j in verdict.judgements}
    assert outcomes <= {"pass", "not-applicable"}, "\n".join(
        j.line() for j in verdict.judgements if j.outcome not in ("pass", "not-applicable"))
    assert len(verdict.judgements) == len(manifest["faults"]) > 5


def test_uc_drop_is_not_applicable(generated):
    path, manifest = generated(Scenario(qps=(QpSpec("write", 4096, iters=3, transport="UC"),),
                                        faults=(Fault("drop", qp=0, psn=2),)))
    (judgement,) = judge(path, manifest).judgements
    assert judgement.outcome == "not-applicable"


def test_capture_cut_before_the_fault_is_not_seen(generated):
    path, manifest = generated(Scenario(qps=(QpSpec("write", 4096, iters=3),),
                                        faults=(Fault("lose_ack", qp=0, psn=7),), tap="switch"))
    record = manifest["faults"][0]["record"]
    (judgement,) = judge(path, manifest, count=record - 1).judgements
    assert judgement.outcome == "not-seen"
    assert f"before the fault's record {record}" in judgement.line()


def test_cli_lines_json_and_exit_status(generated, tmp_path, capsys):
    path, manifest = generated(Scenario(qps=(QpSpec("write", 4096, iters=3),), tap="switch",
                                        faults=(Fault("drop", qp=0, psn=2),
                                                Fault("lose_ack", qp=0, psn=7))))
    m = tmp_path / "m.json"
    m.write_text(json.dumps(manifest))
    assert main(["qp", path, "--manifest", str(m)]) == 0
    lines = capsys.readouterr().out.splitlines()
    record, psn = manifest["faults"][0]["record"], manifest["faults"][0]["psn"]
    assert psn == (manifest["qps"][0]["start_psn"] + 2) & 0xFFFFFF
    assert lines[0].startswith(f"#1 drop QP 0 PSN {psn} (record {record}): pass: nak-once: ")
    assert lines[-1] == f"2 faults in {manifest['records']} records: 2 pass"
    assert main(["qp", path, "--manifest", str(m), "--json"]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0].endswith(f"(records {', '.join(map(str, got[0]['records']))})")
    assert len(got[0]["records"]) == 4 and min(got[0]["records"]) > record
    assert [d["fault"] for d in got] == [1, 2]
    assert got[0]["outcome"] == "pass" and got[0]["broken"] == []
    assert {c["rule"] for c in got[0]["checks"]} == {"nak-once", "resend", "not-acknowledged",
                                                     "recovered"}
    assert all(c["source"] == RULES[c["rule"]][1] for d in got for c in d["checks"])


@pytest.mark.parametrize(("data", "says"), [
    ([], "a JSON object"),
    ({"qps": [], "faults": [{"kind": "x", "qp": 0, "psn": 1}]}, "kind 'x' is not one of"),
    ({"qps": [], "faults": [{"kind": "drop", "qp": 0, "psn": 1}]}, "names no queue pair"),
    ({"version": 2, "qps": [], "faults": []}, "version 2"),
    ({"qps": [{"requester": {"address": "x", "qpn": 1}, "responder": {"qpn": 2}}],
      "faults": []}, None),
    ({"qps": [{"requester": {"qpn": -1}, "responder": {"qpn": 2}}], "faults": []},
     "qpn must be a whole number"),
    ({"qps": [{"requester": {"qpn": 1}, "responder": {"qpn": 2}}],
      "faults": [{"kind": "dup", "qp": 0, "psn": 1, "direction": "sideways"}]},
     "direction 'sideways'"),
])
def test_bad_manifests_say_what_is_wrong(data, says):
    if says is None:      # parsed; the address is checked when the capture is read
        parse_manifest(data)
        return
    with pytest.raises(ManifestError, match=says):
        parse_manifest(data)


def test_cli_refuses_what_it_cannot_read(generated, tmp_path, capsys):
    path, _ = generated(Scenario())
    assert main(["qp", path, "--manifest", str(tmp_path / "none.json")]) == 2
    assert "cannot read the manifest" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["qp", path, "--manifest", str(bad)]) == 2
    assert "is not JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"qps": [{"requester": {"address": "nowhere", "qpn": 1},
                                        "responder": {"qpn": 2}}], "faults": []}))
    assert main(["qp", path, "--manifest", str(bad)]) == 2
    assert "address 'nowhere'" in capsys.readouterr().err
    assert main(["qp", path, "--manifest", str(bad), "--csv"]) == 2
    assert "--csv does not go with --manifest" in capsys.readouterr().err


@pytest.mark.parametrize("scope", ["qp", "ip-pair", "dest-ip", "port"])
def test_gen_cnps_pass_under_every_pacing_scope(generated, scope):
    """A CNP paced per IP pair or port suppresses other QPs' CNPs: no false failure."""
    path, manifest = generated(Scenario(
        qps=(QpSpec("write", 4096, iters=20), QpSpec("read", 4096, iters=10),
             QpSpec("send", 2048, iters=20)),
        faults=(Fault("ecn", rate=0.3), Fault("ecn_resp", rate=0.3)), cnp_scope=scope,
        tap="switch", seed=5))
    verdict = judge(path, manifest)
    assert {j.outcome for j in verdict.judgements} == {"pass"}, "\n".join(
        j.line() for j in verdict.judgements if j.outcome != "pass")


def test_impairs_spelling_is_read():
    """impair names a frame's way by its interfaces (a2b, b2a; the queue pair's direction
    is its requests'), a dup by all its records, a delay in us, a reorder by how many
    frames overtook it, the transmission as tx; a forged frame always goes to the
    requester."""
    qp = {"requester": {"address": "10.77.0.2", "qpn": 17},
          "responder": {"address": "10.77.0.1", "qpn": 17}, "direction": "b2a"}
    faults = [
        {"kind": "drop", "qp": 0, "psn": 5, "record": 66, "direction": "b2a", "tx": 2},
        {"kind": "lose_ack", "qp": 0, "psn": 5, "record": 70, "direction": "a2b"},
        {"kind": "dup", "qp": 0, "psn": 6, "record": 123, "direction": "b2a",
         "records": [123, 124]},
        {"kind": "delay", "qp": 0, "psn": 7, "record": 288, "direction": "b2a", "us": 3000},
        {"kind": "reorder", "qp": 0, "psn": 8, "record": 235, "direction": "b2a", "by": 1},
        {"kind": "nak", "qp": 0, "psn": 9, "record": 453, "direction": "b2a", "trigger": 452},
    ]
    m = parse_manifest({"version": 1, "tap": "switch", "qps": [qp], "faults": faults})
    drop, lost, dup, delay, reorder, nak = m.faults
    assert (drop.direction, drop.transmission) == ("request", 2)
    assert lost.direction == "answer" and nak.direction == "answer"
    assert (dup.record, dup.original) == (124, 123)
    assert delay.delay_ns == 3_000_000 and reorder.held_by == 1
    with pytest.raises(ManifestError, match="says no direction of its requests"):
        parse_manifest({"qps": [{**qp, "direction": None}], "faults": faults[:1]})


def test_a_manifest_for_another_capture_says_so(generated):
    path, manifest = generated(Scenario(qps=(QpSpec("write", 4096, iters=3),),
                                        faults=(Fault("drop", qp=0, psn=2),)))
    manifest["qps"][0]["responder"]["qpn"] = 0x999
    (judgement,) = judge(path, manifest).judgements
    assert judgement.outcome == "not-seen"
    assert "no request of queue pair 0 (192.0.2.1 -> 192.0.2.2/0x999)" in judgement.line()


def test_nak_answered_inside_a_reread_round(generated):
    """A READ re-requested for a lost response just before a NAK of the next READ came: the
    requester resends the NAK's PSN next, inside that round (across the PSN wrap)."""
    path, manifest = generated(Scenario(
        qps=(QpSpec("read", 4096, iters=12, start_psn=0xFFFFF0),),
        faults=(Fault("drop", rate=0.1), Fault("lose_ack", rate=0.1), Fault("corrupt",
                                                                            rate=0.05)),
        tap="requester", seed=7))
    verdict = judge(path, manifest)
    first = verdict.judgements[0]
    assert (first.fault.kind, first.fault.psn) == ("drop", 0xFFFFFC)
    assert first.outcome == "pass", first.line()
    assert "after the NAK the requester resent from PSN 16777212" in first.line()
    assert not verdict.broken

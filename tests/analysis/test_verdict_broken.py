"""The verdict says fail, names the rule and the records, when an endpoint breaks it: gen's
captures edited as a broken responder or requester would have made them; and impair's fault
kinds (dup, reorder, delay, forged NAK, answers duplicated) in hand-made manifests, both
kept and broken."""

from __future__ import annotations

import json

import pytest

from ibwire.analysis.verdict import judge
from ibwire.cli.main import main
from ibwire.gen import Fault, QpSpec, Scenario
from ibwire.transport.timers import rnr_timer_ns
from tests.analysis.verdict_edits import NAK_PSN_SEQUENCE, Capture


def verdict_of(capture: Capture, folder, faults: list[dict] | None = None):
    manifest = dict(capture.manifest)
    if faults is not None:
        manifest["faults"] = faults
    return judge(capture.write(str(folder)), manifest)


def only(verdict):
    (judgement,) = verdict.judgements
    return judgement


def check(judgement, rule):
    return next(c for c in judgement.checks if c.rule == rule)


@pytest.fixture
def dropped():
    """WRITE 3 x 4 KiB from PSN 4096 (records are looked up by these PSNs), PSN 4098 dropped on the way, captured at the switch: the frame
    dropped, the NAK of 4098, the resend from 4098."""
    return Capture(Scenario(qps=(QpSpec("write", 4096, iters=3, start_psn=0x1000),),
                            faults=(Fault("drop", qp=0, psn=2),), tap="switch"))


def records_of(capture: Capture) -> tuple[int, int, int, int]:
    """(the dropped 4098, the 4099 that found it missing, the NAK, the resent 4098)."""
    first, resend = capture.find(bth_psn=4098, bth_destqp=0x101)
    (later,) = capture.find(bth_psn=4099, bth_destqp=0x101)[:1]
    (nak,) = capture.find(bth_opcode=17, aeth_syndrome=NAK_PSN_SEQUENCE)
    assert first < later < nak < resend
    return first, later, nak, resend


def test_the_dropped_capture_passes(dropped, tmp_path):
    first, later, nak, resend = records_of(dropped)
    assert dropped.manifest["faults"][0]["record"] == first
    judgement = only(verdict_of(dropped, tmp_path))
    assert judgement.outcome == "pass"
    assert check(judgement, "nak-once").records == [later, nak]
    assert check(judgement, "resend").records == [nak, resend]


def test_responder_that_never_naks(dropped, tmp_path):
    _, later, nak, _ = records_of(dropped)
    dropped.remove(nak)
    verdict = verdict_of(dropped, tmp_path)
    judgement = only(verdict)
    assert judgement.outcome == "fail" and verdict.broken
    assert judgement.as_dict()["broken"] == ["nak-once"]
    check_ = check(judgement, "nak-once")
    assert "never NAKed PSN 4098" in check_.detail and check_.records == [later]
    # without the NAK the requester's resend is judged as a timeout's: from 4098, fine
    assert check(judgement, "resend").outcome == "pass"


def test_responder_that_naks_twice(dropped, tmp_path):
    first, later, nak, _ = records_of(dropped)
    dropped.insert(nak, dropped.frames[nak - 1][1], dt=50)
    judgement = only(verdict_of(dropped, tmp_path))
    check_ = check(judgement, "nak-once")
    assert check_.outcome == "fail" and "NAKed PSN 4098 2 times" in check_.detail
    assert check_.records == [later, nak, nak + 1]
    assert f"#1 drop QP 0 PSN 4098 (record {first}): fail: nak-once: " in judgement.line()


def test_requester_that_resends_past_the_naks_psn(dropped, tmp_path):
    _, _, nak, resend = records_of(dropped)
    dropped.remove(resend)     # the requester goes back to 4099 only
    judgement = only(verdict_of(dropped, tmp_path))
    check_ = check(judgement, "resend")
    assert check_.outcome == "fail"
    assert "resent from PSN 4099, not from the PSN 4098 the NAK names" in check_.detail
    assert check_.records == [nak, resend]


def test_cli_exit_status_is_1_when_a_rule_is_broken(dropped, tmp_path, capsys):
    dropped.remove(records_of(dropped)[2])
    path = dropped.write(str(tmp_path))
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(dropped.manifest))
    assert main(["qp", path, "--manifest", str(manifest)]) == 1
    out = capsys.readouterr().out
    assert "fail: nak-once: the responder never NAKed PSN 4098" in out
    assert out.splitlines()[-1].endswith("1 fail")


def test_corrupted_packet_acknowledged(tmp_path):
    capture = Capture(Scenario(qps=(QpSpec("write", 4096, iters=3, start_psn=0x1000),),
                               faults=(Fault("corrupt", qp=0, psn=3),), tap="switch"))
    (record,) = [f["record"] for f in capture.manifest["faults"]]
    assert only(verdict_of(capture, tmp_path)).outcome == "pass"
    # the responder takes the packet with a bad ICRC: it ACKs it at once
    ack = capture.find(bth_opcode=17)[0]
    forged = capture.rebuilt(ack, bth_psn=4099, aeth_syndrome=0x1F, aeth_msn=1)
    at = capture.insert(record, forged, dt=500)
    judgement = only(verdict_of(capture, tmp_path, capture.manifest["faults"]))
    silent = check(judgement, "silent-drop")
    assert silent.outcome == "fail" and silent.records == [at]
    assert "packet with a bad ICRC" in silent.detail


@pytest.mark.parametrize("tap", ["requester", "switch"])
def test_rnr_timer_honoured_and_not(tmp_path, tap):
    capture = Capture(Scenario(qps=(QpSpec("write", 1024, iters=3, start_psn=0x1000),),
                               faults=(Fault("rnr", qp=0, psn=1, timer=14),), tap=tap,
                               start_ns=10**9))
    (rnr,) = [f["record"] for f in capture.manifest["faults"]]
    judgement = only(verdict_of(capture, tmp_path))
    wait = check(judgement, "rnr-wait")
    assert judgement.outcome == "pass"
    timer = rnr_timer_ns(14)            # 1.28 ms (IBA Table 45)
    assert wait.measured["timer_ns"] == timer and wait.measured["timer_code"] == 14
    assert wait.measured["gap_ns"] >= timer
    # the requester resends 10 us after the RNR NAK: everything after it moves earlier
    resend = wait.records[1]
    shift = capture.frames[resend - 1][0] - capture.frames[rnr - 1][0] - 10_000
    capture.frames[rnr:] = [(t - shift, f) for t, f in capture.frames[rnr:]]
    judgement = only(verdict_of(capture, tmp_path))
    wait = check(judgement, "rnr-wait")
    assert wait.outcome == "fail" and wait.records == [rnr, resend]
    assert wait.measured["gap_ns"] == 10_000
    assert f"before its timer ({timer / 1000:.1f} us, code 14) elapsed" in wait.detail
    # stamps that run backwards (a forged NAK stamped late) give no gap to judge
    capture.frames[rnr:] = [(t - 20_000, f) for t, f in capture.frames[rnr:]]
    wait = check(only(verdict_of(capture, tmp_path)), "rnr-wait")
    assert wait.outcome == "not-seen" and "timestamps run backwards" in wait.detail


# --- impair's kinds, in hand-made manifests ---------------------------------------------------

def one_packet_messages(verb: str, iters: int = 3) -> Capture:
    size = 8 if verb in ("fetch_add", "cmp_swap") else 1024
    return Capture(Scenario(qps=(QpSpec(verb, size, iters=iters, start_psn=0x1000),), tap="switch"))


def dup_of(capture: Capture, psn: int, after: int) -> tuple[int, dict]:
    """A copy of the request with ``psn`` put after record ``after``, and its fault."""
    (original,) = capture.find(bth_psn=psn, bth_destqp=0x101)
    record = capture.insert(after, capture.frames[original - 1][1])
    return record, {"kind": "dup", "qp": 0, "psn": psn, "record": record,
                    "original": original}


def test_duplicate_write_acked_again_once_executed(tmp_path):
    capture = one_packet_messages("write")
    acks = capture.find(bth_opcode=17)
    record, fault = dup_of(capture, 4096, acks[0])
    ack = capture.insert(record, capture.frames[acks[0] - 1][1], dt=900)
    judgement = only(verdict_of(capture, tmp_path, [fault]))
    assert judgement.outcome == "pass", judgement.line()
    assert check(judgement, "dup-ack").records == [record, ack]
    # executed twice: the ACK answering it counts one message more (MSN 2 for PSN 4096)
    capture.frames[ack - 1] = (capture.frames[ack - 1][0], capture.rebuilt(ack, aeth_msn=2))
    judgement = only(verdict_of(capture, tmp_path, [fault]))
    dup = check(judgement, "dup-ack")
    assert dup.outcome == "fail" and "executed twice" in dup.detail
    assert dup.records == [record, ack]


def test_duplicate_write_naked(tmp_path):
    capture = one_packet_messages("write")
    acks = capture.find(bth_opcode=17)
    record, fault = dup_of(capture, 4096, acks[0])
    nak = capture.insert(record, capture.rebuilt(acks[0], aeth_syndrome=0x61), dt=900)
    dup = check(only(verdict_of(capture, tmp_path, [fault])), "dup-ack")
    assert dup.outcome == "fail" and dup.records == [record, nak]
    assert "drew a NAK" in dup.detail


def test_duplicate_atomic_replays_its_saved_result(tmp_path):
    capture = one_packet_messages("fetch_add")
    answers = capture.find(bth_opcode=18)        # ATOMIC ACKNOWLEDGE
    record, fault = dup_of(capture, 4096, answers[-1])
    replay = capture.insert(record, capture.frames[answers[0] - 1][1], dt=900)
    judgement = only(verdict_of(capture, tmp_path, [fault]))
    assert judgement.outcome == "pass"
    assert check(judgement, "dup-atomic").records == [record, answers[0], replay]
    original = capture.fields(answers[0])["atomicacketh.origremdt"]
    capture.frames[replay - 1] = (capture.frames[replay - 1][0],
                                  capture.rebuilt(replay, atomicacketh_origremdt=original + 1))
    dup = check(only(verdict_of(capture, tmp_path, [fault])), "dup-atomic")
    assert dup.outcome == "fail" and "executed twice" in dup.detail
    assert f"{original:#x}, then {original + 1:#x}" in dup.detail


def test_duplicate_read_executed_again(tmp_path):
    capture = one_packet_messages("read")
    responses = capture.find(bth_opcode=16)      # READ RESPONSE ONLY, PSNs 4096..4098
    record, fault = dup_of(capture, 4096, responses[-1])
    # an answer follows, but not the READ's: the duplicate was not executed again
    capture.insert(record, capture.frames[responses[-1] - 1][1], dt=900)
    dup = check(only(verdict_of(capture, tmp_path, [fault])), "dup-read")
    assert dup.outcome == "fail" and "no READ response of PSN 4096" in dup.detail
    again = capture.insert(record, capture.frames[responses[0] - 1][1], dt=800)
    dup = check(only(verdict_of(capture, tmp_path, [fault])), "dup-read")
    assert dup.outcome == "pass" and dup.records == [record, again]


def test_forged_nak_followed_or_not(dropped, tmp_path):
    """The requester's answer to a PSN sequence error NAK is the same whoever sent it:
    gen's NAK taken as forged."""
    _, _, nak, resend = records_of(dropped)
    fault = {"kind": "nak", "qp": 0, "psn": 4098, "record": nak}
    judgement = only(verdict_of(dropped, tmp_path, [fault]))
    assert judgement.outcome == "pass" and check(judgement, "resend").records == [nak, resend]
    dropped.remove(resend)
    check_ = check(only(verdict_of(dropped, tmp_path, [fault])), "resend")
    assert check_.outcome == "fail" and "not from its PSN 4098" in check_.detail


def test_reordered_request(tmp_path):
    """PSN 4098 overtaken by 4099: the responder must NAK 4098 once. A responder that takes
    4099 out of order without a NAK fails."""
    capture = one_packet_messages("write", iters=4)
    p, q = capture.find(bth_psn=4098, bth_destqp=0x101)[0], capture.find(bth_psn=4099,
                                                                           bth_destqp=0x101)[0]
    capture.frames[p - 1], capture.frames[q - 1] = capture.frames[q - 1], capture.frames[p - 1]
    fault = {"kind": "reorder", "qp": 0, "psn": 4098, "record": q, "with": p}
    judgement = only(verdict_of(capture, tmp_path, [fault]))
    nak = check(judgement, "nak-once")
    assert nak.outcome == "fail" and nak.records == [p]
    assert "never NAKed PSN 4098" in nak.detail

    # impair's spelling: the capture holds the frames as they arrived at impair, in order;
    # "by": how many frames overtook the held one
    capture.frames[p - 1], capture.frames[q - 1] = capture.frames[q - 1], capture.frames[p - 1]
    fault = {"kind": "reorder", "qp": 0, "psn": 4098, "record": p, "by": 1}
    nak = check(only(verdict_of(capture, tmp_path, [fault])), "nak-once")
    assert nak.outcome == "fail" and nak.records == [q]

    # gen's responder on a loss of 4098 at its port (the responder's tap: 4098 is not seen),
    # with the late 4098 put back in after the NAK: NAKed once, resent from 4098
    lost = Capture(Scenario(qps=(QpSpec("write", 1024, iters=4, start_psn=0x1000),),
                            faults=(Fault("drop", qp=0, psn=2),), tap="responder"))
    (nak_record,) = lost.find(bth_opcode=17, aeth_syndrome=NAK_PSN_SEQUENCE)
    after = lost.find(bth_psn=4099, bth_destqp=0x101)[0]
    (original,) = capture.find(bth_psn=4098, bth_destqp=0x101)
    late = lost.insert(nak_record, capture.frames[original - 1][1])
    fault = {"kind": "reorder", "qp": 0, "psn": 4098, "record": late, "with": after}
    judgement = only(verdict_of(lost, tmp_path, [fault]))
    assert judgement.outcome == "pass", judgement.line()
    assert check(judgement, "nak-once").records == [after, nak_record]


def test_delayed_request_overtaken_or_not(tmp_path):
    capture = one_packet_messages("write", iters=4)
    (p,) = capture.find(bth_psn=4098, bth_destqp=0x101)
    gap = capture.frames[p][0] - capture.frames[p - 1][0]
    fault = {"kind": "delay", "qp": 0, "psn": 4098, "record": p, "delay_ns": gap // 2}
    assert only(verdict_of(capture, tmp_path, [fault])).outcome == "pass"
    fault["delay_ns"] = 3 * gap      # 4099 overtakes it: the lossless responder never NAKs
    judgement = only(verdict_of(capture, tmp_path, [fault]))
    assert judgement.as_dict()["broken"] == ["nak-once"]


def test_duplicated_answer_ignored_or_not(tmp_path):
    capture = one_packet_messages("write", iters=4)
    acks = capture.find(bth_opcode=17)
    copy = capture.insert(acks[1], capture.frames[acks[1] - 1][1], dt=10)
    fault = {"kind": "dup", "qp": 0, "psn": 4097, "record": copy, "direction": "answer"}
    judgement = only(verdict_of(capture, tmp_path, [fault]))
    assert judgement.outcome == "pass"
    # the requester takes the stale ACK for a reason to go back: it resends acked 4097
    (sent,) = capture.find(bth_psn=4097, bth_destqp=0x101)
    resent = capture.insert(copy, capture.frames[sent - 1][1], dt=20)
    stale = check(only(verdict_of(capture, tmp_path, [fault])), "stale-answer")
    assert stale.outcome == "fail" and stale.records == [copy, resent]


def test_cnp_kept_missing_paced_and_not_implemented(tmp_path):
    capture = Capture(Scenario(qps=(QpSpec("write", 1024, iters=4, start_psn=0x1000),) * 2,
                               faults=(Fault("ecn", qp=0, psn=1), Fault("ecn", qp=1, psn=2)),
                               tap="switch", cnp_scope="qp"))
    verdict = verdict_of(capture, tmp_path)
    assert [j.outcome for j in verdict.judgements] == ["pass", "pass"]
    assert len(capture.find(bth_opcode=0x81)) == 2
    (to_qp0,) = capture.find(bth_opcode=0x81, bth_destqp=0x100)
    (to_qp1,) = capture.find(bth_opcode=0x81, bth_destqp=0x102)
    mark = capture.manifest["faults"][0]["record"]
    capture.remove(to_qp0)
    to_qp1 -= to_qp1 > to_qp0
    # QP 1's CNP went to the same host within 4 us: the pacing of an IP-pair scope could
    # have suppressed QP 0's
    first = verdict_of(capture, tmp_path).judgements[0]
    assert first.outcome == "pass" and "paced" in check(first, "cnp").detail
    assert check(first, "cnp").records == sorted([mark, to_qp1])
    # with no pacing allowed, QP 0's mark went unanswered
    capture.manifest["cnp_interval_us"] = 0
    verdict = verdict_of(capture, tmp_path)
    first = verdict.judgements[0]
    assert first.outcome == "fail" and check(first, "cnp").records == [mark]
    assert verdict.judgements[1].outcome == "pass"
    for record in reversed(capture.find(bth_opcode=0x81)):
        capture.remove(record)
    verdict = verdict_of(capture, tmp_path)
    assert [j.outcome for j in verdict.judgements] == ["not-implemented"] * 2
    assert not verdict.broken

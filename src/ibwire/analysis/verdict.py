"""The verdict: each injected fault of a manifest, and whether the endpoints reacted to it
as the IBA says (``ibwire qp CAPTURE --manifest M.json``).

    from ibwire.analysis.verdict import judge
    verdict = judge("capture.pcap", "manifest.json")
    for line in verdict.lines():
        print(line)
    verdict.broken        # True when an endpoint broke a rule

The manifest is gen's or impair's (:mod:`ibwire.analysis.verdict_manifest` has its keys);
the frames come from one scan of the capture (:mod:`ibwire.analysis.verdict_frames`); the
rules are in :mod:`ibwire.analysis.verdict_requests` and
:mod:`ibwire.analysis.verdict_answers`, each named in :data:`RULES` with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ibwire.analysis import verdict_answers as answers
from ibwire.analysis import verdict_requests as requests
from ibwire.analysis.verdict_frames import CaptureFrames, read_frames
from ibwire.analysis.verdict_manifest import Fault, Manifest, parse_manifest, read_manifest
from ibwire.analysis.verdict_story import OUTCOMES, Check, Story, worst
from ibwire.pcap.source import Source

#: Each rule: what it asks, and where the IBA (or Linux rxe, which implements it) says so.
RULES: dict[str, tuple[str, str]] = {
    "nak-once": ("after a lost request PSN p, the responder NAKs p once (PSN sequence error) "
                 "when the first later request reaches it, and not again until p arrives",
                 "IBA Vol. 1 9.7.5.1.1, 9.7.5.2.2 Table 44; Linux rxe_resp.c check_psn() "
                 "(sent_psn_nak)"),
    "resend": ("the requester resends from the PSN a sequence error or RNR NAK names; "
               "without a NAK, from p or before when its local ACK timer fires",
               "IBA Vol. 1 9.7.5.2; Linux rxe_comp.c (NAK: retry from its PSN; "
               "retransmit_timer)"),
    "recovered": ("the lost PSN is acknowledged in the end", "IBA Vol. 1 9.7.5.2"),
    "not-acknowledged": ("a request the responder never got is not acknowledged before it "
                         "is resent", "IBA Vol. 1 9.7.5.1.1"),
    "silent-drop": ("a packet with a bad ICRC is dropped silently: no ACK or NAK for it",
                    "IBA Vol. 1 7.8.1; Linux rxe_recv.c rxe_rcv() (rxe_icrc_check() fails: "
                    "drop)"),
    "dup-ack": ("a duplicate SEND/WRITE is ACKed again (with AckReq) and not executed "
                "again: no ACK's MSN counts it twice",
                "IBA Vol. 1 C9-105, 9.7.5.1.2; Linux rxe_resp.c duplicate_request()"),
    "dup-read": ("a duplicate READ is executed again: its responses are resent",
                 "IBA Vol. 1 9.7.5.1.2; Linux rxe_resp.c duplicate_request()"),
    "dup-atomic": ("a duplicate atomic is not executed again: its saved result (the same "
                   "original value) is replayed",
                   "IBA Vol. 1 9.7.5.1.2; Linux rxe_resp.c duplicate_request() "
                   "(find_resource, replay)"),
    "rnr-wait": ("after an RNR NAK the requester waits at least the NAK's timer before it "
                 "resends", "IBA Vol. 1 9.7.5.2.8, Table 45; Linux rxe_comp.c (rnr_nak_timer)"),
    "answer-covered": ("a lost ACK is covered by a later ACK (coalesced) or by a retry; "
                       "the requester never resends past it", "IBA Vol. 1 9.7.5.2"),
    "read-retry": ("a lost READ response is recovered by the requester re-requesting the "
                   "READ from the missing PSN", "IBA Vol. 1 9.7.5.2; Linux rxe_comp.c"),
    "atomic-retry": ("a lost atomic ACK is recovered by a retry of the atomic",
                     "IBA Vol. 1 9.7.5.2, 9.7.5.1.2"),
    "nak-lost-retry": ("a lost NAK is recovered by the requester's local ACK timeout",
                       "IBA Vol. 1 9.7.5.2; Linux rxe_comp.c retransmit_timer"),
    "stale-answer": ("a duplicated or reordered answer is ignored: nothing already "
                     "acknowledged is resent", "IBA Vol. 1 9.7.5.2"),
    "cnp": ("a CE-marked packet draws a CNP back to the sender's QP, unless a CNP to the "
            "same host went out within the pacing interval, where the endpoint implements "
            "congestion notification",
            "IBA Vol. 1 Annex A17 (RoCEv2 congestion notification, CNP opcode 0x81)"),
    "cnp-reaction": ("a CNP slows the sender (DCQCN)", "IBA Vol. 1 Annex A17"),
    "duplicate": ("a duplicate request is answered again", "IBA Vol. 1 9.7.5.1.2"),
    "capture": ("the fault's queue pair and frame are in the capture",
                "the manifest (ibwire gen, ibwire impair)"),
}


@dataclass
class Judgement:
    """One fault and the checks of the rules it calls for."""

    fault: Fault
    checks: list[Check]

    @property
    def outcome(self) -> str:
        return worst(self.checks)

    def as_dict(self) -> dict[str, Any]:
        f = self.fault
        return {"fault": f.number, "kind": f.kind, "qp": f.qp, "psn": f.psn,
                "record": f.record, "direction": f.direction, "outcome": self.outcome,
                "broken": [c.rule for c in self.checks if c.outcome == "fail"],
                "records": sorted({r for c in self.checks for r in c.records}),
                "checks": [{"rule": c.rule, "outcome": c.outcome, "detail": c.detail,
                            "records": c.records, "source": RULES[c.rule][1],
                            **({"measured": c.measured} if c.measured else {})}
                           for c in self.checks]}

    def line(self) -> str:
        f = self.fault
        where = f"record {f.record}" if f.record is not None else "not captured"
        shown = [c for c in self.checks if c.outcome == self.outcome] or self.checks
        said = "; ".join(f"{c.rule}: {c.detail}" for c in shown)
        records = sorted({r for c in shown for r in c.records})
        frames = f" (records {', '.join(map(str, records))})" if records else ""
        return (f"#{f.number} {f.kind} QP {f.qp} PSN {f.psn} ({where}): {self.outcome}: "
                f"{said}{frames}")


@dataclass
class Verdict:
    judgements: list[Judgement]
    records: int

    @property
    def broken(self) -> bool:
        """True when an endpoint broke a rule (some fault's outcome is fail)."""
        return any(j.outcome == "fail" for j in self.judgements)

    def counts(self) -> dict[str, int]:
        return {o: sum(j.outcome == o for j in self.judgements) for o in OUTCOMES}

    def lines(self) -> list[str]:
        counts = ", ".join(f"{n} {o}" for o, n in self.counts().items() if n)
        return [*(j.line() for j in self.judgements),
                f"{len(self.judgements)} faults in {self.records} records: {counts or 'none'}"]

    def as_dicts(self) -> list[dict[str, Any]]:
        return [j.as_dict() for j in self.judgements]


def _judge_one(s: Story, fault: Fault, frames: CaptureFrames, interval_ns: int) -> list[Check]:
    kind, direction = fault.kind, fault.direction
    if fault.record is not None and fault.record > frames.records:
        return [Check("capture", "not-seen", f"the capture ends at record {frames.records}, "
                      f"before the fault's record {fault.record}")]
    if not len(s.req):
        q = s.qp
        return [Check("capture", "not-seen", f"no request of queue pair {q.index} "
                      f"({q.requester.address} -> {q.responder.address}/"
                      f"{q.responder.qpn:#x}) in the capture: do the "
                      "manifest's addresses and QPNs match it?")]
    if kind in ("drop", "corrupt") and direction == "request":
        return requests.lost_request(s, fault)
    if kind in ("reorder", "delay") and direction == "request":
        return _overtaken(s, fault)
    if kind == "dup" and direction == "request":
        return requests.dup_request(s, fault)
    if kind == "rnr":
        return requests.rnr_honoured(s, fault)
    if kind == "nak":
        return requests.forged_nak(s, fault)
    if kind in ("ecn", "ecn_resp"):
        return answers.cnp_drawn(s, fault, frames, interval_ns)
    if kind == "cnp":
        return answers.forged_cnp(s, fault)
    if kind in ("dup", "reorder"):
        return answers.stale_answer(s, fault)
    return answers.lost_answer(s, fault)   # lose_ack, drop/corrupt/delay of an answer


def _overtaken(s: Story, fault: Fault) -> list[Check]:
    """A request reordered or delayed: when a later request overtook it, the responder saw
    a PSN gap (the lost-request rules, the packet arriving late); else nothing to recover."""
    at = s.place(fault)
    i = s.req.at(at) if fault.record is not None else None
    if fault.record is not None and i is None:
        return [Check("capture", "not-seen", f"record {fault.record} is not a request of "
                      f"queue pair {fault.qp}")]
    overtaken = fault.kind == "reorder"
    if fault.kind == "delay" and i is not None and fault.delay_ns is not None:
        t = int(s.req["t"][i])
        j = s.req.after(at)
        overtaken = j < len(s.req) and int(s.req["t"][j]) < t + fault.delay_ns
    if not overtaken:
        return [Check("recovered", "pass", "no later request overtook it: it arrived in order",
                      [at])]
    return requests.lost_request(s, fault, arrives=True)


def judge(source: Source, manifest: str | Path | dict[str, Any] | Manifest, *,
          count: int | None = None) -> Verdict:
    """The verdict on each fault of ``manifest`` (a path, the decoded JSON or a
    :class:`Manifest`) over the capture ``source`` (its first ``count`` records)."""
    if isinstance(manifest, dict):
        manifest = parse_manifest(manifest)
    elif not isinstance(manifest, Manifest):
        manifest = read_manifest(manifest)
    interval_ns = manifest.cnp_interval_ns
    frames = read_frames(source, manifest, count)
    stories = [Story(qp, f, manifest, frames.records)
               for qp, f in zip(manifest.qps, frames.qps, strict=True)]
    return Verdict([Judgement(f, _judge_one(stories[f.qp], f, frames, interval_ns))
                    for f in manifest.faults], frames.records)


__all__ = ["RULES", "Judgement", "Verdict", "judge"]

"""The verdict's rules for faults on answers (a lost, delayed, duplicated or reordered ACK,
NAK, READ response or atomic ACK) and on congestion notification (a CE mark and the CNP it
draws, a forged CNP). Each returns the :class:`Check` es of one fault."""

from __future__ import annotations

import numpy as np

from ibwire.analysis.verdict_frames import CaptureFrames, psn_delta
from ibwire.analysis.verdict_manifest import Fault
from ibwire.analysis.verdict_story import Check, Story, us
from ibwire.transport.opkinds import ATOMIC, ATOMIC_ACK, KIND, READ, READ_RESP


def _answer_kind(s: Story, fault: Fault) -> str:
    """What the answer touched was: nak, rnr, read, atomic or ack (from its frame when the
    capture holds it, else from the request its PSN answers)."""
    i = s.ans.at(fault.record) if fault.record is not None else None
    if i is not None:
        if s.ans_nak[i]:
            return "nak"
        if s.ans_rnr[i]:
            return "rnr"
        kind = KIND[int(s.ans["opcode"][i])]
        return "read" if kind == READ_RESP else "atomic" if kind == ATOMIC_ACK else "ack"
    d = psn_delta(s.req["psn"], fault.psn)
    before = np.flatnonzero((d <= 0) & (d > -(1 << 16)))
    if len(before):
        family = s.family(int(before[np.argmax(d[before])]))
        return "read" if family == READ else "atomic" if family == ATOMIC else "ack"
    return "ack"


def lost_answer(s: Story, fault: Fault) -> list[Check]:
    """A lost (or, with ``delay``, late) answer at PSN p is covered by a later answer
    (coalesced) or by a retry; a READ response or an atomic ACK only by a retry (their data
    cannot be implied); a lost NAK only by the requester's timeout."""
    if not s.reliable:
        return [Check("answer-covered", "not-applicable", "UC and UD are never answered")]
    p, at = fault.psn, s.place(fault)
    what = _answer_kind(s, fault)
    lost = {f.record for f in s.manifest.faults if f.qp == fault.qp and f.record is not None
            and f.direction == "answer" and f.kind in ("lose_ack", "drop", "corrupt")}
    answered = s.answers_of(p, lost)
    had = answered[s.ans["record"][answered] < at]
    if len(had) and what != "nak":
        rec = int(s.ans["record"][had[0]])
        return [Check("answer-covered", "pass", f"nothing to recover: the {what} of PSN {p} "
                      f"had reached the requester before (record {rec}); this was a repeat",
                      [rec])]
    i = s.req.after(at)
    hit = np.flatnonzero(s.retx[i:] & (psn_delta(s.req["psn"][i:], p) <= 0))
    retry = i + int(hit[0]) if len(hit) else None
    retry_rec = int(s.req["record"][retry]) if retry is not None else None
    cover = s.first_covering(p, at)
    if fault.kind == "delay" and fault.record is not None and s.ans.at(fault.record) is not None:
        cover = s.ans.at(fault.record)          # the late answer itself
    cover_rec = int(s.ans["record"][cover]) if cover is not None else None
    later = answered[s.ans["record"][answered] > at]
    again_rec = int(s.ans["record"][later[0]]) if len(later) and what != "nak" else None
    # what recovers it: a READ response or atomic result only by coming again, a NAK only
    # by a retry, an ACK by any answer covering it as well
    recovery = [r for r in (retry_rec, again_rec if what in ("read", "atomic") else
                            cover_rec if what == "ack" else None) if r is not None]
    checks = []
    skipped = s.first_retx(at)
    if what != "ack" and skipped is not None and (
            not recovery or int(s.req["record"][skipped]) < min(recovery)) and (
            retry is None or skipped < retry):
        checks.append(Check("answer-covered", "fail", f"the requester resent from PSN "
                            f"{int(s.req['psn'][skipped])}, past PSN {p} whose {what} was "
                            "lost", [int(s.req["record"][skipped])]))
    if what in ("read", "atomic", "nak"):
        rule = {"read": "read-retry", "atomic": "atomic-retry", "nak": "nak-lost-retry"}[what]
        if again_rec is not None and (retry_rec is None or again_rec < retry_rec):
            checks.append(Check(rule, "pass", f"the {what} of PSN {p} came again (record "
                                f"{again_rec}), for a request resent before the loss",
                                [again_rec]))
        elif retry_rec is None:
            checks.append(Check(rule, "not-seen", f"no retry of PSN {p} after its lost "
                                f"{what} before the capture ends"))
        else:
            checks.append(Check(rule, "pass", f"the lost {what} of PSN {p} recovered by the "
                                f"requester's retry from PSN {int(s.req['psn'][retry])}",
                                [retry_rec]))
            if what == "atomic":
                checks.append(_replayed(s, fault, retry_rec))
        return checks
    if cover_rec is None and retry_rec is None:
        checks.append(Check("answer-covered", "not-seen", f"no later answer covers PSN {p} "
                            "and no retry before the capture ends"))
    elif retry_rec is None or (cover_rec is not None and cover_rec < retry_rec):
        coalesced = int(s.ans["psn"][cover])
        checks.append(Check("answer-covered", "pass", f"PSN {p} covered by the answer of PSN "
                            f"{coalesced}" + (" (coalesced)" if coalesced != p else ""),
                            [cover_rec]))
    else:
        checks.append(Check("answer-covered", "pass", f"PSN {p} covered by the requester's "
                            f"retry from PSN {int(s.req['psn'][retry])}", [retry_rec]))
    return checks


def _replayed(s: Story, fault: Fault, retry: int) -> Check:
    """After an atomic ACK was lost, the retried atomic gets the saved result again."""
    kind = KIND[s.ans["opcode"]]
    rows = [j for j in range(len(s.ans)) if kind[j] == ATOMIC_ACK
            and int(s.ans["psn"][j]) == fault.psn]
    lost = [j for j in rows if fault.record is not None and s.ans["record"][j] == fault.record]
    again = [j for j in rows if s.ans["record"][j] > retry]
    if not again:
        return Check("dup-atomic", "not-seen", f"no ATOMIC ACK of PSN {fault.psn} after the "
                     "retry before the capture ends", [retry])
    records = [retry, int(s.ans["record"][again[0]])]
    if lost and s.ans["original"][lost[0]] != s.ans["original"][again[0]]:
        return Check("dup-atomic", "fail", f"the atomic at PSN {fault.psn} executed twice: "
                     f"original value {int(s.ans['original'][lost[0]]):#x}, then "
                     f"{int(s.ans['original'][again[0]]):#x}", records)
    same = " (the same original value)" if lost else ""
    return Check("dup-atomic", "pass", f"the saved result replayed{same}", records)


def stale_answer(s: Story, fault: Fault) -> list[Check]:
    """A duplicated or reordered (stale) answer is ignored: the requester resends none of
    the PSNs an earlier answer had already acknowledged."""
    at = s.place(fault)
    acked = np.flatnonzero((s.ans["record"] < at) & ~s.ans_nak & ~s.ans_rnr)
    if not len(acked):
        return [Check("stale-answer", "not-applicable", "nothing was acknowledged before it")]
    first = int(s.ans["psn"][acked[0]])
    top = int(s.ans["psn"][acked[np.argmax(psn_delta(s.ans["psn"][acked], first))]])
    nxt = s.ans.after(at)
    until = int(s.ans["record"][nxt]) if nxt < len(s.ans) else None
    for j in range(s.req.after(at), len(s.req)):
        rec = int(s.req["record"][j])
        if until is not None and rec > until:
            break
        if s.retx[j] and psn_delta(int(s.req["psn"][j]), top) <= 0:
            return [Check("stale-answer", "fail", f"after the stale answer the requester "
                          f"resent PSN {int(s.req['psn'][j])}, already acknowledged up to "
                          f"PSN {top}", [at, rec])]
    return [Check("stale-answer", "pass", "ignored: nothing acknowledged was resent", [at])]


def cnp_drawn(s: Story, fault: Fault, frames: CaptureFrames, interval_ns: int) -> list[Check]:
    """A CE-marked packet draws a CNP to its sender's QP from the notification point, unless
    one went out within the pacing interval; an endpoint that never sends a CNP does not
    implement congestion notification."""
    ecn = fault.kind == "ecn"
    np_end = s.qp.responder if ecn else s.qp.requester
    cnps = s.frames.cnps_to_requester if ecn else s.frames.cnps_to_responder
    at = s.place(fault)
    rows = s.req if ecn else s.ans
    i = rows.at(at) if fault.record is not None else None
    if i is not None and not rows["rocev2"][i]:
        return [Check("cnp", "not-applicable", "ECN marks and CNPs are RoCEv2's (IBA Annex "
                      "A17): this frame is not RoCEv2")]
    gone = [f for f in s.manifest.faults if f.qp == fault.qp and f.psn == fault.psn
            and f.kind in ("drop", "corrupt", "lose_ack") and f.record == fault.record
            and (f.direction == "request") == ecn]
    if gone:
        return [Check("cnp", "not-applicable", f"the marked packet never reached the "
                      f"notification point ({gone[0].kind}, fault {gone[0].number})")]
    who = "responder" if ecn else "requester"
    if not frames.sends_cnps(np_end):
        return [Check("cnp", "not-implemented", f"the {who} sends no CNP in the whole capture: "
                      "it does not implement congestion notification (DCQCN)")]
    t = int(rows["t"][i]) if i is not None else None
    j = cnps.after(at)
    if j < len(cnps):
        rec = int(cnps["record"][j])
        delay = int(cnps["t"][j]) - t if t is not None else None
        return [Check("cnp", "pass", f"the {who} sent a CNP" + (
            f" {us(delay)} after the marked packet" if delay is not None else ""),
            [at, rec], {"cnp_delay_ns": delay} if delay is not None else {})]
    # paced: a CNP to the sender (for any of its QPs: the scope may be the IP pair, the
    # destination or the port) within the interval around the mark
    sender = s.qp.requester if ecn else s.qp.responder
    near = np.flatnonzero(frames.cnps_between(np_end, sender) & (
        np.abs(frames.cnps["t"] - (t if t is not None else 0)) <= interval_ns))
    if t is not None and len(near):
        rec = int(frames.cnps["record"][near[0]])
        gap = t - int(frames.cnps["t"][near[0]])
        return [Check("cnp", "pass", f"paced: a CNP to the same host went out {us(abs(gap))} "
                      f"{'before' if gap >= 0 else 'after'} it (pacing interval "
                      f"{us(interval_ns)})", sorted([rec, at]))]
    return [Check("cnp", "fail", f"no CNP after the CE-marked packet though the {who} sends "
                  "CNPs", [at])]


def forged_cnp(s: Story, fault: Fault) -> list[Check]:
    return [Check("cnp-reaction", "not-applicable", "a CNP asks the sender to slow down "
                  "(DCQCN); the rate it then keeps is not a protocol exchange to judge")]

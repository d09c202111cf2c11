"""The verdict's rules for faults on requests: lost (dropped, corrupted), overtaken
(reordered, delayed), duplicated; and for the NAKs that make the requester go back (an RNR
NAK, a forged PSN sequence error NAK). Each returns the :class:`Check` es of one fault."""

from __future__ import annotations

import numpy as np

from ibwire.analysis.verdict_frames import psn_delta
from ibwire.analysis.verdict_manifest import Fault
from ibwire.analysis.verdict_story import Check, Story, us
from ibwire.transport.opkinds import ATOMIC, ATOMIC_ACK, KIND, READ, READ_RESP
from ibwire.transport.timers import rnr_timer_ns

UNRELIABLE = ("not-applicable", "UC and UD requests are never acknowledged: a lost packet "
              "loses its message, nothing is resent (IBA Vol. 1 chapter 9, unreliable "
              "services)")


def lost_request(s: Story, fault: Fault, *, arrives: bool = False) -> list[Check]:
    """A request PSN p the responder did not get in order: dropped or corrupted (never
    arrives), or reordered/delayed past a later one (``arrives`` late)."""
    if not s.reliable:
        return [Check("nak-once", *UNRELIABLE)]
    p, at = fault.psn, s.place(fault)
    again = [f.record for f in s.manifest.faults if f.qp == fault.qp and f.psn == p
             and f.record is not None and f.record > at and f.kind in ("drop", "corrupt")
             and f.direction == "request"]
    end = min(again) if again else None
    resend = s.resent(p, at)
    resend_rec = int(s.req["record"][resend]) if resend is not None else None
    cover = s.first_covering(p, at)
    if cover is not None and end is not None and s.ans["record"][cover] > end:
        cover = None
    nak, received = _nak_once(s, fault, at, cover, end)
    checks = [nak, _resend(s, at, p, received, cover, arrives)]
    if not arrives:
        checks.append(_not_accepted(s, fault, at, p, cover, resend_rec))
    if cover is None:
        checks.append(Check("recovered", "not-seen", f"no answer acknowledges PSN {p} "
                            "before the capture ends"))
    else:
        checks.append(Check("recovered", "pass", f"PSN {p} acknowledged",
                            [int(s.ans["record"][cover])]))
    return checks


def _nak_once(s: Story, fault: Fault, at: int, cover: int | None, end: int | None
              ) -> tuple[Check, list[int]]:
    """The check, and the records of the NAKs of p that reached the requester."""
    p = fault.psn
    # a reordered request was overtaken by the one it changed places with, captured first
    first = min(at, fault.swapped_with) if fault.swapped_with is not None else at
    gap = s.gap_found(p, first - 0.25)
    stop = end
    if cover is not None:
        stop = min(stop or s.records + 1, int(s.ans["record"][cover]))
    naks = [int(s.ans["record"][j]) for j in s.ans_rows(s.ans_seq & (s.ans["psn"] == p),
                                                         first, stop)]
    lost = [f for f in s.manifest.faults if f.qp == fault.qp and f.psn == p
            and f.direction == "answer" and f.kind in ("lose_ack", "drop", "corrupt")]
    lost_records = {f.record for f in lost if f.record is not None}
    unseen = [f for f in lost if f.record is None or s.ans.at(f.record) is None]
    received = [r for r in naks if r not in lost_records]
    # a lost answer of p the capture does not hold may be the NAK, when none is captured;
    # at most one can be (one NAK outstanding), the others are the ACKs after the resend
    unseen = [] if naks else unseen[:1]
    seen = len(naks) + len(unseen)
    if gap is None:
        return Check("nak-once", "pass" if seen <= 1 else "fail",
                     f"no NAK of PSN {p} due: no request found it missing (an earlier PSN "
                     "was still expected, or nothing later came before it)" +
                     (f"; {seen} NAKs of it" if seen else ""), naks), received
    found = int(s.req["record"][gap])
    early = [r for r in naks if r < found]
    if early:
        return Check("nak-once", "fail", f"the responder NAKed PSN {p} before any later "
                     "request reached it (it answered the lost packet itself)",
                     [found, *early]), received
    if seen == 1:
        how = (f"NAK at record {naks[0]}" if naks else
               f"its NAK lost (fault {unseen[0].number})")
        how += " (lost on its way)" if naks and naks[0] in lost_records else ""
        return Check("nak-once", "pass", f"one PSN sequence error NAK of PSN {p} after "
                     f"the request at record {found} found it missing: {how}",
                     [found, *naks]), received
    if seen == 0:
        if cover is None and s.ans.after(found) >= len(s.ans):
            return Check("nak-once", "not-seen", f"no answer after the request at record "
                         f"{found} found PSN {p} missing, before the capture ends",
                         [found]), received
        return Check("nak-once", "fail", f"the responder never NAKed PSN {p} (PSN sequence "
                     f"error) though the request at record {found} found it missing",
                     [found]), received
    return Check("nak-once", "fail", f"the responder NAKed PSN {p} {seen} times before it "
                 "arrived", [found, *naks]), received


def _resend(s: Story, at: int, p: int, naks: list[int], cover: int | None,
            arrives: bool) -> Check:
    """After the NAK (one that reached the requester) the requester resends from p, or
    from an earlier READ or atomic whose answers are missing; without one, from p or
    before it when its local ACK timer fires."""
    start = naks[0] if naks else at
    j = s.first_retx(start)
    # p itself resent before the next round starts: in a round under way (begun by an
    # earlier loss, or by a READ's missing responses just before the NAK came)
    own = s.resent(p, at)
    if own is not None and (j is None or own <= j):
        rec = int(s.req["record"][own])
        if naks and rec > naks[0]:
            return Check("resend", "pass", f"after the NAK the requester resent from PSN {p}",
                         [naks[0], rec])
        return Check("resend", "pass", f"PSN {p} resent in a round of retransmissions "
                     "already under way", [rec])
    cover_rec = int(s.ans["record"][cover]) if cover is not None else None
    if j is None or (arrives and cover_rec is not None and cover_rec < s.req["record"][j]):
        if arrives and cover_rec is not None:
            return Check("resend", "pass", f"PSN {p} arrived late and was acknowledged "
                         "without a resend", [cover_rec])
        return Check("resend", "not-seen", f"the requester resends nothing after record "
                     f"{start} before the capture ends")
    rec, psn = int(s.req["record"][j]), int(s.req["psn"][j])
    if naks:
        ok = psn == p or (psn_delta(psn, p) < 0 and s.family(j) in (READ, ATOMIC))
        return Check("resend", "pass" if ok else "fail",
                     f"after the NAK the requester resent from PSN {psn}" +
                     ("" if psn == p else " (a READ or atomic still unanswered)" if ok
                      else f", not from the PSN {p} the NAK names"), [naks[0], rec])
    before = s.last_frame_before(rec)
    gap = int(s.req["t"][j]) - before if before is not None else None
    measured = {"idle_ns": gap} if gap is not None else {}
    if psn_delta(psn, p) > 0:
        return Check("resend", "fail", f"the requester resent from PSN {psn}, past the lost "
                     f"PSN {p}", [rec], measured)
    wait = f" after {us(gap)} without a frame (its timeout)" if gap is not None else ""
    return Check("resend", "pass", f"no NAK reached the requester: it resent from PSN "
                 f"{psn}{wait}", [rec], measured)


def _not_accepted(s: Story, fault: Fault, at: int, p: int, cover: int | None,
                  resend: int | None) -> Check:
    """A lost packet never arrived (a bad ICRC: dropped silently): nothing acknowledges it
    before its resend."""
    rule = "silent-drop" if fault.kind == "corrupt" else "not-acknowledged"
    if cover is not None and (resend is None or int(s.ans["record"][cover]) < resend):
        rec = int(s.ans["record"][cover])
        return Check(rule, "fail", f"PSN {p} was acknowledged (record {rec}) before it was "
                     "resent: the responder took the " +
                     ("packet with a bad ICRC" if fault.kind == "corrupt" else "lost packet"),
                     [rec])
    what = "dropped silently" if fault.kind == "corrupt" else "not acknowledged"
    return Check(rule, "pass", f"PSN {p} {what} until resent",
                 [resend] if resend is not None else [])


def dup_request(s: Story, fault: Fault) -> list[Check]:
    """A request delivered twice: SEND/WRITE ACKed again and not executed again, READ
    answered again, an atomic's saved result replayed."""
    if not s.reliable:
        return [Check("duplicate", *UNRELIABLE)]
    at = s.place(fault)
    i = s.req.at(fault.record) if fault.record is not None else s.request_at(fault.psn)
    if i is None:
        return [Check("duplicate", "not-seen", f"the duplicate of PSN {fault.psn} is not in "
                      "the capture")]
    p, family = fault.psn, s.family(i)
    kind = KIND[s.ans["opcode"]]
    later = s.ans.after(at)
    if family == READ:
        rows = s.ans_rows((kind == READ_RESP) & (s.ans["psn"] == p), at)
        if rows:
            return [Check("dup-read", "pass", f"the READ at PSN {p} executed again: its "
                          "responses resent", [at, int(s.ans["record"][rows[0]])])]
        return [Check("dup-read", "not-seen" if later >= len(s.ans) else "fail",
                      f"no READ response of PSN {p} after the duplicate", [at])]
    if family == ATOMIC:
        rows = [j for j in range(len(s.ans)) if kind[j] == ATOMIC_ACK
                and int(s.ans["psn"][j]) == p]
        first = [j for j in rows if s.ans["record"][j] < at]
        again = [j for j in rows if s.ans["record"][j] > at]
        if not again:
            return [Check("dup-atomic", "not-seen" if later >= len(s.ans) else "fail",
                          f"no ATOMIC ACK of PSN {p} after the duplicate", [at])]
        records = [at, *(int(s.ans["record"][j]) for j in first[:1] + again[:1])]
        if first and s.ans["original"][first[0]] != s.ans["original"][again[0]]:
            return [Check("dup-atomic", "fail", f"the atomic at PSN {p} executed twice: "
                          f"original value {int(s.ans['original'][first[0]]):#x}, then "
                          f"{int(s.ans['original'][again[0]]):#x}", records)]
        return [Check("dup-atomic", "pass", f"the saved result of the atomic at PSN {p} "
                      "replayed", records)]
    return [_dup_ack(s, at, p, bool(s.req["ackreq"][i]))]


def _dup_ack(s: Story, at: int, p: int, ackreq: bool) -> Check:
    """C9-105: a duplicate SEND/WRITE is ACKed again; the MSN shows it did not execute
    twice (an ACK's MSN counts the messages ended at or before the PSN it names)."""
    ends = s.message_end_psns()
    origin = int(s.req["psn"][0]) if len(s.req) else 0
    rows = np.flatnonzero(~s.ans_nak & ~s.ans_rnr & (KIND[s.ans["opcode"]] != READ_RESP))
    done = np.searchsorted(np.sort(psn_delta(ends, origin)),
                           psn_delta(s.ans["psn"][rows], origin), side="right")
    extra = s.ans["msn"][rows] - done
    before = s.ans["record"][rows] < at
    if before.any():
        base = int(extra[before].max())
        twice = np.flatnonzero(~before & (extra > base))
        if len(twice):
            j = int(rows[twice[0]])
            rec = int(s.ans["record"][j])
            return Check("dup-ack", "fail", f"executed twice: the ACK at record {rec} "
                         f"counts {int(extra[twice[0]]) - base} message(s) more than were "
                         f"sent (MSN {int(s.ans['msn'][j])})", [at, rec])
    first = s.ans.after(at)
    if first < len(s.ans) and (s.ans_nak[first] or s.ans_rnr[first]) and psn_delta(
            int(s.ans["psn"][first]), p) <= 0:
        return Check("dup-ack", "fail", f"the duplicate of PSN {p} drew a NAK (PSN "
                     f"{int(s.ans['psn'][first])}), not an ACK",
                     [at, int(s.ans["record"][first])])
    j = s.first_covering(p, at)
    if j is None or s.ans_nak[j] or s.ans_rnr[j]:
        if not ackreq:
            return Check("dup-ack", "pass", "no ACK due (no AckReq) and no second execution",
                         [at])
        if j is None:
            return Check("dup-ack", "not-seen", f"no ACK of PSN {p} after the duplicate "
                         "before the capture ends", [at])
        return Check("dup-ack", "fail", f"the duplicate of PSN {p} drew a NAK",
                     [at, int(s.ans["record"][j])])
    return Check("dup-ack", "pass", f"the duplicate of PSN {p} ACKed again (PSN "
                 f"{int(s.ans['psn'][j])}), not executed again", [at, int(s.ans["record"][j])])


def rnr_honoured(s: Story, fault: Fault) -> list[Check]:
    """After an RNR NAK the requester waits the NAK's timer, then resends from its PSN."""
    at = s.place(fault)
    i = s.ans.at(at) if fault.record is not None else None
    if i is None:
        hit = s.ans_rows(s.ans_rnr & (s.ans["psn"] == fault.psn), at - 1)
        i = hit[0] if hit else None
    if i is None or not s.ans_rnr[i]:
        return [Check("rnr-wait", "not-seen", f"no RNR NAK of PSN {fault.psn} in the capture")]
    rec, p = int(s.ans["record"][i]), int(s.ans["psn"][i])
    code = int(s.ans["syndrome"][i]) & 0x1F
    wait = rnr_timer_ns(code)
    j = next((k for k in range(s.req.after(rec), len(s.req))
              if s.retx[k] or int(s.req["psn"][k]) == p), None)
    if j is None:
        return [Check("rnr-wait", "not-seen", f"no resend after the RNR NAK at record {rec} "
                      "before the capture ends", [rec])]
    gap = int(s.req["t"][j]) - int(s.ans["t"][i])
    resent, psn = int(s.req["record"][j]), int(s.req["psn"][j])
    measured = {"gap_ns": gap, "timer_ns": wait, "timer_code": code}
    checks = []
    if gap < 0:
        checks.append(Check("rnr-wait", "not-seen", f"the capture's timestamps run backwards "
                            f"from the RNR NAK to the resend ({us(gap)}): no gap to measure",
                            [rec, resent], measured))
    elif gap < wait:
        checks.append(Check("rnr-wait", "fail", f"resent PSN {psn} {us(gap)} after the RNR "
                            f"NAK, before its timer ({us(wait)}, code {code}) elapsed",
                            [rec, resent], measured))
    else:
        checks.append(Check("rnr-wait", "pass", f"resent {us(gap)} after the RNR NAK "
                            f"(timer {us(wait)}, code {code})", [rec, resent], measured))
    checks.append(Check("resend", "pass" if psn == p else "fail",
                        f"resent from PSN {psn}" + ("" if psn == p else
                                                   f", not the RNR NAK's PSN {p}"),
                        [rec, resent]))
    return checks


def forged_nak(s: Story, fault: Fault) -> list[Check]:
    """A PSN sequence error NAK (forged on the way): the requester resends from its PSN."""
    at = s.place(fault)
    j = s.first_retx(at)
    if j is None:
        return [Check("resend", "not-seen", "the requester resends nothing after the NAK "
                      "before the capture ends", [at])]
    psn, rec = int(s.req["psn"][j]), int(s.req["record"][j])
    ok = psn == fault.psn
    return [Check("resend", "pass" if ok else "fail", f"after the NAK the requester resent "
                  f"from PSN {psn}" + ("" if ok else f", not from its PSN {fault.psn}"),
                  [at, rec])]

"""What the verdict's rules ask of one queue pair's frames: retransmissions, coverage by
answers, NAKs, timings; and the :class:`Check` each rule returns.

A request is a *retransmission* when its PSN is not past every request PSN before it (IBA
9.7.1's PSN order, 24-bit, 9.7.5.1.1's halves). An answer *covers* PSN p when it
acknowledges it, explicitly or implicitly (coalesced, IBA 9.7.5.2): an ACK, READ response
or atomic ACK at p or after it, or a NAK (any kind) of a later PSN, which acknowledges the
PSNs before the one it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ibwire.analysis.verdict_frames import QpFrames, Rows, psn_delta
from ibwire.analysis.verdict_manifest import Fault, Manifest, Qp
from ibwire.transport.opkinds import ATOMIC, FAMILY, KIND, LAST, ONLY, POSITION, READ, READ_RESP

#: Outcomes, worst first: a fault's outcome is the worst of its checks'.
OUTCOMES = ("fail", "not-seen", "not-implemented", "pass", "not-applicable")
#: AETH syndromes (IBA 9.7.5.2.2, Table 44): the top three bits, and a PSN sequence error.
SYN_ACK, SYN_RNR, SYN_NAK = 0, 1, 3
NAK_PSN_SEQUENCE = 0x60


@dataclass
class Check:
    """One rule applied to one fault: its outcome, what was seen, the records that show it."""

    rule: str
    outcome: str
    detail: str
    records: list[int] = field(default_factory=list)
    measured: dict[str, Any] = field(default_factory=dict)


def worst(checks: list[Check]) -> str:
    return min((c.outcome for c in checks), key=OUTCOMES.index, default="not-applicable")


def us(ns: int | float) -> str:
    return f"{ns / 1000:.1f} us"


class Story:
    """One queue pair's frames with what the rules ask of them."""

    def __init__(self, qp: Qp, frames: QpFrames, manifest: Manifest, records: int) -> None:
        self.qp = qp
        self.req: Rows = frames.requests
        self.ans: Rows = frames.answers
        self.frames = frames
        self.manifest = manifest
        self.records = records
        self.reliable = qp.transport in ("RC", "XRC")
        psn = self.req["psn"]
        retx = np.zeros(len(psn), bool)
        if len(psn):
            top = int(psn[0])
            for i in range(1, len(psn)):      # the running PSN maximum, in 24-bit order
                if psn_delta(int(psn[i]), top) <= 0:
                    retx[i] = True
                else:
                    top = int(psn[i])
        self.retx = retx
        syn = self.ans["syndrome"] >> 5
        nak_opcode = KIND[self.ans["opcode"]] != READ_RESP
        self.ans_nak = nak_opcode & (syn == SYN_NAK)
        self.ans_rnr = nak_opcode & (syn == SYN_RNR)
        self.ans_seq = self.ans_nak & (self.ans["syndrome"] == NAK_PSN_SEQUENCE)
        self.lost = {f.record for f in manifest.faults
                     if f.qp == qp.index and f.record is not None
                     and f.kind in ("drop", "corrupt")}

    # --- requests -----------------------------------------------------------------------

    def family(self, i: int) -> int:
        return int(FAMILY[int(self.req["opcode"][i])])

    def request_at(self, psn: int) -> int | None:
        """The first request with PSN ``psn``, or None."""
        hit = np.flatnonzero(self.req["psn"] == psn)
        return int(hit[0]) if len(hit) else None

    def first_retx(self, after: int, until: int | None = None) -> int | None:
        """The first retransmitted request after record ``after`` (before ``until``)."""
        i = self.req.after(after)
        hit = np.flatnonzero(self.retx[i:])
        if not len(hit):
            return None
        j = i + int(hit[0])
        return j if until is None or self.req["record"][j] < until else None

    def first_later_request(self, after: int, psn: int, until: int | None) -> int | None:
        """The first request after record ``after`` (and before ``until``) with a PSN past
        ``psn`` that was not itself lost (a drop or corrupt fault of the manifest)."""
        for j in range(self.req.after(after), len(self.req)):
            record = int(self.req["record"][j])
            if until is not None and record >= until:
                return None
            if record in self.lost or int(self.req["icrc_ok"][j]) == 0:
                continue
            if psn_delta(int(self.req["psn"][j]), psn) > 0:
                return j
        return None

    def message_end_psns(self) -> np.ndarray:
        """PSNs of the requests that end a message (LAST, ONLY, READ, atomic), once each."""
        op = self.req["opcode"]
        ends = np.isin(POSITION[op], (LAST, ONLY)) | np.isin(FAMILY[op], (READ, ATOMIC))
        return np.unique(self.req["psn"][ends])

    # --- answers ------------------------------------------------------------------------

    def covering(self, psn: int) -> np.ndarray:
        """Mask of the answers that cover PSN ``psn``."""
        d = psn_delta(self.ans["psn"], psn)
        naks = self.ans_nak | self.ans_rnr
        return np.where(naks, d > 0, d >= 0)

    def first_covering(self, psn: int, after: int) -> int | None:
        i = self.ans.after(after)
        hit = np.flatnonzero(self.covering(psn)[i:])
        return i + int(hit[0]) if len(hit) else None

    def ans_rows(self, mask: np.ndarray, after: int, until: int | None = None) -> list[int]:
        i = self.ans.after(after)
        rows = [i + int(k) for k in np.flatnonzero(mask[i:])]
        if until is not None:
            rows = [j for j in rows if self.ans["record"][j] < until]
        return rows

    # --- positions ----------------------------------------------------------------------

    def place(self, fault: Fault) -> int:
        """The record the fault happened at: its own, or (not captured) the record before
        the first frame its PSN is missing from."""
        if fault.record is not None:
            return fault.record
        if fault.direction == "request":
            rows = self.req
            later = np.flatnonzero((psn_delta(rows["psn"], fault.psn) > 0) & ~self.retx)
        else:
            rows = self.ans
            later = np.flatnonzero(psn_delta(rows["psn"], fault.psn) >= 0)
        if len(later):
            return int(rows["record"][int(later[0])]) - 1
        return self.records

    def last_frame_before(self, record: int) -> int | None:
        """The time of the QP's last request or answer before ``record``."""
        times = [int(rows["t"][rows.after(record - 1) - 1]) for rows in (self.req, self.ans)
                 if rows.after(record - 1) > 0]
        return max(times) if times else None

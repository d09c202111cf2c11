"""Rate faults in closed form: the lossless conversation with recovery rounds spliced in,
in numpy batches.

``--drop``, ``--corrupt`` and ``--ecn-mark rate=R`` strike request packets the seed picks:
the simulation of :mod:`ibwire.gen.run` draws one ``random.Random(seed).random()`` per rate
kind (drop, corrupt, ecn) for each request packet the first time it is sent, in sending
order; ``--lose-ack rate=R`` one for each answer, in the order the responder sends them. On
one reliable QP whose packets are all sent back to back (the fast plan's verbs, no window),
those are the packets in PSN order and the answers in the order their requests arrive, so
the victims are known up front (the same Mersenne Twister stream, drawn by numpy), and what
the transport model does with them (:mod:`ibwire.transport`: the requester's go-back-N and
local ACK timer, the responder's one NAK per gap and its ACKs of duplicates) follows in
rounds:

- a round sends from PSN index ``a`` at time ``f``, back to back; the responder accepts up to
  the first victim ``v`` that is sent for the first time in it (resends are never struck),
  ACKs what it accepts (AckReq) on arrival, drops the rest; the first packet after ``v``
  that arrives intact draws the NAK "PSN sequence error" naming ``v``;
- the NAK reaches the requester one wire time and one delay later; the first packet the
  requester starts sending at or after that moment (or the moment itself, if it was idle)
  is the resend of ``v``: the next round;
- with nothing after the victim to draw a NAK, or the last ACKs lost, the requester sends
  again from its first PSN not acknowledged when its local ACK timer fires; the responder
  ACKs what it already had (duplicates), and once such an ACK is back the requester goes on
  after what it acknowledges;
- a CE mark changes nothing but the responder's port: the CNPs it draws (:mod:`ibwire.gen.marks`).

A round costs a few integer operations; the frames, the taps' times and the observers'
rows of all rounds are then made in batches as the lossless plan makes them
(:mod:`ibwire.gen.fast`). Where the model would do anything else (several QPs, lost answers
beside other kinds, the retries running out, a timer shorter than a round, a CNP holding a
NAK back), :func:`rate_plan` or :meth:`RatePlan.rounds` says so and the conversation is
simulated.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ibwire.gen.fast import (
    BATCH,
    Batch,
    _ip_id_columns,
    _merge,
    _Plan,
    _Qp,
    _request_columns,
    _template,
    _tie,
    class_packets,
    generation_segmenter,
    plan,
)
from ibwire.gen.marks import cnp_decisions, responder_port
from ibwire.gen.rounds import Rounds, draws
from ibwire.transport import PSN_MASK, cnp_packet
from ibwire.transport.cnp import CNP_OPCODE
from ibwire.transport.segment import ACK_SYNDROME
from ibwire.transport.timers import local_ack_timeout_ns

if TYPE_CHECKING:
    from ibwire.gen.run import Generation

#: The rate fault kinds this plan takes: the request packets' (drop, corrupt, ecn, together
#: or alone, drawn in :data:`REQUEST_KINDS` order), or the answers' (lose_ack) alone.
RATE_KINDS = ("drop", "corrupt", "lose_ack", "ecn")
REQUEST_KINDS = ("drop", "corrupt", "ecn")


def rate_plan(generation: Generation) -> RatePlan | None:
    """The closed-form plan of ``generation``'s scenario when its faults are all drop or
    corrupt rates on one reliable QP the fast plan could take lossless, else None."""
    s = generation.scenario
    kinds = {f.kind for f in s.faults}
    if len(s.qps) != 1 or not s.faults or any(f.rate is None for f in s.faults) or not (
            kinds <= set(REQUEST_KINDS) or kinds == {"lose_ack"}):
        return None
    base = plan(generation, resumed=True)
    if base is None or not base.qps[0].reliable:
        return None
    rates = {f.kind: f.rate for f in s.faults}     # the last of a kind wins, as in run.py
    out = RatePlan(generation, base.qps, base.ack_wire, rates)
    return out if out.rounds() else None


class RatePlan(_Plan, Rounds):
    """A :class:`ibwire.gen.fast._Plan` whose conversation has recovery rounds."""

    def __init__(self, generation: Generation, qps: list[_Qp], ack_wire: int,
                 rates: dict[str, float]) -> None:
        super().__init__(generation, qps, ack_wire)
        q = qps[0]
        s = generation.scenario
        self.rates = rates
        kinds = [k for k in REQUEST_KINDS if k in rates]
        u = draws(s.seed, len(kinds) * q.packets).reshape(q.packets, len(kinds))
        self.answer_draws = np.zeros(0)
        self.struck = {k: u[:, i] < rates[k] for i, k in enumerate(kinds)}
        none = np.zeros(q.packets, dtype=bool)
        self.lost = self.struck.get("drop", none)
        self.bad = self.struck.get("corrupt", none)
        self.marked = self.struck.get("ecn", none)
        # CE-marked requests as the switch and the responder see them, and the CNPs they
        # draw (RoCEv2 only, as the simulation sends them)
        self.ce_templates = [_template(generation.framer, packet, s.udp_sport(0), ce=True)
                             for packet in class_packets(s, 0)] if "ecn" in rates else []
        self.cnp = None
        if "ecn" in rates and s.encapsulation.startswith("rocev2"):
            self.cnp = _template(generation.framer, cnp_packet(q.requester_qpn),
                                 s.udp_sport(0), "rev", dscp=s.cnp_dscp)
        self.cnp_wire = (generation._wire_ns(bytes(self.cnp.frame)) if self.cnp is not None
                         else 0)
        self.cnp_payload = cnp_packet(q.requester_qpn).payload_len
        cls = _classes(q, np.arange(q.packets, dtype=np.int64))
        self.wire = np.array(q.wire, dtype=np.int32)[cls]
        self.cls = cls.astype(np.int8)
        self.edges = np.concatenate(([0], np.cumsum(self.wire)))   # W[j]: wire before j
        nak = generation_segmenter(s, 0).nak(q.start_psn, 0)._replace(dest_qp=q.requester_qpn)
        self.nak = _template(generation.framer, nak, s.udp_sport(0), "rev")
        self.nak_opcode, self.nak_syndrome = nak.opcode, nak.aeth.syndrome   # type: ignore[union-attr]
        self.nak_wire = (generation._wire_ns(bytes(self.nak.frame)) if self.nak is not None
                         else 0)
        self.timeout = local_ack_timeout_ns(s.qps[0].timeout)
        self.faults: list[dict[str, Any]] = []
        self.resent = {"nak": 0, "timeout": 0, "rnr": 0, "read": 0}

    def begin(self, start: int, first: int) -> None:
        """Start at ``start`` (ns): the rounds :func:`rate_plan` played from 0, moved."""
        done = self.done
        super().begin(start, first)
        self.done = done + start
        for times in (self.sent, self.answer_sent, self.cnp_sent, self.runs[:, 2]):
            times += start

    def rounds(self) -> bool:
        """Play the recovery rounds from :attr:`start`; False when the model would do what
        this plan does not (then the conversation is simulated)."""
        rocev2 = self.generation.scenario.encapsulation.startswith("rocev2")
        if self.nak is None or None in self.ce_templates or (
                "ecn" in self.rates and rocev2 and self.cnp is None):
            return False
        runs = self._lost_answers() if "lose_ack" in self.rates else self._victims()
        if runs is None:
            return False
        self.runs = np.array(runs, dtype=np.int64)
        return self._sends() and self._timer_holds()

    def _sends(self) -> bool:
        """The send sequence of all rounds and each packet's fate, as columns."""
        q = self.qps[0]
        a, end, f, v, trigger, dup_end, timed_out = self.runs.T
        lengths = end - a
        total = int(lengths.sum())
        run = np.repeat(np.arange(len(a)), lengths)
        offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths,
                                                              lengths)
        index = a[run] + offset
        high = np.concatenate(([0], np.maximum.accumulate(end)[:-1]))
        first = index >= high[run]
        resent = ~first
        self.resent["timeout"] = int((resent & (timed_out[run] >= 1)).sum())
        self.resent["nak"] = int(resent.sum()) - self.resent["timeout"]
        self.index = index
        self.sent = f[run] + self.edges[index] - self.edges[a[run]]
        self.first = first
        self.lost_now = first & self.lost[index]
        self.bad_now = first & self.bad[index]
        duplicate = index < dup_end[run]
        self.duplicates = int(duplicate.sum())
        accepted = (index < v[run]) & ~duplicate
        self.triggers = index == trigger[run]
        self.acks = accepted & self._ackreq(q, index) | duplicate
        answered = self.acks | self.triggers
        self.answer_rank = np.cumsum(answered) - 1        # each answer's place on its port
        # an ACK names its packet, a NAK the victim, a duplicate's ACK the latest accepted
        self.answer_psn = np.where(self.triggers, v[run],
                                   np.where(duplicate, dup_end[run] - 1, index))
        self.answer_lost = np.zeros(total, dtype=bool)
        if "lose_ack" in self.rates:
            self.answer_lost[answered] = (self.answer_draws[self.answer_rank[answered]]
                                          < self.rates["lose_ack"])
            self.answer_draws = np.zeros(0)
        arrive = self.sent + self.wire[index] + self.delay
        self.answer_wire = np.where(self.triggers, self.nak_wire, self.ack_wire).astype(
            np.int32)
        self.answer_sent = arrive.copy()        # answers leave as their request arrives
        self.rev_rank = self.answer_rank
        self.cnp_sent = self.cnp_by = np.zeros(0, dtype=np.int64)
        self.marked_now = first & self.marked[index]
        notified = self.marked_now & ~self.lost_now & ~self.bad_now   # CE and ICRC good
        if self.cnp is not None and notified.any():
            interval = round(self.generation.scenario.cnp_interval_us * 1000)
            by = np.flatnonzero(notified)
            by = by[cnp_decisions(arrive[by], interval)]
            port = responder_port(arrive[answered], self.answer_wire[answered], arrive[by],
                                  interval, self.cnp_wire)
            if port is None:
                return False
            self.answer_sent[answered], self.cnp_sent = port
            self.cnp_by = by
            if (self.answer_sent[self.triggers] != arrive[self.triggers]).any():
                return False    # a CNP held a NAK back: the rounds' times are off
            # each host's IPv4 IDs count up in the order it sends: answers and CNPs merged
            self.rev_rank = self.answer_rank.copy()
            self.rev_rank[answered] += np.searchsorted(self.cnp_sent,
                                                       self.answer_sent[answered])
            self.cnp_rank = np.arange(len(by)) + np.searchsorted(self.answer_sent[answered],
                                                                 self.cnp_sent)
        # when the requester is done: its port free, the last frame that arrives in
        came = answered & ~self.answer_lost
        back = self.answer_sent[came] + self.answer_wire[came]
        self.done = max(int(arrive[~self.lost_now].max(initial=0)),
                        int(back.max(initial=0)) + self.delay,
                        int((self.cnp_sent + self.cnp_wire + self.delay).max(initial=0)),
                        int(self.sent[-1] + self.wire[index[-1]]))
        return True

    def _timer_holds(self) -> bool:
        """Whether the local ACK timer fires only where the rounds say (a timeout round
        starts on the timer): every ACK or NAK reaches the requester within a timeout of
        the one before (the first of the first send, the first after a timeout of it)."""
        if self.timeout is None:
            return True
        answered = (self.acks | self.triggers) & ~self.answer_lost
        back = (self.answer_sent + self.answer_wire + self.delay)[answered]
        starts = [self.start] + [int(f) for f in self.runs[self.runs[:, 6] == 1, 2]]
        points = np.sort(np.concatenate((back, starts)))
        gaps = np.diff(points)
        ends_at_timeout = np.isin(points[1:], starts[1:])
        return not len(gaps) or int(gaps[~ends_at_timeout].max(initial=0)) < self.timeout

    def manifest(self, records: int, faults: list[dict[str, Any]] | None = None,
                 resent: dict[str, int] | None = None, duplicates: int = 0
                 ) -> dict[str, Any]:
        return super().manifest(records, self.faults, self.resent, self.duplicates)

    def batches(self) -> Iterator[Batch]:
        """The records in capture order, a batch per :data:`BATCH` packets sent."""
        q = self.qps[0]
        delay, tap = self.delay, self.tap
        ids = self.generation.ip_ids
        fwd0, rev0 = ids["fwd"], ids["rev"]
        total = len(self.index)
        answered = self.acks | self.triggers
        ids["fwd"] = (fwd0 + total) & 0xFFFF
        ids["rev"] = (rev0 + int(answered.sum()) + len(self.cnp_sent)) & 0xFFFF
        # the fault entries, in the order the simulation draws them
        entries: dict[int, list[dict[str, Any]]] = {}
        kinds = [k for k in REQUEST_KINDS if k in self.rates]
        for j in np.flatnonzero(self.lost | self.bad | self.marked).tolist():
            psn = (q.start_psn + j) & PSN_MASK
            entries[j] = [{"kind": k, "qp": 0, "psn": psn, "record": None}
                          for k in kinds if self.struck[k][j]]
            self.faults += entries[j]
        # (lost answers: keyed after the request packets by their place on the port)
        for at in np.flatnonzero(self.answer_lost).tolist():
            psn = (q.start_psn + int(self.answer_psn[at])) & PSN_MASK
            key = q.packets + int(self.answer_rank[at])
            entries[key] = [{"kind": "lose_ack", "qp": 0, "psn": psn, "record": None}]
            self.faults += entries[key]
        pending: list[tuple] = []
        for p0 in range(0, total, BATCH):
            p1 = min(total, p0 + BATCH)
            made = self._made(p0, p1, fwd0, rev0)
            if p1 < total:
                nxt = int(self.sent[p1])
                seen = {"requester": nxt, "switch": nxt + delay // 2,
                        "responder": nxt + int(self.wire[self.index[p1]]) + delay}[tap]
                horizon: tuple[int, int] | None = (seen, int(_tie(np.array([seen]),
                                                                  np.array([nxt]), 0)[0]))
            else:
                horizon = None
            out, pending = _merge(made + pending, horizon)
            if out is not None:
                yield self._emitted(out, entries)
        if pending:
            out, _ = _merge(pending, None)
            if out is not None:
                yield self._emitted(out, entries)

    def _emitted(self, batch: Batch, entries: dict[int, list[dict[str, Any]]]) -> Batch:
        """:meth:`_emit`, and the record of each fault the tap saw (meta column 10: the
        struck packet's index, -1 for the rest)."""
        for position in np.flatnonzero(batch.meta[:, 10] >= 0).tolist():
            for entry in entries[int(batch.meta[position, 10])]:
                entry["record"] = self.records + position + 1
        return self._emit(batch)

    def _made(self, p0: int, p1: int, fwd0: int, rev0: int) -> list[tuple]:
        """The groups (rows, tie, when, meta) of the packets sent ``p0`` to ``p1`` in the
        send sequence and of the answers they draw."""
        q = self.qps[0]
        delay, tap = self.delay, self.tap
        index, sent = self.index[p0:p1], self.sent[p0:p1]
        wire = self.wire[index]
        arrive = sent + wire + delay
        lost, bad = self.lost_now[p0:p1], self.bad_now[p0:p1]
        cls = self.cls[index]
        psn = (q.start_psn + index) & PSN_MASK
        ackreq = self._ackreq(q, index)
        msg = index // q.n
        seen = {"requester": sent, "switch": sent + delay // 2, "responder": arrive}[tap]
        fwd_ids = (fwd0 + np.arange(p0, p1, dtype=np.int64)) & 0xFFFF
        struck = self.first[p0:p1] & (self.lost[index] | self.bad[index] | self.marked[index])
        made: list[tuple] = []
        show = ~lost if tap == "responder" else np.ones(len(index), dtype=bool)
        # the switch and the responder see the marks (the requester sent them unmarked)
        ce = self.marked_now[p0:p1] if tap != "requester" else np.zeros(len(index), bool)
        for c, corrupt, marked in itertools.product(range(len(q.templates)), (False, True),
                                                    (False, True)):
            pick = show & (cls == c) & (bad == corrupt) & (ce == marked)
            if not pick.any():
                continue
            template = self.ce_templates[c] if marked else q.templates[c]
            assert template is not None
            values = _request_columns(template, q.stride, psn[pick], ackreq[pick], msg[pick],
                                      fwd_ids[pick])
            count = int(pick.sum())
            va = values["va"] if "va" in values else np.zeros(count, np.int64)
            meta = np.column_stack((
                np.full(count, q.k), np.full(count, q.opcodes[c]), psn[pick],
                ackreq[pick], np.zeros(count, np.int64),
                np.full(count, q.dmalen if "va" in template.fields else 0),
                np.full(count, q.payloads[c]), va, np.full(count, int(marked)),
                np.full(count, int(corrupt)),
                np.where(struck[pick], index[pick], -1))).astype(np.int64)
            made.append((template.rows(values, 16, bad_icrc=corrupt),
                         _tie(seen[pick], sent[pick], 0), seen[pick], meta))
        acks, triggers = self.acks[p0:p1], self.triggers[p0:p1]
        rank, answer_sent = self.rev_rank[p0:p1], self.answer_sent[p0:p1]
        lost_answer = self.answer_lost[p0:p1]
        shown = ~lost_answer if tap == "requester" else np.ones(len(index), dtype=bool)
        for template, picked, syndrome, opcode, answer_wire in (
                (q.ack, acks, ACK_SYNDROME, q.ack_opcode, self.ack_wire),
                (self.nak, triggers, self.nak_syndrome, self.nak_opcode, self.nak_wire)):
            pick = picked & shown
            if template is None or not pick.any():
                continue
            x = answer_sent[pick]
            answer = self.answer_psn[p0:p1][pick]
            done = (answer + 1) // q.n if syndrome == ACK_SYNDROME else answer // q.n
            values = {"word": (q.start_psn + answer) & PSN_MASK, "msn": done & PSN_MASK}
            if "ipid" in template.fields:
                values.update(_ip_id_columns(template, (rev0 + rank[pick]) & 0xFFFF))
            when = {"requester": x + answer_wire + delay, "switch": x + delay // 2,
                    "responder": x}[tap]
            count = len(x)
            meta = np.column_stack((
                np.full(count, q.k), np.full(count, opcode), values["word"],
                np.zeros(count, np.int64), np.full(count, syndrome),
                *[np.zeros(count, np.int64)] * 5,
                np.where(lost_answer[pick], q.packets + self.answer_rank[p0:p1][pick],
                         -1))).astype(np.int64)
            made.append((template.rows(values, 16), _tie(when, x, 1), when, meta))
        cnps = (self.cnp_by >= p0) & (self.cnp_by < p1)
        if cnps.any():
            made.append(self._cnps(cnps, rev0))
        return made

    def _cnps(self, pick: np.ndarray, rev0: int) -> tuple:
        """The group of the CNPs ``pick`` selects."""
        template, delay, q = self.cnp, self.delay, self.qps[0]
        assert template is not None
        x = self.cnp_sent[pick]
        count = len(x)
        values = {"word": np.zeros(count, np.int64)}
        if "ipid" in template.fields:
            values.update(_ip_id_columns(template, (rev0 + self.cnp_rank[pick]) & 0xFFFF))
        when = {"requester": x + self.cnp_wire + delay, "switch": x + delay // 2,
                "responder": x}[self.tap]
        meta = np.zeros((count, 11), dtype=np.int64)
        meta[:, 0], meta[:, 1], meta[:, 10] = q.k, CNP_OPCODE, -1
        meta[:, 6] = self.cnp_payload
        return template.rows(values, 16), _tie(when, x, 1), when, meta


def _classes(q: _Qp, index: np.ndarray) -> np.ndarray:
    """Template index of each PSN index (first, middle, last of its message)."""
    j = index % q.n
    return np.where(j == 0, 0, np.where(j == q.n - 1, 2, 1)) if q.n > 3 else j

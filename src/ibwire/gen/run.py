"""Run a scenario through the transport model: frames in time order, and the manifest.

One link joins the requester host and the responder host; each direction sends one frame at
a time at ``Link.gbps`` (Ethernet frames cost 24 more bytes: preamble, FCS, inter-frame gap)
and delivers it ``Link.delay_ns`` after it is sent whole. Queue pairs share each direction
round-robin; CNPs go first. The tap decides what the capture holds and when:

- ``requester``: at the requester's port: what it sends, at once; what reaches it, on arrival;
- ``responder``: the same at the responder's port;
- ``switch``: half way, everything in both directions before any loss (CE marks included).

Faults happen in the network, after the sender's port: a dropped request is seen only by the
requester's and the switch's taps, a lost answer only by the responder's and the switch's.
A corrupted frame carries a bad ICRC from its sender on (every tap sees it so); an ECN mark
is set on the way, so the requester's tap sees the request unmarked.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Hashable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ibwire.gen.cm import CmExchange
from ibwire.gen.frames import Framer
from ibwire.gen.handoff import drain, steady
from ibwire.gen.scenario import Fault, Scenario
from ibwire.transport import (
    CnpPacer,
    Completed,
    Failed,
    Packet,
    Requester,
    Responder,
    ResponderConfig,
    cnp_packet,
    psn_add,
)
from ibwire.transport.cnp import CNP_OPCODE
from ibwire.transport.observed import ROW_FIELDS, Observed

if TYPE_CHECKING:
    from ibwire.gen.fast import Batch

MANIFEST_VERSION = 1
#: Work requests each requester holds posted at most (``ibv_qp_cap.max_send_wr``): the rest
#: are made and posted as earlier ones complete, so memory does not grow with ``iters``.
SEND_QUEUE_DEPTH = 4096
#: Rows a connection keeps before feeding them to its observer.
OBSERVED_BATCH = 4096


class _Conn:
    def __init__(self, k: int, scenario: Scenario) -> None:
        self.k = k
        self.spec = scenario.qps[k]
        self.start_psn = scenario.start_psn(k)
        self.requester_qpn, self.responder_qpn = scenario.qpns(k)
        self.req = Requester(scenario.requester_config(k))
        self.resp = Responder(ResponderConfig(
            transport=self.spec.transport, pmtu=self.spec.mtu, start_psn=self.start_psn,
            dest_qp=self.requester_qpn, q_key=self.spec.q_key))
        self.work = scenario.work(k)
        self.unposted = self.spec.iters
        self.top_up()
        self.packets = scenario.psn_count(k)   # request packets to send (first transmissions)
        self.observed = Observed(self.spec.mtu)
        self.rows: list[tuple[int, ...]] = []   # what the tap saw, by ROW_FIELDS, not yet fed
        self.udp_sport = scenario.udp_sport(k)
        self.completed = 0
        self.failed: str | None = None
        self.rnr_faults: dict[int, dict[str, Any]] = {}

    def see(self, row: tuple[int, ...]) -> None:
        """A row the tap saw; fed to the observer a batch at a time (memory stays flat)."""
        self.rows.append(row)
        if len(self.rows) >= OBSERVED_BATCH:
            self.feed()

    def feed(self) -> None:
        """Feed the rows kept to the observer as columns (one loop of its compiled rules)."""
        if self.rows:
            self.observed.feed({k: np.array(v, np.int64) for k, v in
                                zip(ROW_FIELDS, zip(*self.rows, strict=True), strict=True)})
            self.rows = []

    def top_up(self) -> None:
        """Post work requests until the send queue is full or the work is all posted."""
        while self.unposted and self.req.pending < SEND_QUEUE_DEPTH:
            self.req.post(next(self.work))
            self.unposted -= 1


class Generation:
    """Iterate for ``(timestamp_ns, frame)`` in time order; :attr:`manifest` is complete once
    the iteration ends. :attr:`linktype` is the pcap link type of the frames."""

    def __init__(self, scenario: Scenario, *, fast: bool = True) -> None:
        self.scenario = scenario.check()
        self.framer = Framer(scenario, templates=fast)
        self.linktype = self.framer.linktype
        self.manifest: dict[str, Any] = {}
        self.fast = fast
        #: The record number from which the fast plan took over from the simulation once
        #: the faults were over (None: it did not).
        self.handed_over: int | None = None
        self._wire: dict[int, int] = {}
        #: The IPv4 ID each host sends next (``fwd``: the requester's), counting up.
        self.ip_ids = {d: self.scenario.ip_id_start(d) for d in ("fwd", "rev")}

    def next_ip_id(self, direction: str) -> int:
        """The IPv4 ID of the next packet sent in ``direction``."""
        ip_id = self.ip_ids[direction]
        self.ip_ids[direction] = (ip_id + 1) & 0xFFFF
        return ip_id

    def plan(self) -> Any:
        """The fast path's plan when ``fast`` and the scenario is lossless
        (:mod:`ibwire.gen.fast`) or has only the rate faults :mod:`ibwire.gen.recovery`
        computes, else None (then it is simulated)."""
        if not self.fast:
            return None
        from ibwire.gen.fast import plan
        from ibwire.gen.recovery import rate_plan

        return plan(self) or rate_plan(self)

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        for piece in self.pieces():
            if isinstance(piece, tuple):
                yield piece
                continue
            buffer = np.empty(piece.size, dtype=np.uint8)
            piece.fill(buffer)
            view = memoryview(buffer)
            for t, at, n in zip(piece.when.tolist(), piece.starts.tolist(),
                                piece.lengths.tolist(), strict=True):
                yield t, bytes(view[at:at + n])

    def pieces(self) -> Iterator[tuple[int, bytes] | Batch]:
        """The conversation in time order as records ``(timestamp_ns, frame)`` and, where the
        fast plan makes them, batches of records (:class:`ibwire.gen.fast.Batch`, laid out by
        its ``fill``); :attr:`manifest` is complete once the iteration ends."""
        self.ip_ids = {d: self.scenario.ip_id_start(d) for d in ("fwd", "rev")}
        cm = CmExchange(self)
        setup, start = cm.setup()
        for when, frame, _ in setup:
            yield when, frame
        fast = self.plan()
        if fast is None:
            done = yield from self._run(start, len(setup))
        else:
            fast.begin(start, len(setup))
            records = yield from self._batches(fast, len(setup))
            self.manifest = fast.manifest(records)
            done = fast.done
        teardown = cm.teardown(done)
        for when, frame, _ in teardown:
            yield when, frame
        self.manifest["records"] += len(teardown)
        cm.manifest(self.manifest["qps"])

    # --- the simulation -----------------------------------------------------------------------

    def _run(self, start: int = 0, first: int = 0) -> Iterator[tuple[int, bytes] | Batch]:
        """Simulate from ``start`` (ns), the first record being number ``first``; returns
        when the requester is done (its port free, its last answer in)."""
        s = self.scenario
        rng = random.Random(s.seed)
        conns = [_Conn(k, s) for k in range(len(s.qps))]
        faults: list[dict[str, Any]] = []
        targeted: dict[tuple[str, int, int], dict[str, Any]] = {}
        rates: dict[str, float] = {}
        for fault in s.faults:
            self._arm(fault, conns, faults, targeted, rates)
        pacer = CnpPacer(round(s.cnp_interval_us * 1000), s.cnp_scope)
        cnps: deque[tuple[int, Packet, Hashable]] = deque()
        # the requester is the notification point of CE-marked READ responses: its CNPs go
        # to the responder's QP, first on the requester's port
        req_pacer = CnpPacer(round(s.cnp_interval_us * 1000), s.cnp_scope)
        fwd_cnps: deque[tuple[int, Packet, Hashable]] = deque()
        arrivals: list[tuple[int, int, str, int, Packet, bool, bool]] = []
        taps: list[tuple[int, int, bytes, list[dict[str, Any]]]] = []
        seq = 0
        free = {"fwd": start, "rev": start}
        ready = {c.k for c in conns}
        turn = {"fwd": 0, "rev": 0}
        delay, tap = s.link.delay_ns, s.tap
        written = first
        t = start
        # the fast plan for the rest, once the faults are over (None: simulate to the end)
        rest = self._rest()
        drained: list[tuple] | None = None     # records still on their way at the hand-off
        while True:
            if (rest is not None and drained is None and free["fwd"] <= t and not rates
                    and not targeted and not cnps and not fwd_cnps):
                offsets = steady(conns, arrivals, ready, turn["fwd"], free["rev"], t)
                if offsets is not None:
                    handoff, drained = (t, offsets), []
                    for c in conns:
                        c.feed()
            sending = drained is None
            # 1. each free direction sends one frame
            if not sending:
                pass
            elif free["fwd"] <= t and fwd_cnps and req_pacer.send_at(fwd_cnps[0][2]) <= t:
                k, packet, due = fwd_cnps.popleft()
                req_pacer.sent(due, t)
                c = conns[k]
                frame = self.framer.frame(packet, "fwd", c.udp_sport, dscp=s.cnp_dscp,
                                          ip_id=self.next_ip_id("fwd"))
                free["fwd"] = t + self._wire_ns(frame)
                when = {"requester": t, "switch": t + delay // 2,
                        "responder": free["fwd"] + delay}[tap]
                heapq.heappush(taps, (when, seq, frame, [], (c, packet, False, False, t, 0)))
                seq += 1
            elif free["fwd"] <= t and ready:
                for i in range(len(conns)):
                    c = conns[(turn["fwd"] + i) % len(conns)]
                    if c.k not in ready:
                        continue
                    if c.unposted:
                        c.top_up()
                    packet = c.req.next_packet(t)
                    if packet is None:
                        ready.discard(c.k)
                        continue
                    turn["fwd"] = c.k + 1
                    first = not packet.retransmission
                    hits = self._hits(("drop", "corrupt", "ecn"), c, packet, first, targeted,
                                      rates, rng, faults)
                    lost, bad, ce = "drop" in hits, "corrupt" in hits, "ecn" in hits
                    ip_id = self.next_ip_id("fwd")
                    frame = self.framer.frame(packet, "fwd", c.udp_sport, bad_icrc=bad,
                                              ip_id=ip_id)
                    free["fwd"] = t + self._wire_ns(frame)
                    arrive = free["fwd"] + delay
                    seen = ((t, False) if tap == "requester" else (t + delay // 2, ce)
                            if tap == "switch" else (arrive, ce))
                    if tap != "responder" or not lost:
                        if seen[1]:
                            frame = self.framer.frame(packet, "fwd", c.udp_sport, ce=True,
                                                      bad_icrc=bad, ip_id=ip_id)
                        heapq.heappush(taps, (seen[0], seq, frame, list(hits.values()),
                                              (c, packet, seen[1], bad, t, 0)))
                        seq += 1
                    if not lost:
                        heapq.heappush(arrivals, (arrive, seq, "fwd", c.k, packet, not bad, ce))
                        seq += 1
                    break
            if free["rev"] <= t:
                sent = self._send_answer(t, conns, (cnps, pacer), turn, targeted, rates, rng,
                                         faults)
                if sent is not None:
                    c, packet, frame, hits, lost, ip_id = sent
                    ce = any(h["kind"] == "ecn_resp" for h in hits)
                    free["rev"] = t + self._wire_ns(frame)
                    arrive = free["rev"] + delay
                    when = (t if tap == "responder" else t + delay // 2 if tap == "switch"
                            else arrive)
                    if tap != "requester" or not lost:
                        marked = ce and tap != "responder"
                        if marked:
                            frame = self.framer.frame(packet, "rev", c.udp_sport, ce=True,
                                                      ip_id=ip_id)
                        heapq.heappush(taps, (when, seq, frame, hits,
                                              (c, packet, marked, False, t, 1)))
                        seq += 1
                    if not lost:
                        heapq.heappush(arrivals, (arrive, seq, "rev", c.k, packet, True, ce))
                        seq += 1
            # 2. the next moment something happens
            times = [arrivals[0][0]] if arrivals else []
            if ready and sending:
                times.append(max(free["fwd"], t))
            if fwd_cnps:
                times.append(max(free["fwd"], t, req_pacer.send_at(fwd_cnps[0][2])))
            if any(c.resp.has_output for c in conns):
                times.append(max(free["rev"], t))
            if cnps:
                times.append(max(free["rev"], t, pacer.send_at(cnps[0][2])))
            if sending:
                times += [d for c in conns if (d := c.req.next_deadline()) is not None]
            if not times:
                break
            t = max(t, min(times))
            # 3. deliver, fire timers, hand out what the tap saw by then
            while arrivals and arrivals[0][0] <= t:
                _, _, direction, k, packet, icrc_ok, ce = heapq.heappop(arrivals)
                c = conns[k]
                if direction == "fwd" and packet.opcode == CNP_OPCODE:
                    continue
                if direction == "fwd":
                    c.resp.receive(packet, t, icrc_ok)
                    if ce and icrc_ok and s.encapsulation.startswith("rocev2"):
                        src, dst = self.framer.address("fwd")
                        if (due := pacer.on_marked(src, dst, c.responder_qpn, t)) is not None:
                            cnps.append((k, cnp_packet(c.requester_qpn), due))
                elif packet.opcode != CNP_OPCODE:
                    if ce and s.encapsulation.startswith("rocev2"):
                        src, dst = self.framer.address("rev")
                        if (due := req_pacer.on_marked(src, dst, c.requester_qpn, t)) is not None:
                            fwd_cnps.append((k, cnp_packet(c.responder_qpn), due))
                    self._note(c, c.req.receive(packet, t, icrc_ok))
                    ready.add(k)
            for c in conns:
                d = c.req.next_deadline()
                if d is not None and d <= t and sending:
                    self._note(c, c.req.timeout(t))
                    ready.add(c.k)
                self._note(c, c.req.pop_events())
            while taps and taps[0][0] <= t:
                if drained is not None:
                    drained.append(drain(taps))
                else:
                    written = yield from self._flush(taps, written)
        if drained is not None:
            drained += [drain(taps) for _ in range(len(taps))]
            assert rest is not None
            rest.resume(handoff[0], written, handoff[1], [c.observed for c in conns], drained)
            self.handed_over = written + 1
            written = yield from self._batches(rest, written)
            for c in conns:   # the rest is lossless: every request completes
                c.completed = c.spec.iters
            t = max(t, rest.done)
        while taps:
            written = yield from self._flush(taps, written)
        self._finish(conns, faults, written)
        return max(t, free["fwd"])

    # --- handing the rest to the fast plan ----------------------------------------------------

    def _rest(self) -> Any:
        """The fast plan that can take over once the faults are over, or None."""
        if not self.fast:
            return None
        from ibwire.gen.fast import plan

        return plan(self, resumed=True)

    @staticmethod
    def _batches(plan: Any, written: int) -> Iterator[Batch]:
        """The fast plan's batches; returns the records written after them."""
        for batch in plan.batches():
            yield batch
            written += len(batch.when)
        return written

    def _flush(self, taps: list, written: int) -> Iterator[tuple[int, bytes]]:
        when, _, frame, hits, (c, packet, ce, bad, *_) = heapq.heappop(taps)
        for entry in hits:
            entry["record"] = written + 1  # numbered from 1, as tshark's frame.number
        reth = packet.reth
        c.see((written, when, packet.opcode, packet.psn, packet.ackreq,
               packet.aeth.syndrome if packet.aeth else 0, reth.dmalen if reth else 0,
               reth.va if reth else 0, packet.payload_len, ce, bad))
        yield when, frame
        return written + 1

    def _wire_ns(self, frame: bytes) -> int:
        """Time ``frame`` takes on the wire (by its length, remembered)."""
        wire = self._wire.get(len(frame))
        if wire is None:
            wire = self._wire[len(frame)] = -(-self.framer.wire_bytes(frame) * 8 * 1000
                                               // round(self.scenario.link.gbps * 1000))
        return wire

    def _send_answer(self, t: int, conns: list[_Conn], paced: tuple[deque, CnpPacer],
                     turn: dict, targeted: dict, rates: dict, rng: random.Random, faults: list
                     ) -> tuple | None:
        s = self.scenario
        cnps, pacer = paced
        if cnps and pacer.send_at(cnps[0][2]) <= t:
            k, packet, due = cnps.popleft()
            pacer.sent(due, t)
            c = conns[k]
            ip_id = self.next_ip_id("rev")
            frame = self.framer.frame(packet, "rev", c.udp_sport, dscp=s.cnp_dscp, ip_id=ip_id)
            return c, packet, frame, [], False, ip_id
        for i in range(len(conns)):
            c = conns[(turn["rev"] + i) % len(conns)]
            packet = c.resp.next_packet(t)
            if packet is None:
                continue
            turn["rev"] = c.k + 1
            read = packet.opcode in c.resp.segmenter.responses.read
            kinds = ("lose_ack", "ecn_resp") if read else ("lose_ack",)
            hits = list(self._hits(kinds, c, packet, True, targeted, rates, rng,
                                   faults).values())
            if packet.aeth is not None and packet.aeth.syndrome >> 5 == 1:
                entry = c.rnr_faults.pop(packet.psn, None)
                if entry is not None:
                    hits.append(entry)
            ip_id = self.next_ip_id("rev")
            frame = self.framer.frame(packet, "rev", c.udp_sport, ip_id=ip_id)
            return c, packet, frame, hits, any(h["kind"] == "lose_ack" for h in hits), ip_id
        return None

    # --- faults and the manifest --------------------------------------------------------------

    def _arm(self, fault: Fault, conns: list[_Conn], faults: list, targeted: dict,
             rates: dict) -> None:
        if fault.rate is not None:
            rates[fault.kind] = fault.rate
            return
        assert fault.qp is not None and fault.psn is not None
        c = conns[fault.qp]
        psn = psn_add(c.start_psn, fault.psn)
        entry = {"kind": fault.kind, "qp": fault.qp, "psn": psn, "record": None}
        faults.append(entry)
        if fault.kind == "rnr":
            c.resp.inject_rnr(psn, fault.timer)
            entry["timer"] = fault.timer
            c.rnr_faults[psn] = entry
        else:
            targeted[(fault.kind, fault.qp, psn)] = entry

    def _hits(self, kinds: tuple[str, ...], c: _Conn, packet: Packet, first: bool,
              targeted: dict, rates: dict, rng: random.Random, faults: list) -> dict:
        hits: dict[str, dict[str, Any]] = {}
        for kind in kinds:
            entry = targeted.pop((kind, c.k, packet.psn), None) if first else None
            if entry is None and kind in rates and first and rng.random() < rates[kind]:
                entry = {"kind": kind, "qp": c.k, "psn": packet.psn, "record": None}
                faults.append(entry)
            if entry is not None:
                hits[kind] = entry
        return hits

    def _note(self, c: _Conn, events: list) -> None:
        for e in events:
            if isinstance(e, Completed):
                c.completed += 1
            elif isinstance(e, Failed):
                c.failed = e.reason

    def _finish(self, conns: list[_Conn], faults: list, written: int) -> None:
        s = self.scenario
        src, dst = self.framer.address("fwd")
        qps = []
        for c in conns:
            c.feed()
            observed = c.observed
            observed.finish()
            qps.append({
                "requester": {"address": src, "qpn": c.requester_qpn},
                "responder": {"address": dst, "qpn": c.responder_qpn},
                "transport": c.spec.transport, "verb": c.spec.verb, "mtu": c.spec.mtu,
                "start_psn": c.start_psn, "message_bytes": c.spec.size if c.spec.verb not in
                ("fetch_add", "cmp_swap") else 8, "posted": c.spec.iters,
                "completed": c.completed, "error": c.failed, "cm_packets": 0,
                "model": {"resent_packets": dict(c.req.resent),
                          "duplicate_requests": c.resp.duplicates,
                          "duplicate_acks": c.resp.duplicate_acks},
                **observed.result()})
        self.manifest = {
            "version": MANIFEST_VERSION, "seed": s.seed, "encapsulation": s.encapsulation,
            "tap": s.tap, "linktype": self.linktype, "records": written,
            "faults": sorted(faults, key=lambda f: (f["record"] is None, f["record"] or 0)),
            "qps": qps,
        }


def generate(scenario: Scenario) -> tuple[list[tuple[int, bytes]], dict[str, Any]]:
    """All frames of ``scenario`` as ``(timestamp_ns, frame)`` in time order, and its manifest."""
    generation = Generation(scenario)
    records = list(generation)
    return records, generation.manifest

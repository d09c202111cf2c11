"""The forwarder: frames in on one interface, out on the other, the fault plan applied.

With the compiled fast path, the loop is the C pump's (``pump.c``, :class:`ibwire.impair.
_fast.Pump`): it polls both ports and forwards, records and summarises every frame that
neither a rule nor the live state needs in Python (:mod:`ibwire.impair.coarse` says which),
and returns when one does, handing back that frame and the rest of its batch: those go
through :meth:`Forwarder._batch` below before the pump reads anything else, so no frame
overtakes one handed to Python (order is kept per direction, and between the directions
as they were handled). The pump also returns at least every ``PUMP_SLICE`` seconds (progress,
held frames, ``duration``), on a signal (Python's handler runs), on :meth:`Forwarder.stop` or
:meth:`Forwarder.inject` (the wake pipe), and when its rows or capture block are full; then
the live state learns from the rows it summarised and its pcap records are written.

Without it (or ``fast=False``) one thread, one loop: poll(2) on both ports, read what has
arrived on a port as one batch,
classify it (:mod:`ibwire.impair.classify`: numpy columns, no Python per frame; the compiled fast path's classifier where built), teach the live connections (:class:`ibwire.impair.state.LiveState`), then:
when no rule may hit a frame of the batch (each rule narrowed with numpy over the
columns) and there is no hook, send the batch on as it is (one system call with the
compiled fast path); else go frame by frame, the rules applied to the frames they may hit.
Frames that are not IB/RoCE (ARP, IPv6 ND, the TCP of the tools' out-of-band exchange) are
never touched, but a checksum the sender left to offload is completed first.

Directions: 0 is A->B (in on the first interface, out on the second), 1 is B->A.
"""

from __future__ import annotations

import os
import random
import select
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ibwire.impair import _io, coarse, forge
from ibwire.impair.capture import CaptureLog
from ibwire.impair.classify import classify
from ibwire.impair.manifest import Manifest
from ibwire.impair.plan import Plan, Rule
from ibwire.impair.ports import SLOT, Batch, ImpairError, Port, check_ports
from ibwire.impair.rules import act, candidates, selects
from ibwire.impair.state import LiveState
from ibwire.transport.opkinds import ACK, ATOMIC_ACK, KIND, READ_RESP, REQUEST
from ibwire.transport.psn import PSN_MASK

Hook = Callable[[bytes, int, LiveState], "Sequence[bytes] | None"]
#: Frames read from a port at a time, at most (recvmmsg(2) batches of the fast path).
BATCH = 256
#: The longest a reordered frame waits for the frames it is to follow (ns).
REORDER_WAIT_NS = 100_000_000
#: How often progress is reported (s).
PROGRESS_EVERY = 1.0
#: The longest the C pump forwards without returning to Python (s).
PUMP_SLICE = 0.1
_HANDOFF, _WAKE = 1, 2
DIRECTION_NAMES = ("a2b", "b2a")


class _Held:
    __slots__ = ("after", "direction", "due", "entry", "frame")

    def __init__(self, frame: bytes, direction: int, due: int, after: int,
                 entry: dict[str, Any] | None) -> None:
        self.frame, self.direction, self.due, self.after = frame, direction, due, after
        self.entry = entry


class Forwarder:
    """A two-port forwarder between interfaces ``iface_a`` and ``iface_b``.

    ``plan``: a :class:`ibwire.impair.plan.Plan` (or (kind, SPEC) pairs); ``hook(frame,
    direction, state)``: called for every IB/RoCE frame after the plan, returns None (forward
    as is), ``[]`` (drop) or frames to send instead, in order, the same direction;
    ``capture``: path of the pcap of what crossed; ``manifest``: path of the JSON manifest.
    The sockets are opened here (the refusals are raised here); :meth:`run` forwards until
    ``duration`` seconds, ``count`` frames arrived or :meth:`stop`. ``fast=False`` reads and
    sends one frame per system call even where the compiled fast path is built; ``tx_ring``
    sends the pump's batches through a ``PACKET_TX_RING`` per port (:mod:`ibwire.impair.
    ports`)."""

    def __init__(self, iface_a: str, iface_b: str, plan: Plan | Sequence[tuple[str, str]] | None
                 = None, hook: Hook | None = None, capture: str | None = None,
                 manifest: str | None = None, *, force: bool = False,
                 progress: Callable[[Forwarder], None] | None = None, batch: int = BATCH,
                 fast: bool = True, tx_ring: bool = False) -> None:
        check_ports(iface_a, iface_b, force)
        self.plan = plan if isinstance(plan, Plan) else Plan.of(list(plan or ()))
        self.hook = hook
        self.interfaces = (iface_a, iface_b)
        self.fast = fast
        self.capture_path, self.manifest_path = capture, manifest
        self.progress = progress
        self.batch = batch
        self.state = LiveState()
        self.state.count_all = any((r.tx or 0) >= 2 for r in self.plan.rules)
        self.rng = random.Random(self.plan.seed)
        self.forwarded = [0, 0]
        self.arrived = [0, 0]
        self.dropped = 0
        self.checksums_completed = 0
        self.faults: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self._held: list[_Held] = []
        #: connection index -> (PSN, manifest entry) of an RNR NAK sent: the requests after
        #: it are discarded until that PSN is sent again (:meth:`_rnr_wait`)
        self._rnr: dict[int, tuple[int, dict[str, Any]]] = {}
        self._injected: deque[tuple[bytes, int]] = deque()
        self._stopping = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.ports = [Port(iface_a, batch, fast, tx_ring=tx_ring)]
        try:
            self.ports.append(Port(iface_b, batch, fast, tx_ring=tx_ring))
        except BaseException:
            self.ports[0].close()
            raise
        self.log: CaptureLog | None = None
        self.started_ns = 0
        self.cpu_seconds = 0.0
        self._cpu = 0.0
        self.batches = 0
        self._pump: Any = None
        self._pump_key: tuple[Any, ...] | None = None
        #: answer keys (direction << 24 | DestQP) no connection took, and how many
        #: connections there were when they were found (a new one may take them)
        self._unbound: set[int] = set()
        self._unbound_at = 0
        #: frames handed from the C pump to Python (tests count them)
        self.handed = 0

    # --- the public controls ---------------------------------------------------------------

    def stop(self) -> None:
        """Ends :meth:`run` soon (from a signal handler or another thread)."""
        self._stopping = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def inject(self, frame: bytes, direction: int) -> None:
        """Sends ``frame`` as if it had arrived going ``direction`` (0: out on B, 1: out on
        A), untouched by the plan; recorded in the capture and the manifest (kind
        ``inject``). While :meth:`run` runs, it is sent by the loop."""
        if direction not in (0, 1):
            raise ImpairError(f"direction must be 0 (A->B) or 1 (B->A), not {direction}")
        self._injected.append((bytes(frame), direction))
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def run(self, duration: float | None = None, count: int | None = None) -> dict[str, Any]:
        """Forwards until ``duration`` s have passed, ``count`` frames have arrived (both
        directions) or :meth:`stop`; then releases held frames, writes the capture and the
        manifest (also when interrupted) and returns the manifest."""
        self.log = CaptureLog(self.capture_path)
        self.started_ns = time.time_ns()
        self._cpu = _cpu_seconds()
        end = None if duration is None else time.monotonic() + duration
        poller = select.poll()
        for port in self.ports:
            poller.register(port.fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        which = {port.fd: d for d, port in enumerate(self.ports)}
        next_progress = time.monotonic() + PROGRESS_EVERY
        self._pump = self._make_pump()
        finished = False
        try:
            while not self._stopping:
                now = time.monotonic()
                if end is not None and now >= end:
                    break
                left = None if count is None else count - sum(self.arrived)
                if left is not None and left <= 0:
                    break
                if self._pump is not None and not any(h.after for h in self._held):
                    until = now + PUMP_SLICE
                    if self.progress is not None:
                        until = min(until, next_progress)
                    if end is not None:
                        until = min(until, end)
                    if self._held:
                        due = min(h.due for h in self._held)
                        until = min(until, now + (due - time.time_ns()) / 1e9)
                    self._pump_once(left, until - now)
                else:
                    self._poll_once(poller, which, left, end, now)
                self._send_injected()
                self._release(time.time_ns())
                if self.progress is not None and time.monotonic() >= next_progress:
                    next_progress = time.monotonic() + PROGRESS_EVERY
                    self.progress(self)
            finished = True
        finally:
            self._release(None)
            self._send_injected()
            self._finish(finished)
        return self.manifest

    def _poll_once(self, poller: select.poll, which: dict[int, int], left: int | None,
                   end: float | None, now: float) -> None:
        """One poll(2) of both ports, each batch read handled in Python."""
        wait = 0.2 if end is None else max(0.0, min(0.2, end - now))
        if self._held:
            due = min(h.due for h in self._held)
            wait = max(0.0, min(wait, (due - time.time_ns()) / 1e9))
        for fd, _ in poller.poll(wait * 1000):
            if fd == self._wake_r:
                self._drain_wake()
                continue
            most = self.batch if left is None else min(self.batch, left)
            batch = self.ports[which[fd]].receive(most)
            if len(batch):
                self._batch(which[fd], batch)
                if left is not None:
                    left -= len(batch)

    def _drain_wake(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except OSError:
            pass

    # --- the C pump -----------------------------------------------------------------------

    def _make_pump(self) -> Any:
        """The C pump over both ports, or None (no compiled fast path, ``fast=False``, or a
        capture on a big-endian host, whose pcap records the pump does not lay out)."""
        assert self.log is not None
        fast = _io.fast
        if (not self.fast or fast is None or not hasattr(fast, "Pump")
                or any(p.fast is None for p in self.ports)
                or (self.log.writer is not None and sys.byteorder != "little")):
            return None
        return fast.Pump([p.pump_arrays() for p in self.ports], self._wake_r, SLOT,
                         min(p.most for p in self.ports), KIND.astype(np.uint8),
                         (REQUEST, ACK, READ_RESP, ATOMIC_ACK), self.log.writer is not None)

    def _pump_filter(self) -> None:
        """Gives the pump the rows of :mod:`ibwire.impair.coarse`, rebuilt when something
        they depend on changed."""
        state = self.state
        if len(state.connections) != self._unbound_at:
            self._unbound.clear()
            self._unbound_at = len(state.connections)
        key = (len(state.connections), len(state.by_requester), tuple(self._rnr),
               tuple(r.spent() for r in self.plan.rules), len(self._unbound))
        if key == self._pump_key:
            return
        self._pump_key = key
        rows = coarse.rule_rows(self.plan.rules, state, self._rnr, self.hook is not None)
        self._pump.filter(rows, *coarse.known_keys(state, self._unbound))

    def _pump_once(self, left: int | None, wait: float) -> None:
        """One call of the pump, then what it summarised learnt, its records written and
        the batch it handed back (if any) handled here."""
        assert self.log is not None
        pump = self._pump
        self._pump_filter()
        reason = pump.run(-1 if left is None else left,
                          time.monotonic_ns() + max(0, int(wait * 1e9)))
        arrived, forwarded, failed, checksums, batches, (port, first, count) = pump.results()
        handed = count - first if reason == _HANDOFF else 0
        for d in (0, 1):
            self.arrived[d] += arrived[d]
            self.forwarded[d] += forwarded[d]
            self.ports[1 - d].failed += failed[d]
        self.checksums_completed += checksums
        self.batches += batches
        self._learn(pump)
        captured = pump.captured()
        if captured is not None:
            self.log.add_prepared(*captured)
        else:
            self.log.add_prepared(None, sum(arrived) - handed, 0, None)
        if reason == _WAKE:
            self._drain_wake()
        if reason == _HANDOFF:
            self.handed += handed
            batch = self.ports[port].handed_back(first, count)
            self._batch(port, batch, counted=True)

    def _learn(self, pump: Any) -> None:
        """The live state fed the rows the pump summarised, each direction's in order."""
        n = pump.rows
        if not n:
            return
        direction = pump.rows_direction[:n]
        columns = {"bth.opcode": pump.rows_opcode[:n], "bth.destqp": pump.rows_destqp[:n],
                   "bth.psn": pump.rows_psn[:n], "aeth.msn": pump.rows_msn[:n]}
        stamps = pump.rows_stamp[:n]
        for d in (0, 1):
            mine = direction == d
            if not mine.any():
                continue
            every = bool(mine.all())
            cols = {k: v if every else v[mine] for k, v in columns.items()}
            cols["ib"] = np.ones(len(cols["bth.psn"]), bool)
            self.state.feed(d, cols, None, stamps if every else stamps[mine])

    def close(self) -> None:
        for port in self.ports:
            port.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> Forwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one batch ----------------------------------------------------------------------------

    def _batch(self, d: int, batch: Batch, counted: bool = False) -> None:
        """One batch going ``d`` (``counted``: the pump counted its arrival already)."""
        assert self.log is not None
        if not counted:
            self.arrived[d] += len(batch)
            self.batches += 1
        if batch.csum.any():
            for i in np.flatnonzero(batch.csum).tolist():
                view = batch.frame(i)
                if forge.complete_checksum(view):  # type: ignore[arg-type]
                    self.checksums_completed += 1
                view.release()
        n = len(batch)
        cols = classify(batch.data, batch.offsets, batch.lengths, self.fast)
        ib = cols["ib"]
        frames = _Frames(batch)
        tx = self.state.feed(d, cols, frames, batch.stamps)
        out = self.ports[1 - d]
        kinds = KIND[cols["bth.opcode"]]
        if self._pump is not None:
            self._unbound |= coarse.unbound_answers(self.state, d, cols, kinds)
        touch = ib if self.hook is not None else candidates(
            self.plan.rules, self.state, self._rnr, d, cols, kinds, tx)
        # a frame held to follow the next ones of this direction goes between them: the
        # batch is sent frame by frame below
        waiting = any(h.direction == d and h.after for h in self._held)
        if not touch.any() and not waiting:
            self.log.add_batch(batch.data, batch.offsets, batch.lengths, batch.stamps)
            self.forwarded[d] += out.send_batch(batch)
            return
        sends: list[bytes] = []
        back: list[bytes] = []
        for i in range(n):
            frame = batch.frame(i)
            stamp = int(batch.stamps[i])
            # an RNR NAK sent for an earlier frame of this batch concerns the rest of it
            if not touch[i] and not (self._rnr and ib[i]):
                self.log.add(frame, stamp)
                sends.append(bytes(frame))
                self._after_send(d, sends)
                continue
            self._frame(d, i, bytearray(frame), stamp, cols, int(kinds[i]), int(tx[i]),
                        sends, back)
            if back:  # a forged answer goes at once, after what went before its trigger
                self.forwarded[d] += out.send(sends)
                self.forwarded[1 - d] += self.ports[d].send(back)
                sends.clear()
                back.clear()
        self.forwarded[d] += out.send(sends)

    def _after_send(self, d: int, sends: list[bytes]) -> None:
        """One more frame went ``d``: reordered frames held for it follow it."""
        if not self._held:
            return
        for h in list(self._held):
            if h.direction == d and h.after > 0:
                h.after -= 1
                if h.after == 0:
                    self._held.remove(h)
                    sends.append(h.frame)
                    if h.entry is not None:
                        h.entry["sent_ns"] = time.time_ns()

    def _release(self, now: int | None) -> None:
        """Sends the held frames that are due (all with ``now`` None)."""
        if not self._held:
            return
        for h in sorted(self._held, key=lambda h: h.due):
            if now is None or h.due <= now:
                self._held.remove(h)
                self.forwarded[h.direction] += self.ports[1 - h.direction].send([h.frame])
                if h.entry is not None:
                    h.entry["sent_ns"] = time.time_ns()

    def _send_injected(self) -> None:
        assert self.log is not None
        while self._injected:
            frame, d = self._injected.popleft()
            stamp = time.time_ns()
            record = self.log.add(frame, stamp)
            self.forwarded[d] += self.ports[1 - d].send([frame])
            self.faults.append({"kind": "inject", "qp": None, "psn": None, "record": record,
                                "direction": DIRECTION_NAMES[d], "time_ns": stamp})

    # --- one IB/RoCE frame ----------------------------------------------------------------

    def _frame(self, d: int, i: int, frame: bytearray, stamp: int, cols: dict[str, np.ndarray],
               kind: int, tx: int, sends: list[bytes], back: list[bytes]) -> None:
        assert self.log is not None
        opcode = int(cols["bth.opcode"][i])
        qpn = int(cols["bth.destqp"][i])
        psn = int(cols["bth.psn"][i])
        conn = self.state.connection_of(d, kind, qpn)
        if conn is not None and conn.index in self._rnr and kind == REQUEST \
                and self._rnr_wait(conn.index, psn, frame, stamp):
            return
        dropped, copies, hold = False, 0, None
        fired: list[tuple[Rule, dict[str, Any]]] = []
        forged: list[tuple[bytes, dict[str, Any]]] = []
        for rule in self.plan.rules:
            if rule.spent() or not selects(rule, d, kind, opcode, qpn, psn, tx, conn):
                continue
            rule.matched += 1
            if rule.nth is not None and rule.matched != rule.nth:
                continue
            if rule.rate is not None and self.rng.random() >= rule.rate:
                continue
            entry = {"kind": rule.kind, "qp": None if conn is None else conn.index,
                     "psn": psn, "record": None, "direction": DIRECTION_NAMES[d],
                     "opcode": _opcode_name(opcode), "qpn": qpn, "tx": tx,
                     "rule": rule.text, "time_ns": stamp}
            why = act(rule, entry, i, frame, cols, conn, psn, forged)
            if why is not None:
                self._note(rule, why)
                continue
            rule.fired += 1
            fired.append((rule, entry))
            if rule.kind in ("drop", "lose_ack", "rnr"):
                dropped = True
            elif rule.kind == "dup":
                copies += rule.copies
            elif rule.kind in ("delay", "reorder"):
                hold = rule
            if dropped:
                break
        outgoing: list[bytes] = [] if dropped else [bytes(frame)]
        if outgoing and self.hook is not None:
            replaced = self.hook(outgoing[0], d, self.state)
            if replaced is not None:
                outgoing = [bytes(f) for f in replaced]
                fired.append((Rule("hook"), {
                    "kind": "hook", "qp": None if conn is None else conn.index, "psn": psn,
                    "record": None, "direction": DIRECTION_NAMES[d], "frames": len(outgoing),
                    "time_ns": stamp}))
        # the frame as sent on (the first of a hook's), or as it arrived when none went
        record = self.log.add(outgoing[0] if outgoing else frame, stamp)
        records = [record]
        if not outgoing:
            self.dropped += 1
        else:
            for extra in outgoing[1:]:
                records.append(self.log.add(extra, time.time_ns()))
            dups = [outgoing[0]] * copies
            for copy in dups:
                records.append(self.log.add(copy, time.time_ns()))
            everything = outgoing + dups
            if hold is not None and everything:
                entry = next(e for r, e in fired if r is hold)
                due = (time.time_ns() + hold.us * 1000 if hold.kind == "delay"
                       else time.time_ns() + REORDER_WAIT_NS)
                for f in everything:
                    self._held.append(_Held(f, d, due, hold.by if hold.kind == "reorder"
                                            else 0, entry))
            else:
                for f in everything:
                    sends.append(f)
                    self._after_send(d, sends)
        for rule, entry in fired:
            entry["record"] = record
            if rule.kind in ("dup", "hook"):
                entry["records"] = records
        for f, entry in forged:
            entry["trigger"] = record
            entry["record"] = self.log.add(f, time.time_ns())
            back.append(f)
            if entry["kind"] == "rnr" and entry["qp"] is not None:
                entry["discarded"] = []
                self._rnr[entry["qp"]] = (psn, entry)
        self.faults.extend(entry for _, entry in fired)

    def _rnr_wait(self, k: int, psn: int, frame: bytearray, stamp: int) -> bool:
        """After an RNR NAK for PSN p, connection ``k``'s responder takes nothing until the
        requester sends p again, as one that is not ready (IBA 9.7.5.2.8): the requests
        after p that were already on their way are discarded (recorded, listed in the RNR
        fault's ``discarded``), so that the responder sees no gap and NAKs nothing itself;
        resends of PSNs before p pass (a requester may go back further than p). True when
        this request was discarded."""
        assert self.log is not None
        waited, entry = self._rnr[k]
        if psn == waited:
            del self._rnr[k]
            return False
        if not 0 < (psn - waited) & PSN_MASK < 1 << 23:
            return False  # a resend of a PSN before p: the responder takes it (a duplicate)
        entry["discarded"].append(self.log.add(frame, stamp))
        self.dropped += 1
        return True

    def _note(self, rule: Rule, why: str) -> None:
        note = f"{rule.kind} {rule.text!r}: a matching frame was left alone: {why}"
        if note not in self.notes:
            self.notes.append(note)

    # --- the end ------------------------------------------------------------------------------

    def _finish(self, finished: bool) -> None:
        assert self.log is not None
        self.cpu_seconds = _cpu_seconds() - self._cpu
        try:
            renumbered = self.log.close()
        except BaseException:
            self.log.abort()
            raise
        if renumbered is not None:
            _renumber(self.faults, renumbered)
        manifest = Manifest(self)
        self.manifest = manifest.build()
        if self.manifest_path:
            manifest.write(self.manifest_path, self.manifest)


class _Frames:
    """Frame ``i`` of a batch as bytes, on demand (what ``LiveState.feed`` keeps)."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch

    def __getitem__(self, i: int) -> bytes:
        return bytes(self.batch.frame(int(i)))


def _renumber(faults: list[dict[str, Any]], renumbered: np.ndarray) -> None:
    """The records the manifest names, after the capture was put in arrival order."""
    for entry in faults:
        for key in ("record", "trigger"):
            if entry.get(key) is not None:
                entry[key] = int(renumbered[entry[key]])
        for key in ("records", "discarded"):
            if entry.get(key):
                entry[key] = [int(renumbered[r]) for r in entry[key]]


def _cpu_seconds() -> float:
    """CPU time (user and system) this thread has used: what forwarding costs, whatever
    share of a core the scheduler gave it."""
    return time.thread_time()


def _opcode_name(opcode: int) -> str:
    from ibwire.tables import opcodes

    op = opcodes().get(opcode)
    return op.name if op is not None else f"0x{opcode:02x}"

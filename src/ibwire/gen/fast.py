"""The fast path: a lossless scenario's frames computed in closed form, in numpy batches.

When nothing can go wrong (no faults, no ECN marks, hence no NAK, retransmission, timeout or
CNP), the conversation the simulation of :mod:`ibwire.gen.run` plays out is known in advance:

- the requester's port sends back to back, round-robin over the queue pairs that still have
  packets, one packet per turn, each taking its wire time (``Generation._wire_ns``);
- the responder ACKs (RC) each packet with AckReq the moment it arrives (its port is free:
  every data frame takes at least as long on the wire as an ACK, which eligibility checks),
  with the MSN of the messages completed so far;
- the tap sees each frame when :mod:`ibwire.gen.run` says, ties broken as its heap breaks
  them (by when the frame was sent, the requester's first).

Frames are not built one by one: one template frame per (QP, opcode, payload length) is
built by :class:`ibwire.gen.frames.Framer` (so the bytes are the slow path's), copied into a
batch, and the fields that change (PSN and AckReq, RETH VA, ImmDt, AETH MSN) are patched in
as columns. The ICRC (and VCRC) of each row is the template's XOR per-byte tables of the
changes: a CRC is linear in its input for a fixed length, so a change ``d`` of one byte at
offset ``p`` always changes the CRC by the same ``T_p[d]``, whatever else changed.

Only eligible scenarios (:func:`plan`) take this path; the rest are simulated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ibwire import crc
from ibwire.gen.frames import ipv4_sum
from ibwire.transport import PSN_MASK, Packet
from ibwire.transport.observed import ROW_FIELDS, Observed
from ibwire.transport.segment import ACK_SYNDROME
from ibwire.transport.timers import local_ack_timeout_ns
from ibwire.transport.verbs import RELIABLE

if TYPE_CHECKING:
    from ibwire.gen.run import Generation

FAST_VERBS = ("send", "send_imm", "send_inv", "write", "write_imm")
#: Data packets generated per batch (then the frames each batch makes are written).
BATCH = 1 << 13
_BYTE_BITS = (np.arange(256)[:, None] >> np.arange(8)) & 1
#: :func:`_scatter` copies a group of rows one by one (:func:`_gather`) when its
#: destinations break into more runs of equal spacing than one per this many rows; it lays
#: them out at most this many bytes at a time.
SCATTERED = 32
GATHER_BYTES = 1 << 20


class _Template:
    """One frame and how to patch it: field offsets, CRC tables for every patched byte."""

    def __init__(self, frame: bytes, link: str, fields: dict[str, tuple[int, int]]) -> None:
        self.frame = np.frombuffer(frame, dtype=np.uint8)
        self.length = len(frame)
        self.link = link
        self.fields = fields
        self.ip_total = ipv4_sum(frame, fields) if "ipid" in fields else 0
        span = crc.locate(frame, link)
        self.icrc_at = span.icrc
        self.vcrc_at = span.vcrc
        self.icrc = crc.icrc(frame, link)
        stored = int.from_bytes(frame[span.icrc:span.icrc + 4], "little")
        self.icrc_order = "<" if stored == self.icrc else ">"
        positions = sorted({o + i for o, n in fields.values() for i in range(n)})
        self.icrc_tables = {p: self._table(frame, p, self._icrc_of) for p in positions}
        if self.vcrc_at >= 0:
            self.vcrc = crc.vcrc(frame, link)
            stored16 = int.from_bytes(frame[span.vcrc:span.vcrc + 2], "little")
            self.vcrc_order = "<" if stored16 == self.vcrc else ">"
            covered = positions + list(range(span.icrc, span.icrc + 4))
            self.vcrc_tables = {p: self._table(frame, p, self._vcrc_of) for p in covered}

    def _icrc_of(self, frame: bytes) -> int:
        return crc.icrc(frame, self.link)

    def _vcrc_of(self, frame: bytes) -> int:
        return crc.vcrc(frame, self.link)

    @staticmethod
    def _table(frame: bytes, at: int, of: Any) -> np.ndarray:
        """CRC change for each XOR value of the byte at ``at``, from its 8 bit changes."""
        base = of(frame)
        basis = np.empty(8, dtype=np.uint32)
        for bit in range(8):
            flipped = bytearray(frame)
            flipped[at] ^= 1 << bit
            basis[bit] = of(bytes(flipped)) ^ base
        table = np.zeros(256, dtype=np.uint32)
        for bit in range(8):
            table ^= np.where(_BYTE_BITS[:, bit] == 1, basis[bit], 0).astype(np.uint32)
        return table

    def rows(self, values: dict[str, np.ndarray], header: int, *, bad_icrc: bool = False
             ) -> _Rows:
        """``len(values)`` rows: ``header`` spare bytes, then the frame patched with ``values``
        (big-endian integers per field) and its CRCs recomputed; kept as the template and
        the patched columns until :func:`_scatter` writes them out. ``bad_icrc``: every bit
        of the ICRC inverted, as :meth:`ibwire.gen.frames.Framer.build` corrupts one (the
        VCRC, which covers it, then changes by a constant)."""
        n = len(next(iter(values.values())))
        patches: list[tuple[int, np.ndarray]] = []
        icrc = np.full(n, self.icrc, dtype=np.uint32)
        vcrc = np.full(n, getattr(self, "vcrc", 0), dtype=np.uint32)
        for name, column in values.items():
            at, width = self.fields[name]
            raw = column.astype(f">u{8 if width > 4 else 4}").view(np.uint8).reshape(n, -1)
            raw = raw[:, raw.shape[1] - width:]
            delta = raw ^ self.frame[at:at + width]
            for i in range(width):
                icrc ^= self.icrc_tables[at + i][delta[:, i]]
                if self.vcrc_at >= 0:
                    vcrc ^= self.vcrc_tables[at + i][delta[:, i]]
            patches.append((header + at, raw))
        if bad_icrc:
            icrc ^= np.uint32(0xFFFFFFFF)
        crc_bytes = icrc.astype(f"{self.icrc_order}u4").view(np.uint8).reshape(n, 4)
        if self.vcrc_at >= 0:
            old = self.frame[self.icrc_at:self.icrc_at + 4]
            for i in range(4):
                vcrc ^= self.vcrc_tables[self.icrc_at + i][crc_bytes[:, i] ^ old[i]]
            v = vcrc.astype(np.uint16).astype(f"{self.vcrc_order}u2").view(np.uint8)
            patches.append((header + self.vcrc_at, v.reshape(n, 2)))
        patches.append((header + self.icrc_at, crc_bytes))
        full = np.concatenate((np.zeros(header, dtype=np.uint8), self.frame))
        return _Rows(full, patches, n)


class _Rows:
    """``n`` frames alike but for a few columns: the template row and (offset, columns)."""

    def __init__(self, template: np.ndarray, patches: list[tuple[int, np.ndarray]],
                 n: int) -> None:
        self.template = template
        self.patches = patches
        self.n = n
        self.width = len(template)

    def take(self, index: np.ndarray) -> _Rows:
        return _Rows(self.template, [(at, raw[index]) for at, raw in self.patches], len(index))

    def part(self, start: int, stop: int) -> _Rows:
        return _Rows(self.template, [(at, raw[start:stop]) for at, raw in self.patches],
                     stop - start)


@dataclass
class _Qp:
    k: int
    n: int                  # packets per message
    packets: int            # packets in all
    start_psn: int
    ack_every: int | None
    reliable: bool
    stride: int             # remote VA step per message
    templates: list[_Template]          # first/middle/last/only by class index
    wire: list[int]                     # wire ns by class index
    ack: _Template | None
    requester_qpn: int
    responder_qpn: int
    opcodes: list[int]                  # by class index
    payloads: list[int]
    dmalen: int                         # RETH DMA length of the packets that carry one
    ack_opcode: int                     # ACKNOWLEDGE of the transport (RC 0x11, XRC 0xB1)


def plan(generation: Generation, *, resumed: bool = False) -> _Plan | None:
    """The fast plan of ``generation``'s scenario, or None when it must be simulated.
    ``resumed``: a plan for the rest of a conversation the simulation played until its
    faults were over (:meth:`_Plan.resume`), whatever faults the scenario names."""
    from ibwire.gen.run import SEND_QUEUE_DEPTH

    s = generation.scenario
    if (s.faults and not resumed) or any(q.verb not in FAST_VERBS or q.window is not None or q.iters < 1
                       for q in s.qps):
        return None
    framer = generation.framer
    qps = []
    for k, spec in enumerate(s.qps):
        wr = next(s.work(k))
        n = s.psns_per_message(k)
        requester_qpn, responder_qpn = s.qpns(k)
        udp = s.udp_sport(k)
        segmenter = generation_segmenter(s, k)
        templates, wire, ops, payloads = [], [], [], []
        dmalen = 0
        for packet in class_packets(s, k):
            template = _template(framer, packet, udp)
            if template is None:
                return None
            templates.append(template)
            wire.append(generation._wire_ns(bytes(template.frame)))
            ops.append(packet.opcode)
            payloads.append(packet.payload_len)
            if packet.reth is not None:
                dmalen = packet.reth.dmalen
        ack = None
        ack_packet = segmenter.ack(s.start_psn(k), 1)._replace(dest_qp=requester_qpn)
        if spec.transport in RELIABLE:
            ack = _template(framer, ack_packet, udp, "rev")
            if ack is None:
                return None
        qps.append(_Qp(k, n, n * spec.iters, s.start_psn(k), spec.ack_every,
                       spec.transport in RELIABLE, max(wr.length, 8), templates, wire, ack,
                       requester_qpn, responder_qpn, ops, payloads, dmalen,
                       ack_packet.opcode))
    smallest = min(w for q in qps for w in q.wire)
    ack_wire = max((generation._wire_ns(bytes(q.ack.frame)) for q in qps if q.ack), default=0)
    if smallest < ack_wire or smallest <= 0:
        return None                 # the responder's port could be busy: simulate
    longest = max(w for q in qps for w in q.wire)
    rtt = 2 * s.link.delay_ns + longest + ack_wire
    in_flight = rtt // smallest + 2
    if in_flight >= SEND_QUEUE_DEPTH or BATCH * longest + 4 * rtt >= 1 << 29:
        return None                 # a batch's times would not fit the sort key
    for spec, q in zip(s.qps, qps, strict=True):
        if not q.reliable:
            continue
        run = min(q.n, spec.ack_every or q.n)     # packets between two AckReqs at most
        gap = (run * len(qps) + in_flight) * longest + rtt
        timeout = local_ack_timeout_ns(spec.timeout)
        if timeout is not None and timeout <= gap:
            return None             # the local ACK timer could fire between ACKs: simulate
    return _Plan(generation, qps, ack_wire)


def asks_ack(q: _Qp, index: np.ndarray) -> np.ndarray:
    """Whether each of QP ``q``'s PSN indices ``index`` has AckReq set: a message's last
    packet, and every ``ack_every``-th."""
    a = index % q.n == q.n - 1
    if q.ack_every is not None:
        a |= (index + 1) % q.ack_every == 0
    return a


def _class(n: int, j: int) -> int:
    """Template index of the ``j``-th packet of an ``n``-packet message."""
    if n <= 3:
        return j
    return 0 if j == 0 else 2 if j == n - 1 else 1


def generation_segmenter(s: Any, k: int) -> Any:
    from ibwire.transport.segment import Segmenter

    c = s.requester_config(k)
    return Segmenter(c.transport, c.pmtu, c.dest_qp, c.src_qp, c.q_key, c.ack_every, c.xrc_srq)


def class_packets(s: Any, k: int) -> list[Packet]:
    """The request packets QP ``k``'s templates are made of, by class index (:func:`_class`):
    the first, a middle and the last of its first message."""
    wr = next(s.work(k))
    n = s.psns_per_message(k)
    segmenter = generation_segmenter(s, k)
    return [segmenter.request(wr, j, s.start_psn(k), j)
            for j in ((0, n // 2, n - 1) if n > 2 else range(n))]


def _template(framer: Any, packet: Packet, udp: int, direction: str = "fwd", *,
              ce: bool = False, dscp: int | None = None) -> _Template | None:
    """The template of ``packet`` (CE-marked: ``ce``; with DSCP ``dscp``) with the offsets
    of its changing fields (:meth:`ibwire.gen.frames.Framer.patch_points`), or None."""
    found = framer.patch_points(packet, direction, udp, ce=ce, dscp=dscp)
    return None if found is None else _Template(found[0], framer.link, found[1])


class _Plan:
    def __init__(self, generation: Generation, qps: list[_Qp], ack_wire: int) -> None:
        self.generation = generation
        self.qps = qps
        self.ack_wire = ack_wire
        s = generation.scenario
        self.delay = s.link.delay_ns
        self.tap = s.tap
        self.observed = [Observed(spec.mtu) for spec in s.qps]
        self.records = 0
        self.start = 0
        self.done = 0       # when the requester is done: its port free, its last ACK in
        self.offsets = [0] * len(qps)
        self.drained: list[tuple] = []

    def begin(self, start: int, first: int) -> None:
        """Send the first data packet at ``start`` (ns); the first record is ``first``."""
        self.start = self.done = start
        self.records = first

    def resume(self, start: int, first: int, offsets: list[int], observed: list[Observed],
               drained: list[tuple]) -> None:
        """Go on with a conversation the simulation played so far: each QP's next packet
        is its ``offsets[k]``-th, the first sent at ``start``; the first record is ``first``;
        ``observed`` are the connections' observers. ``drained``: what the simulation still
        had on its way then (and the answers it drew), each ``(when, sent, direction, frame,
        row, hits)``: ``row`` the observer's columns (ROW_FIELDS after record and time),
        ``hits`` the fault entries whose record it is. They are merged in time order."""
        self.begin(start, first)
        self.offsets = offsets
        self.observed = observed
        self.drained = drained

    def manifest(self, records: int, faults: list[dict[str, Any]] | None = None,
                 resent: dict[str, int] | None = None, duplicates: int = 0
                 ) -> dict[str, Any]:
        """The manifest, as :meth:`ibwire.gen.Generation._finish` writes it, once every batch
        of :meth:`chunks` was read; ``faults`` the fault entries (records filled in),
        ``resent`` the requester's resends by cause and ``duplicates`` the duplicate
        SEND/WRITE packets its responder ACKed (one QP's; none when None)."""
        s = self.generation.scenario
        src, dst = self.generation.framer.address("fwd")
        out = []
        for q, spec, observed in zip(self.qps, s.qps, self.observed, strict=True):
            observed.finish()
            out.append({
                "requester": {"address": src, "qpn": q.requester_qpn},
                "responder": {"address": dst, "qpn": q.responder_qpn},
                "transport": spec.transport, "verb": spec.verb, "mtu": spec.mtu,
                "start_psn": q.start_psn, "message_bytes": spec.size, "posted": spec.iters,
                "completed": spec.iters, "error": None, "cm_packets": 0,
                "model": {"resent_packets": dict(resent or {"nak": 0, "timeout": 0, "rnr": 0,
                                                            "read": 0}),
                          "duplicate_requests": duplicates, "duplicate_acks": duplicates},
                **observed.result()})
        return {"version": 1, "seed": s.seed, "encapsulation": s.encapsulation, "tap": s.tap,
                "linktype": self.generation.linktype, "records": records,
                "faults": sorted(faults or [], key=lambda f: (f["record"] is None,
                                                              f["record"] or 0)),
                "qps": out}

    def _observe(self, when: np.ndarray, meta: np.ndarray) -> None:
        """Feed a batch of records, in capture order, to each connection's observer."""
        record = self.records + np.arange(len(when), dtype=np.int64)
        self.records += len(when)
        for q, observed in zip(self.qps, self.observed, strict=True):
            sel = meta[:, 0] == q.k
            if not sel.any():
                continue
            m = meta[sel]
            # (the VA is 0 but in the rows the simulation drained: it only tells resent
            # READs apart, and no READ takes this path)
            columns = (record[sel], when[sel], m[:, 1], m[:, 2], m[:, 3], m[:, 4], m[:, 5],
                       m[:, 7], m[:, 6], m[:, 8], m[:, 9])
            observed.feed(dict(zip(ROW_FIELDS, columns, strict=True)))

    @staticmethod
    def _ackreq(q: _Qp, index: np.ndarray) -> np.ndarray:
        return asks_ack(q, index)

    def _order(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(qp, index) of the data packets in sending order, a batch at a time."""
        offsets = np.array(self.offsets, dtype=np.int64)
        counts = np.array([q.packets for q in self.qps], dtype=np.int64) - offsets
        rounds = int(counts.max())
        r = 0
        while r < rounds:
            active = np.flatnonzero(counts > r)
            end = min(rounds, int(counts[active].min()), r + max(1, BATCH // len(active)))
            block = np.arange(r, end, dtype=np.int64)
            yield (np.tile(active, len(block)),
                   np.repeat(block, len(active)) + np.tile(offsets[active], len(block)))
            r = end

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Batches of records in capture order: (timestamps, starts, lengths, buffer): the
        frame of record i is ``buffer[starts[i]:starts[i] + lengths[i]]`` and the 16 bytes
        before it hold its little-endian nanosecond pcap record header."""
        for batch in self.batches():
            out = np.empty(batch.size, dtype=np.uint8)
            batch.fill(out)
            yield batch.when, batch.starts, batch.lengths, out

    def batches(self) -> Iterator[Batch]:
        """The batches of :meth:`chunks` before their bytes are laid out: each one's
        :meth:`Batch.fill` writes them into any buffer of its ``size`` (a file's mapped
        pages, say), in any thread, while the next batch is made."""
        pending: list[tuple] = [self._drained(d) for d in self.drained]  # rows, tie, when, meta
        t0 = self.start
        delay, tap = self.delay, self.tap
        for ks, index in self._order():
            made: list[tuple[np.ndarray, ...]] = []
            wire = np.empty(len(ks), dtype=np.int64)
            cls = np.empty(len(ks), dtype=np.int64)
            for q in self.qps:
                sel = ks == q.k
                j = index[sel] % q.n
                c = (np.where(j == 0, 0, np.where(j == q.n - 1, 2, 1)) if q.n > 3 else j)
                cls[sel] = c
                wire[sel] = np.array(q.wire, dtype=np.int64)[c]
            ends = t0 + np.cumsum(wire)
            sent = ends - wire
            t0 = int(ends[-1])
            self.done = max(self.done, t0)
            arrive = ends + delay
            seen = {"requester": sent, "switch": sent + delay // 2, "responder": arrive}[tap]
            # each host's IPv4 IDs count up in the order it sends: the requester's its
            # packets, the responder's its ACKs (sent on arrival, so in the same order)
            acked = np.zeros(len(ks), dtype=bool)
            for q in self.qps:
                if q.reliable:
                    sel = ks == q.k
                    acked[sel] = self._ackreq(q, index[sel])
            ids = self.generation.ip_ids
            fwd_ids = (ids["fwd"] + np.arange(len(ks), dtype=np.int64)) & 0xFFFF
            rev_ids = (ids["rev"] + np.cumsum(acked) - 1) & 0xFFFF
            ids["fwd"] = (ids["fwd"] + len(ks)) & 0xFFFF
            ids["rev"] = (ids["rev"] + int(acked.sum())) & 0xFFFF
            for q in self.qps:
                sel = ks == q.k
                qi, qc, qs, qseen = index[sel], cls[sel], sent[sel], seen[sel]
                msg = qi // q.n
                psn = (q.start_psn + qi) & PSN_MASK
                ackreq = acked[sel]
                q_ids = fwd_ids[sel]
                for c, template in enumerate(q.templates):
                    pick = qc == c
                    if not pick.any():
                        continue
                    values = _request_columns(template, q.stride, psn[pick], ackreq[pick],
                                              msg[pick], q_ids[pick])
                    meta = np.column_stack((
                        np.full(len(values["word"]), q.k), np.full(len(values["word"]),
                                                                   q.opcodes[c]),
                        psn[pick], ackreq[pick], np.zeros(len(values["word"]), np.int64),
                        np.full(len(values["word"]), q.dmalen if "va" in template.fields
                                else 0),
                        np.full(len(values["word"]), q.payloads[c]),
                        *[np.zeros(len(values["word"]), np.int64)] * 3)).astype(np.int64)
                    made.append((template.rows(values, 16), _tie(qseen[pick], qs[pick], 0),
                                 qseen[pick], meta))
                if q.ack is not None and ackreq.any():
                    s_ack = arrive[sel][ackreq]
                    self.done = max(self.done, int(s_ack[-1]) + self.ack_wire + delay)
                    done = (qi[ackreq] + 1) // q.n
                    values = {"word": psn[ackreq], "msn": done & PSN_MASK}
                    if "ipid" in q.ack.fields:
                        values.update(_ip_id_columns(q.ack, rev_ids[sel][ackreq]))
                    when = {"requester": s_ack + self.ack_wire + delay,
                            "switch": s_ack + delay // 2, "responder": s_ack}[tap]
                    count = len(s_ack)
                    meta = np.column_stack((
                        np.full(count, q.k), np.full(count, q.ack_opcode), psn[ackreq],
                        np.zeros(count, np.int64), np.full(count, ACK_SYNDROME),
                        np.zeros(count, np.int64), np.zeros(count, np.int64),
                        *[np.zeros(count, np.int64)] * 3)).astype(np.int64)
                    made.append((q.ack.rows(values, 16), _tie(when, s_ack, 1), when, meta))
            seen_next = {"requester": t0, "switch": t0 + delay // 2, "responder": t0 + delay}
            horizon = (seen_next[tap], int(_tie(np.array([seen_next[tap]]), np.array([t0]),
                                                0)[0]))
            out, pending = _merge(made + pending, horizon)
            if out is not None:
                yield self._emit(out)
        if pending:
            out, _ = _merge(pending, None)
            if out is not None:
                yield self._emit(out)

    def _emit(self, batch: Batch) -> Batch:
        for position, hits in batch.hits:
            for entry in hits:
                entry["record"] = self.records + position + 1   # numbered from 1
        self._observe(batch.when, batch.meta)
        return batch

    @staticmethod
    def _drained(record: tuple) -> tuple:
        """A record the simulation drained, as a group of one row for :func:`_merge`."""
        when, sent, direction, frame, row, hits = record
        rows = _Rows(np.frombuffer(bytes(16) + frame, dtype=np.uint8), [], 1)
        meta = np.array([row[:6] + row[7:8] + row[6:7] + row[8:]], dtype=np.int64)
        return (rows, _tie(np.array([when]), np.array([sent]), direction),
                np.array([when], dtype=np.int64), meta, hits)


@dataclass
class Batch:
    """Records in capture order, laid out back to back in ``size`` bytes: record i's frame
    at ``starts[i]`` (``lengths[i]`` bytes), its pcap record header in the 16 bytes before;
    ``meta`` the observer's columns. The bytes are made by :meth:`fill`."""

    when: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    meta: np.ndarray
    size: int
    parts: list[tuple[np.ndarray, _Rows]]     # (destinations, rows) of each group
    hits: list[tuple[int, list]]              # (position, fault entries) of drained records

    @property
    def longest(self) -> int:
        return int(self.lengths.max())

    def fill(self, out: np.ndarray) -> None:
        """Write the records into ``out`` (uint8, ``size`` long)."""
        if len(out) != self.size:
            raise ValueError(f"a batch of {self.size} bytes, a buffer of {len(out)}")
        for dest, rows in self.parts:
            _scatter(out, dest, rows)


def _merge(groups: list[tuple[np.ndarray, ...]], horizon: tuple[int, int] | None
           ) -> tuple[Batch | None, list]:
    """The records of ``groups`` (rows, tie, when, meta) that come before ``horizon`` (when,
    tie; None: all), in capture order, as a :class:`Batch`; and the groups of those left."""
    tie = np.concatenate([g[1] for g in groups])
    when = np.concatenate([g[2] for g in groups])
    base = int(when.min()) if horizon is None else min(int(when.min()), horizon[0])
    key = ((when - base) << 32) | tie
    meta = np.concatenate([g[3] for g in groups])
    gid = np.concatenate([np.full(len(g[1]), i, dtype=np.int64) for i, g in enumerate(groups)])
    rid = np.concatenate([np.arange(len(g[1]), dtype=np.int64) for g in groups])
    order = np.argsort(key, kind="stable")
    cut = len(order) if horizon is None else int(np.searchsorted(
        key[order], ((horizon[0] - base) << 32) | horizon[1]))
    now, later = order[:cut], order[cut:]
    left = []
    for g in np.unique(gid[later]):
        sel = later[gid[later] == g]
        left.append((groups[g][0].take(rid[sel]), tie[sel], when[sel], meta[sel],
                     *groups[g][4:]))
    if not cut:
        return None, left
    widths = np.array([g[0].width for g in groups], dtype=np.int64)
    gnow, rnow = gid[now], rid[now]
    sizes = widths[gnow]
    ends = np.cumsum(sizes)
    dest = ends - sizes
    stamps = _record_headers(when[now], sizes - 16)
    parts = []
    hits = [(int(np.flatnonzero(gnow == g)[0]), groups[g][4]) for g in np.unique(gnow)
            if len(groups[g]) > 4 and groups[g][4]]
    for g in np.unique(gnow):
        at = np.flatnonzero(gnow == g)
        r = rnow[at]
        rows = groups[g][0]
        if int(r[-1]) - int(r[0]) == len(r) - 1 and bool((np.diff(r) == 1).all()):
            rows = rows.part(int(r[0]), int(r[0]) + len(r))
        else:
            rows = rows.take(r)
        # the pcap record header goes in with the group's own strided copies
        parts.append((dest[at], _Rows(rows.template, [*rows.patches, (0, stamps[at])],
                                      len(r))))
    return Batch(when[now], dest + 16, sizes - 16, meta[now], int(ends[-1]), parts,
                 hits), left


def _request_columns(template: _Template, stride: int, psn: np.ndarray, ackreq: np.ndarray,
                     msg: np.ndarray, ip_ids: np.ndarray) -> dict[str, np.ndarray]:
    """The columns a request template takes: BTH's PSN word (AckReq in bit 31), the IPv4 ID
    and checksum, the RETH VA of message ``msg`` (``stride`` bytes apart) and its
    immediate (the message number)."""
    values = {"word": psn | ackreq.astype(np.int64) << 31}
    if "ipid" in template.fields:
        values.update(_ip_id_columns(template, ip_ids))
    if "va" in template.fields:
        values["va"] = 0x10000 + msg * stride
    if "imm" in template.fields:
        values["imm"] = msg
    return values


def _ip_id_columns(template: _Template, ids: np.ndarray) -> dict[str, np.ndarray]:
    """The IPv4 ID column and the header checksum column it makes (RFC 1071, as
    :func:`ibwire.gen.frames.ipv4_checksum_with`)."""
    total = template.ip_total + ids
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return {"ipid": ids, "ipsum": ~total & 0xFFFF}


def _record_headers(when: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Little-endian nanosecond pcap record headers (seconds, nanoseconds, captured and
    original length), one row of 16 bytes per record."""
    header = np.empty((len(when), 4), dtype="<u4")
    header[:, 0], header[:, 1] = np.divmod(when, 1_000_000_000)
    header[:, 2] = header[:, 3] = lengths
    return header.view(np.uint8).reshape(len(when), 16)


def _scatter(out: np.ndarray, dest: np.ndarray, rows: _Rows) -> None:
    """``out[dest[i]:dest[i] + width] = rows[i]`` for every i (``dest`` ascending, rows not
    overlapping), one strided copy of the template and of each patched column per run of
    equally spaced destinations."""
    width = rows.width
    n = len(dest)
    step = np.diff(dest)
    breaks = np.flatnonzero(step[1:] != step[:-1]) + 1
    if len(breaks) * SCATTERED > n:
        _gather(out, dest, rows)
        return
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks, [n - 1]))     # run k covers records first[k]..last[k]
    for a, b in zip(first.tolist(), last.tolist(), strict=True):
        stride = int(step[a]) if a < n - 1 else width
        view = np.lib.stride_tricks.as_strided(out[int(dest[a]):], shape=(b - a + 1, width),
                                               strides=(stride, 1), writeable=True)
        view[:] = rows.template
        for at, raw in rows.patches:
            view[:, at:at + raw.shape[1]] = raw[a:b + 1]


def _gather(out: np.ndarray, dest: np.ndarray, rows: _Rows) -> None:
    """:func:`_scatter` for rows whose destinations are spaced unevenly (runs of a few: the
    frames of a fault, or between them): the rows laid out side by side, a slice of rows
    at a time (its size bounded), then each copied to its place."""
    width = rows.width
    step = max(1, GATHER_BYTES // width)
    # row i of this view is out[i:i + width]: indexing it with the destinations copies each
    # row whole
    frames = np.lib.stride_tricks.as_strided(out, shape=(len(out) - width + 1, width),
                                             strides=(1, 1), writeable=True)
    for a in range(0, len(dest), step):
        b = min(len(dest), a + step)
        block = np.empty((b - a, width), dtype=np.uint8)
        block[:] = rows.template
        for at, raw in rows.patches:
            block[:, at:at + raw.shape[1]] = raw[a:b]
        frames[dest[a:b]] = block


def _tie(when: np.ndarray, pushed: np.ndarray, direction: int) -> np.ndarray:
    """The low 32 bits of the heap order of :mod:`ibwire.gen.run` (frames seen at the same
    time): by time sent, the requester's first. The high bits are the time seen."""
    return (((1 << 30) - (when - pushed)) << 1) + direction

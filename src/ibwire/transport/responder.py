"""The responder side of a queue pair: request packets in, messages, ACKs and READ responses out.

RC (IBA Vol. 1 9.7.5; the behaviour of Linux ``rxe_resp.c``):
- The responder expects one PSN. A request with it is accepted: the expected PSN moves on
  (by the PSNs a READ reserves, else by one) and a message's last packet, a READ request or
  an atomic increments the MSN (READ: when the request is accepted, C9-148).
- An accepted packet with AckReq is ACKed with its PSN and the MSN. A READ is answered by its
  responses, an atomic by an ATOMIC ACKNOWLEDGE with the value found.
- A request with a later PSN is out of sequence: it is dropped and the first one of a gap
  draws a NAK "PSN sequence error" naming the expected PSN; no other NAK follows until the
  expected PSN arrives (one NAK outstanding). An RNR NAK counts as that NAK too.
- A request with an earlier PSN is a duplicate: every duplicate SEND/WRITE packet, AckReq
  or not, is ACKed with the latest PSN accepted (C9-105; Linux ``rxe_resp.c``
  ``duplicate_request()`` acks ``ack_psn - 1``), so a requester that went back after a
  timeout learns at once how far the responder got; but never past a READ or atomic after
  the duplicate (its repeated answer comes later, and the requester would take it for
  lost): then up to the PSN before it. A READ is answered again from its PSN with the MSN
  it had, an atomic gets its saved ATOMIC ACK (9.7.5.1.2).
- A packet with a bad ICRC is dropped silently, never NAKed (rxe drops it in ``rxe_rcv()``
  when ``rxe_icrc_check()`` fails, before the responder sees it).
XRC (the TGT QP) answers as RC does, with the XRC answer opcodes.
UC: no answers at all; a lost packet loses the rest of its message, and the responder takes
the next FIRST or ONLY at whatever PSN it has (9.7.5.2). UD: each packet is a message; the
PSN is not checked, a wrong Q_Key drops it (10.2.5).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from ibwire.transport.events import (
    Delivered,
    Discarded,
    Duplicate,
    Event,
    OutOfSequence,
    RnrNakSent,
)
from ibwire.transport.packets import Packet
from ibwire.transport.psn import check_psn, msn_add, psn_add, psn_diff, psn_in_range
from ibwire.transport.segment import NAK_INVALID_REQUEST, Segmenter, packets_for
from ibwire.transport.verbs import TRANSPORTS, RequestKind, TransportError, request_kinds

_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class ResponderConfig:
    """A responder QP's attributes. ``start_psn`` is the first PSN expected, ``dest_qp`` the
    requester's QPN (where answers go), ``q_key`` the Q_Key UD datagrams must carry.
    ``coalesce_acks``: an ACK replaces an earlier ACK still waiting to be sent.
    ``answers_kept``: READs and atomics remembered for answering duplicates."""

    transport: str = "RC"
    pmtu: int = 1024
    start_psn: int = 0
    dest_qp: int = 0
    q_key: int = 0
    start_msn: int = 0
    coalesce_acks: bool = False
    answers_kept: int = 64

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise TransportError(f"transport {self.transport!r} is not one of "
                                 f"{', '.join(TRANSPORTS)}")
        check_psn(self.start_psn, "start PSN")


class _Answer:
    """A READ or atomic accepted: its PSNs, the MSN it got, the original value of an atomic."""

    __slots__ = ("first", "npsn", "msn", "original")

    def __init__(self, first: int, npsn: int, msn: int, original: int | None) -> None:
        self.first, self.npsn, self.msn, self.original = first, npsn, msn, original


class _Message:
    __slots__ = ("family", "first_psn", "length")

    def __init__(self, family: str, first_psn: int) -> None:
        self.family, self.first_psn, self.length = family, first_psn, 0


class Responder:
    """The receiving half of an RC, UC, UD or XRC (TGT) queue pair."""

    def __init__(self, config: ResponderConfig) -> None:
        self.config = config
        self.segmenter = Segmenter(config.transport, config.pmtu, config.dest_qp)
        self.expected_psn = config.start_psn
        self.msn = config.start_msn
        #: 8-byte words at remote VAs, as atomics find and leave them.
        self.memory: dict[int, int] = {}
        self._nak_outstanding = False
        self._message: _Message | None = None
        self._out: deque[Packet | Iterator[Packet]] = deque()
        self._rnr: dict[int, int] = {}
        self._answers: deque[_Answer] = deque(maxlen=config.answers_kept)
        self._kinds = request_kinds()
        #: Duplicate requests taken (Linux rxe's ``duplicate_request`` counter), and the
        #: ACKs queued for the SEND/WRITE ones among them.
        self.duplicates = 0
        self.duplicate_acks = 0

    # --- faults ------------------------------------------------------------------------------

    def inject_rnr(self, psn: int, timer: int) -> None:
        """Answer the packet with ``psn`` with an RNR NAK carrying ``timer`` the next time it
        arrives as the expected PSN (as if no receive WQE were posted)."""
        if not 0 <= timer <= 31:
            raise ValueError(f"RNR timer code {timer} is not 0..31")
        self._rnr[check_psn(psn)] = timer

    # --- output ------------------------------------------------------------------------------

    def next_packet(self, now_ns: int = 0) -> Packet | None:
        """The next answer to put on the wire (ACK, NAK, READ response, atomic ACK), or None."""
        out = self._out
        while out:
            item = out[0]
            if isinstance(item, Packet):
                out.popleft()
                return item
            packet = next(item, None)
            if packet is not None:
                return packet
            out.popleft()
        return None

    @property
    def has_output(self) -> bool:
        return bool(self._out)

    @property
    def rnr_pending(self) -> bool:
        """Whether an RNR NAK injected with :meth:`inject_rnr` is still to be sent."""
        return bool(self._rnr)

    def _queue_ack(self, packet: Packet) -> None:
        out = self._out
        if (self.config.coalesce_acks and out and isinstance(out[-1], Packet)
                and out[-1].opcode == self.segmenter.responses.ack and out[-1].aeth is not None
                and out[-1].aeth.syndrome >> 5 == 0):
            out[-1] = packet
        else:
            out.append(packet)

    # --- input -------------------------------------------------------------------------------

    def receive(self, packet: Packet, now_ns: int = 0, icrc_ok: bool = True) -> list[Event]:
        """Take one request packet addressed to this QP; answers wait in :meth:`next_packet`."""
        if not icrc_ok:
            return [Discarded(packet.psn, "icrc", now_ns)]
        kind = self._kinds.get(packet.opcode)
        transport = self.config.transport
        if kind is None or not packet.name.startswith(transport):
            return [Discarded(packet.psn, "unexpected", now_ns)]
        if transport == "UD":
            return self._receive_ud(packet, kind, now_ns)
        if transport == "UC":
            return self._receive_uc(packet, kind, now_ns)
        return self._receive_rc(packet, kind, now_ns)

    def _receive_rc(self, packet: Packet, kind: RequestKind, now: int) -> list[Event]:
        d = psn_diff(packet.psn, self.expected_psn)
        if d > 0:
            nak = not self._nak_outstanding
            if nak:
                self._nak_outstanding = True
                self._out.append(self.segmenter.nak(self.expected_psn, self.msn))
            return [OutOfSequence(packet.psn, self.expected_psn, nak, now)]
        if d < 0:
            return self._duplicate(packet, kind, now)
        timer = self._rnr.pop(packet.psn, None)
        if timer is not None:
            self._nak_outstanding = True
            self._out.append(self.segmenter.rnr_nak(packet.psn, self.msn, timer))
            return [RnrNakSent(packet.psn, timer, now)]
        if not self._in_sequence(kind):
            self._nak_outstanding = True
            self._out.append(self.segmenter.nak(packet.psn, self.msn, NAK_INVALID_REQUEST))
            return [Discarded(packet.psn, "opcode_sequence", now)]
        self._nak_outstanding = False
        events = self._accept(packet, kind, now)
        if packet.ackreq and kind.family in ("send", "write"):
            self._queue_ack(self.segmenter.ack(packet.psn, self.msn))
        return events

    def _in_sequence(self, kind: RequestKind) -> bool:
        if self._message is None:
            return kind.position in ("first", "only")
        return kind.family == self._message.family and kind.position in ("middle", "last")

    def _accept(self, packet: Packet, kind: RequestKind, now: int) -> list[Event]:
        """An in-sequence request: deliver it, answer READs and atomics, move the PSN on."""
        psn = packet.psn
        if kind.family == "read":
            assert packet.reth is not None
            length = packet.reth.dmalen
            npsn = packets_for(length, self.config.pmtu)
            self.msn = msn_add(self.msn)
            self._answers.append(_Answer(psn, npsn, self.msn, None))
            self._out.append(self.segmenter.read_responses(psn, length, self.msn, packet.wr_id))
            self.expected_psn = psn_add(psn, npsn)
            return [Delivered("read", psn, psn_add(psn, npsn - 1), length, self.msn, now)]
        if kind.family == "atomic":
            assert packet.atomic is not None and kind.verb is not None
            original = self._atomic(kind.verb, packet)
            self.msn = msn_add(self.msn)
            self._answers.append(_Answer(psn, 1, self.msn, original))
            self._out.append(self.segmenter.atomic_ack(psn, self.msn, original))
            self.expected_psn = psn_add(psn, 1)
            return [Delivered(kind.verb, psn, psn, 8, self.msn, now)]
        if kind.position in ("first", "only"):
            self._message = _Message(kind.family, psn)
        message = self._message
        assert message is not None
        message.length += packet.payload_len
        self.expected_psn = psn_add(psn, 1)
        if kind.position in ("middle", "first"):
            return []
        self._message = None
        self.msn = msn_add(self.msn)
        assert kind.verb is not None
        return [Delivered(kind.verb, message.first_psn, psn, message.length, self.msn, now,
                          imm=packet.immdt, invalidated_rkey=packet.ieth)]

    def _atomic(self, verb: str, packet: Packet) -> int:
        assert packet.atomic is not None
        va = packet.atomic.va
        original = self.memory.get(va, 0)
        if verb == "fetch_add":
            self.memory[va] = (original + packet.atomic.swap_add) & _U64
        elif original == packet.atomic.compare:
            self.memory[va] = packet.atomic.swap_add
        return original

    def _duplicate(self, packet: Packet, kind: RequestKind, now: int) -> list[Event]:
        psn = packet.psn
        self.duplicates += 1
        if kind.family in ("read", "atomic"):
            answer = next((a for a in reversed(self._answers)
                           if psn_in_range(psn, a.first, a.npsn)), None)
            if answer is None:  # older than what is remembered: nothing to answer with
                return [Discarded(psn, "unexpected", now)]
            if kind.family == "read":
                assert packet.reth is not None
                self._out.append(self.segmenter.read_responses(psn, packet.reth.dmalen,
                                                               answer.msn, packet.wr_id))
            elif answer.original is not None:
                self._out.append(self.segmenter.atomic_ack(psn, answer.msn, answer.original))
        else:
            self.duplicate_acks += 1
            self._queue_ack(self.segmenter.ack(self._duplicate_ack_psn(psn), self.msn))
        return [Duplicate(psn, now)]

    def _duplicate_ack_psn(self, psn: int) -> int:
        """The PSN the ACK of a duplicate SEND/WRITE packet ``psn`` names: the latest accepted,
        or the one before the first READ/atomic remembered after ``psn``."""
        latest = psn_add(self.expected_psn, -1)
        after = [a.first for a in self._answers if psn_diff(a.first, psn) > 0
                 and psn_diff(a.first, self.expected_psn) < 0]
        if after:
            return psn_add(min(after, key=lambda first: psn_diff(first, psn)), -1)
        return latest

    def _receive_uc(self, packet: Packet, kind: RequestKind, now: int) -> list[Event]:
        if kind.position in ("first", "only"):
            self._message = None  # a new message: whatever was partial is lost
        elif packet.psn != self.expected_psn or not self._in_sequence(kind):
            self._message = None
            return [Discarded(packet.psn, "uc_sequence", now)]
        return self._accept(packet, kind, now)

    def _receive_ud(self, packet: Packet, kind: RequestKind, now: int) -> list[Event]:
        if packet.deth is None or packet.deth.q_key != self.config.q_key:
            return [Discarded(packet.psn, "q_key", now)]
        self.msn = msn_add(self.msn)
        self.expected_psn = psn_add(packet.psn, 1)
        assert kind.verb is not None
        return [Delivered(kind.verb, packet.psn, packet.psn, packet.payload_len, self.msn, now,
                          imm=packet.immdt)]

"""The requester side of a queue pair: work requests in, request packets out, ACKs back in.

RC (IBA Vol. 1 9.7.2-9.7.6, the behaviour of Linux ``rxe_req.c``/``rxe_comp.c``):
- PSNs are handed out in posting order; a READ takes one PSN per response packet.
- An ACK with PSN p acknowledges every request up to p (coalesced); a READ response or an
  atomic ACK acknowledges every request before it.
- A NAK "PSN sequence error" with PSN p acknowledges everything before p and the requester
  goes back to p and resends everything from there (go-back-N).
- An RNR NAK with PSN p acknowledges everything before p; nothing is sent for the RNR timer
  it carries, then the requester resends from p. ``rnr_retry`` RNR NAKs in a row are allowed
  (7: no limit).
- The local ACK timer (4.096 us x 2^timeout) runs while requests are unacknowledged; it is
  started by a transmission and restarted by every ACK that makes progress. When it expires
  the requester resends from the oldest unacknowledged PSN. ``retry_cnt`` retries (timeouts,
  NAKs, lost READ responses) in a row are allowed; one more is the error
  ``retry_exceeded``. Any progress resets both counters.
- A READ or atomic whose answer is missing when a later response or ACK arrives has lost it:
  the request is sent again from the first missing response PSN (READ: VA and length of the
  rest), once per gap.
XRC (the INI QP) is RC with the XRC opcodes and an XRCETH on every request (``xrc_srq``).
UC and UD send each packet once and complete a request when its last packet is sent.

The requester keeps no clock: every call that can start or fire a timer takes ``now_ns``;
:meth:`Requester.next_deadline` says when to call :meth:`Requester.timeout`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ibwire.transport.events import (
    Completed,
    Discarded,
    Event,
    Failed,
    Retransmitting,
    RnrWaiting,
)
from ibwire.transport.packets import Packet
from ibwire.transport.psn import PSN_MASK, check_psn, psn_diff
from ibwire.transport.segment import Segmenter
from ibwire.transport.timers import local_ack_timeout_ns, rnr_timer_ns
from ibwire.transport.verbs import RELIABLE, TRANSPORTS, TransportError, WorkRequest

#: rnr_retry 7 means "retry for ever" (IBA 9.7.5.2.8; ibv_modify_qp(3)).
RNR_RETRY_INFINITE = 7


@dataclass(frozen=True)
class RequesterConfig:
    """A requester QP's attributes (``ibv_qp_attr`` names where there are some).

    ``timeout`` is the local ACK timeout exponent t (0: no timer); ``window`` caps the PSNs
    in flight (None: no cap; the packet that fills it asks for an ACK); ``max_rd_atomic``
    the READs and atomics in flight; ``xrc_srq`` the XRC SRQ number an XRC requester's
    XRCETH names at the target."""

    transport: str = "RC"
    pmtu: int = 1024
    start_psn: int = 0
    dest_qp: int = 0
    src_qp: int = 0
    q_key: int = 0
    ack_every: int | None = None
    timeout: int = 14
    retry_cnt: int = 7
    rnr_retry: int = 7
    window: int | None = None
    max_rd_atomic: int = 16
    xrc_srq: int = 0

    def __post_init__(self) -> None:
        if self.transport not in TRANSPORTS:
            raise TransportError(f"transport {self.transport!r} is not one of "
                                 f"{', '.join(TRANSPORTS)}")
        check_psn(self.start_psn, "start PSN")
        if not 0 <= self.xrc_srq <= PSN_MASK:
            raise TransportError(f"XRC SRQ number {self.xrc_srq} is not 24 bits (0..0xFFFFFF)")
        local_ack_timeout_ns(self.timeout)
        for name in ("retry_cnt", "rnr_retry"):
            if not 0 <= getattr(self, name) <= 7:
                raise TransportError(f"{name} must be 0..7, not {getattr(self, name)}")
        if self.window is not None and self.window < 1:
            raise TransportError(f"window must be at least 1 PSN, not {self.window}")
        if self.max_rd_atomic < 1:
            raise TransportError(f"max_rd_atomic must be at least 1, not {self.max_rd_atomic}")


class _Wqe:
    """A posted request: its PSNs are ``index .. index + npsn - 1`` counted from the QP's
    start; ``done`` of them are acknowledged (READ: answered)."""

    __slots__ = ("wr", "index", "npsn", "done")

    def __init__(self, wr: WorkRequest, index: int, npsn: int) -> None:
        self.wr = wr
        self.index = index
        self.npsn = npsn
        self.done = 0


class Requester:
    """The sending half of an RC, UC, UD or XRC (INI) queue pair."""

    def __init__(self, config: RequesterConfig) -> None:
        self.config = config
        self.segmenter = Segmenter(config.transport, config.pmtu, config.dest_qp,
                                   config.src_qp, config.q_key, config.ack_every,
                                   config.xrc_srq)
        self._responses = self.segmenter.responses
        self._reliable = config.transport in RELIABLE
        self._timeout_ns = local_ack_timeout_ns(config.timeout)
        self._wqes: deque[_Wqe] = deque()
        # PSN indices counted from start_psn, unbounded (PSN = (start + index) & PSN_MASK).
        self._post = 0      # index of the next request posted
        self._tx = 0        # index of the next packet to send
        self._txpos = 0     # position in _wqes of the request holding _tx
        self._high = 0      # one past the highest index ever sent
        self._rd_out = 0    # READs/atomics sent and not answered
        self._retry_left = config.retry_cnt
        self._rnr_left = config.rnr_retry
        self._ack_deadline: int | None = None
        self._rnr_until: int | None = None
        self._rnr_index = 0
        self._read_retry_at: int | None = None
        self._failed = False
        self._events: list[Event] = []
        self._cause = "timeout"     # what the requester last went back for
        #: Request packets resent, by what the requester went back for: ``nak``,
        #: ``timeout``, ``rnr``, ``read`` (see :class:`Retransmitting`).
        self.resent = {"nak": 0, "timeout": 0, "rnr": 0, "read": 0}

    # --- state ------------------------------------------------------------------------------

    def _psn(self, index: int) -> int:
        return (self.config.start_psn + index) & PSN_MASK

    @property
    def _una(self) -> int:
        if self._wqes:
            head = self._wqes[0]
            return head.index + head.done
        return self._post

    def _index(self, psn: int) -> int:
        una = self._una
        return una + psn_diff(psn, self._psn(una))

    @property
    def next_psn(self) -> int:
        """The PSN the next posted request will start at."""
        return self._psn(self._post)

    @property
    def unacked_psns(self) -> int:
        """PSNs sent and not yet acknowledged (0 on UC/UD)."""
        return self._high - self._una if self._reliable else 0

    @property
    def pending(self) -> int:
        """Work requests posted and not completed."""
        return len(self._wqes)

    @property
    def failed(self) -> bool:
        return self._failed

    @property
    def reliable(self) -> bool:
        """Whether requests are acknowledged (RC, XRC)."""
        return self._reliable

    @property
    def rnr_waiting(self) -> bool:
        """Whether an RNR NAK's wait is on (nothing is sent until it ends)."""
        return self._rnr_until is not None

    @property
    def next_index(self) -> int:
        """The PSN index (counted from ``start_psn``) of the next request packet to send,
        a resend or a first transmission."""
        return max(self._tx, self._una)

    @property
    def resending(self) -> bool:
        """Whether the next request packet to send is a resend (a go-back-N round is on)."""
        return self.next_index < self._high

    def psn_of(self, index: int) -> int:
        """The PSN of the ``index``-th PSN counted from ``start_psn``."""
        return self._psn(index)

    def next_deadline(self) -> int | None:
        """When :meth:`timeout` must next be called, or None when no timer runs."""
        times = [t for t in (self._ack_deadline, self._rnr_until) if t is not None]
        return min(times) if times else None

    def pop_events(self) -> list[Event]:
        """Events waiting to be read (completions of UC/UD requests happen on sending)."""
        events, self._events = self._events, []
        return events

    # --- posting and sending -----------------------------------------------------------------

    def post(self, wr: WorkRequest) -> int:
        """Queue ``wr``; returns its first PSN."""
        if self._failed:
            raise TransportError("the QP is in the error state: no more requests")
        wr.checked(self.config.transport, self.config.pmtu)
        npsn = self.segmenter.psn_count(wr)
        self._wqes.append(_Wqe(wr, self._post, npsn))
        first = self._psn(self._post)
        self._post += npsn
        return first

    def next_packet(self, now_ns: int) -> Packet | None:
        """The next request packet to put on the wire, or None when there is nothing to send
        now (all sent, window full, waiting for an RNR timer, error)."""
        if self._failed or self._rnr_until is not None or self._tx >= self._post:
            return None
        una = self._una
        if self._tx < una:  # went back, then ACKs covered what was to be resent
            self._tx = una
            if self._tx >= self._post:
                return None
        window = self.config.window
        if self._reliable and window is not None and self._tx - una >= window:
            return None
        wqes = self._wqes
        w = wqes[self._txpos]
        while w.index + w.npsn <= self._tx:
            self._txpos += 1
            w = wqes[self._txpos]
        retransmission = self._tx < self._high
        if retransmission:
            self.resent[self._cause] += 1
        answered = w.wr.is_read or w.wr.is_atomic
        if answered and not retransmission and self._reliable:
            if self._rd_out >= self.config.max_rd_atomic:
                return None
            self._rd_out += 1
        k = self._tx - w.index
        fills = window is not None and self._tx + 1 - una >= window
        packet = self.segmenter.request(w.wr, k, self._psn(self._tx), self._tx, retransmission,
                                        fills)
        self._tx = w.index + w.npsn if w.wr.is_read else self._tx + 1
        if self._tx > self._high:
            self._high = self._tx
        if self._reliable:
            if self._ack_deadline is None and self._timeout_ns is not None:
                self._ack_deadline = now_ns + self._timeout_ns
        elif self._tx == w.index + w.npsn:  # UC/UD: done once sent; w is the head
            wqes.popleft()
            self._events.append(self._completed(w, now_ns))
        return packet

    # --- answers ------------------------------------------------------------------------------

    def receive(self, packet: Packet, now_ns: int, icrc_ok: bool = True) -> list[Event]:
        """Take an ACK, NAK, READ response or atomic ACK addressed to this QP."""
        events = self.pop_events()
        if not icrc_ok:
            events.append(Discarded(packet.psn, "icrc", now_ns))
        elif self._failed:
            events.append(Discarded(packet.psn, "error_state", now_ns))
        elif not self._reliable:
            events.append(Discarded(packet.psn, "unexpected", now_ns))
        elif packet.opcode == self._responses.ack and packet.aeth is not None:
            self._on_acknowledge(packet, now_ns, events)
        elif packet.opcode in self._responses.read:
            self._on_answer(packet, now_ns, events, read=True)
        elif packet.opcode == self._responses.atomic_ack:
            self._on_answer(packet, now_ns, events, read=False)
        else:
            events.append(Discarded(packet.psn, "unexpected", now_ns))
        return events

    def _on_acknowledge(self, packet: Packet, now: int, events: list[Event]) -> None:
        assert packet.aeth is not None
        kind, value = (packet.aeth.syndrome >> 5) & 3, packet.aeth.syndrome & 0x1F
        index = self._index(packet.psn)
        una = self._una
        if kind == 0:  # ACK of everything through the PSN
            if index >= self._high:
                events.append(Discarded(packet.psn, "unexpected", now))
            elif index >= una:
                self._ack_through(index + 1, now, events)
            return
        # NAKs name the PSN the responder expects; stale ones (before una) are ignored
        if index < una or index > self._high:
            events.append(Discarded(packet.psn, "unexpected", now))
            return
        if self._ack_through(index, now, events):
            return
        if kind == 1:  # RNR NAK
            if self._rnr_left == 0:
                self._fail(packet.psn, "rnr_retry_exceeded", now, events)
                return
            if self.config.rnr_retry != RNR_RETRY_INFINITE:
                self._rnr_left -= 1
            self._rnr_index = index
            self._rnr_until = now + rnr_timer_ns(value)
            self._ack_deadline = None
            events.append(RnrWaiting(packet.psn, value, self._rnr_until))
        elif kind == 3 and value == 0:  # PSN sequence error
            if index < self._high:
                self._retry(index, "nak", now, events)
        else:
            self._fail(packet.psn, "remote_error", now, events)

    def _on_answer(self, packet: Packet, now: int, events: list[Event], read: bool) -> None:
        """A READ response (``read``) or an atomic ACK."""
        index = self._index(packet.psn)
        if index < self._una or index >= self._high:
            events.append(Discarded(packet.psn, "duplicate" if index < self._una
                                    else "unexpected", now))
            return
        w = next(w for w in self._wqes if index < w.index + w.npsn)
        if not (w.wr.is_read if read else w.wr.is_atomic):
            events.append(Discarded(packet.psn, "unexpected", now))
            return
        if self._ack_through(w.index, now, events):
            return
        expected = w.index + w.done
        if index > expected:
            self._retry(expected, "read", now, events)
            return
        if index < expected:
            events.append(Discarded(packet.psn, "duplicate", now))
            return
        w.done += 1
        if w.done == w.npsn:
            self._complete_head(now, events, packet.atomic_ack)
        self._progress(now)

    def _ack_through(self, end: int, now: int, events: list[Event]) -> bool:
        """Acknowledge indices before ``end``. True when that showed a lost READ response or
        atomic ACK and the requester went back for it."""
        progressed = False
        while self._wqes:
            w = self._wqes[0]
            covered = end - w.index
            if covered <= w.done:
                break
            if w.wr.is_read or w.wr.is_atomic:  # executed by the responder, answer lost
                if progressed:
                    self._progress(now)
                self._retry(w.index + w.done, "read", now, events)
                return True
            progressed = True
            if covered < w.npsn:
                w.done = covered
                break
            w.done = w.npsn
            self._complete_head(now, events, None)
        if progressed:
            self._progress(now)
        return False

    def _complete_head(self, now: int, events: list[Event], result: int | None) -> None:
        w = self._wqes.popleft()
        self._txpos = max(0, self._txpos - 1)
        if w.wr.is_read or w.wr.is_atomic:
            self._rd_out -= 1
        events.append(self._completed(w, now, result))

    def _completed(self, w: _Wqe, now: int, result: int | None = None) -> Completed:
        length = 8 if w.wr.is_atomic else w.wr.length
        return Completed(w.wr.wr_id, w.wr.verb, self._psn(w.index), w.npsn, length, now, result)

    def _progress(self, now: int) -> None:
        self._retry_left = self.config.retry_cnt
        self._rnr_left = self.config.rnr_retry
        self._read_retry_at = None
        if self._timeout_ns is None or self._rnr_until is not None:
            return
        self._ack_deadline = now + self._timeout_ns if self._high > self._una else None

    # --- going back ----------------------------------------------------------------------------

    def _retry(self, index: int, cause: str, now: int, events: list[Event]) -> None:
        if cause == "read":
            if self._read_retry_at == index:
                return  # already went back for this gap: the timer covers a second loss
            self._read_retry_at = index
        if self._retry_left == 0:
            self._fail(self._psn(index), "retry_exceeded", now, events)
            return
        self._retry_left -= 1
        self._cause = cause
        self._go_back(index, now)
        events.append(Retransmitting(self._psn(index), cause, now))

    def _go_back(self, index: int, now: int) -> None:
        self._tx = index
        self._txpos = 0
        self._ack_deadline = None if self._timeout_ns is None else now + self._timeout_ns

    def _fail(self, psn: int, reason: str, now: int, events: list[Event]) -> None:
        self._failed = True
        self._ack_deadline = self._rnr_until = None
        wr_id = self._wqes[0].wr.wr_id if self._wqes else None
        events.append(Failed(wr_id, psn, reason, now))

    def timeout(self, now_ns: int) -> list[Event]:
        """Fire the timers due at ``now_ns``: the end of an RNR wait, the local ACK timeout."""
        events = self.pop_events()
        if self._rnr_until is not None and now_ns >= self._rnr_until:
            self._rnr_until = None
            self._cause = "rnr"
            self._go_back(self._rnr_index, now_ns)
            events.append(Retransmitting(self._psn(self._rnr_index), "rnr", now_ns))
        if self._ack_deadline is not None and now_ns >= self._ack_deadline:
            if self._high > self._una:
                self._retry(self._una, "timeout", now_ns, events)
            else:
                self._ack_deadline = None
        return events

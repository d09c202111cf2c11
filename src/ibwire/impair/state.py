"""The live connections a forwarder learns from the frames crossing it.

Fed one batch of scanner columns at a time (``ibwire.scan.scan_frames``), with what each BTH
opcode is taken from the transport model's tables (:mod:`ibwire.transport.opkinds`): a
connection is one requester -> responder direction of a queue pair, as for the QP analysis
(:mod:`ibwire.transport.observed`): its requests go one way to the responder's QPN, its
answers (ACKs, NAKs, READ responses, atomic ACKs) come back to the requester's QPN. The
requester's QPN is learnt from the CM exchange (a ConnectRequest's and ConnectReply's local
QPNs and starting PSNs) or, without one (perftest exchanges QPNs over TCP), from the first
answer coming back between the same two addresses. PSNs are compared in 24-bit arithmetic
(IBA 9.4.1.1) against the highest seen.

Work is per connection and per batch, with numpy over the rows; nothing here is per frame
except the answers that name a requester QPN not yet bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ibwire.transport.opkinds import ACK, ATOMIC_ACK, CNP, KIND, READ_RESP, REQUEST
from ibwire.transport.psn import PSN_MASK

HALF = 1 << 23
_ONES = np.ones(256, np.int64)
_ONES.flags.writeable = False
ANSWERS = (ACK, READ_RESP, ATOMIC_ACK)
#: Columns scanned for (``scan_frames(fields=...)``) where the classifier's are not enough:
#: the CM exchange, the addresses of a connection whose requester is being learnt.
FIELDS = ("eth.src", "eth.dst", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "grh.sgid",
          "grh.dgid", "udp.srcport", "bth.opcode", "bth.destqp", "bth.psn", "bth.a",
          "aeth.syndrome", "aeth.msn", "cm.req.localqpn", "cm.req.startpsn",
          "cm.rep.localqpn", "cm.rep.startpsn")
CM_QP = 1


@dataclass
class Connection:
    """One requester -> responder direction of a queue pair, as seen so far.

    ``direction`` is its requests' (0: A->B, 1: B->A); ``qpn`` the responder's QPN (the
    requests' DestQP), ``peer_qpn`` the requester's (the answers' DestQP; None until learnt);
    ``next_psn`` the PSN its next new request will carry, as far as seen (one past the highest
    request PSN, or past the highest answer's: a READ's responses take PSNs of their own),
    ``answer_psn`` the latest answer's PSN, ``msn`` the latest AETH MSN; ``request_frame``
    and ``answer_frame`` the latest of each (their addresses and ports are the
    connection's)."""

    index: int
    direction: int
    qpn: int
    start_psn: int
    next_psn: int
    peer_qpn: int | None = None
    answer_psn: int | None = None
    next_answer_psn: int | None = None
    msn: int | None = None
    requests: int = 0
    answers: int = 0
    first_ns: int = 0
    last_ns: int = 0
    request_frame: bytes = b""
    answer_frame: bytes | None = None
    cm: bool = False
    high: int = 0          # extended PSN one past the highest request
    answer_high: int | None = None
    sent: dict[int, int] = field(default_factory=dict, repr=False)
    answered: dict[int, int] = field(default_factory=dict, repr=False)

    def addresses(self) -> dict[str, Any]:
        """The requester's and responder's addresses and ports, from the latest frames."""
        from ibwire.dissect import parse

        out: dict[str, Any] = {}
        for side, frame in (("requester", self.request_frame), ("responder", self.answer_frame)):
            if not frame:
                continue
            f = parse(frame).fields()
            out[side] = {k: f[k] for k in ("eth.src", "ip.src", "ipv6.src", "grh.sgid",
                                           "udp.srcport", "lrh.slid") if k in f}
        return out

    def psn_offset(self, psn: int) -> int:
        """``psn``'s offset from the connection's first PSN (24-bit arithmetic)."""
        return (psn - self.start_psn) & PSN_MASK


def _extend(psns: np.ndarray, ref: int) -> np.ndarray:
    """Extended PSNs nearest ``ref`` (``ref``'s low 24 bits are the wire PSN)."""
    d = (psns.astype(np.int64) - (ref & PSN_MASK)) & PSN_MASK
    return ref + np.where(d >= HALF, d - (1 << 24), d)


class LiveState:
    """Every connection seen, by its requests' (direction, DestQP) and its answers'."""

    def __init__(self) -> None:
        self.connections: list[Connection] = []
        self.by_responder: dict[tuple[int, int], Connection] = {}
        self.by_requester: dict[tuple[int, int], Connection] = {}
        self.cm_offers: dict[int, tuple[int, int]] = {}   # direction -> (QPN, start PSN)
        self.cm_pairs: dict[tuple[int, int], int] = {}    # (direction, responder QPN) -> QPN
        self.count_all = False

    def __iter__(self) -> Any:
        return iter(self.connections)

    def __len__(self) -> int:
        return len(self.connections)

    def requester_of(self, direction: int, qpn: int) -> Connection | None:
        """The connection whose answers go ``direction`` to requester QPN ``qpn``."""
        return self.by_requester.get((1 - direction, qpn))

    def connection_of(self, direction: int, kind: int, qpn: int) -> Connection | None:
        """The connection a frame going ``direction`` to QPN ``qpn`` belongs to."""
        if kind == REQUEST:
            return self.by_responder.get((direction, qpn))
        if kind in ANSWERS or kind == CNP:
            return self.requester_of(direction, qpn)
        return None

    # --- learning ------------------------------------------------------------------------

    def feed(self, direction: int, cols: dict[str, np.ndarray], frames: Any,
             stamps: np.ndarray) -> np.ndarray:
        """Learn from one batch going ``direction`` (``cols``: :mod:`ibwire.impair.classify`'s
        columns; ``frames[i]``: frame ``i``'s bytes). Returns, per row, the transmission of
        its PSN (1 first, 2 a resend; 0 not a request or an answer). With ``count_all`` the
        count is exact (3 the second resend ...); else 1 or 2 from the highest PSN seen.
        ``frames`` None: rows the C pump summarised (frames it forwarded itself, of known
        connections, no MAD): the PSNs, counts, MSN and times are learnt, the latest
        frames kept are those Python saw (a connection's addresses do not change)."""
        ib = cols["ib"]
        n = len(ib)
        tx = np.zeros(n, np.int64)
        if not ib.any():
            return tx
        opcode = cols["bth.opcode"]
        destqp = cols["bth.destqp"]
        kinds = np.where(ib, KIND[opcode], 0)
        low = ib & (destqp <= CM_QP)
        if low.any() and frames is not None:
            self._cm(direction, [frames[i] for i in np.flatnonzero(low & (destqp == CM_QP))])
        psn = cols["bth.psn"].astype(np.int64)
        requests = (kinds == REQUEST) & ~low  # QP0/QP1 carry MADs (the CM), not a connection
        if requests.any():
            for qpn in _distinct(destqp[requests]):
                rows = np.flatnonzero(requests & (destqp == qpn)) if qpn != -1 else \
                    np.flatnonzero(requests)
                qpn = int(destqp[rows[0]])
                c = self.by_responder.get((direction, qpn))
                if c is None:
                    c = self._new(direction, qpn, int(psn[rows[0]]), int(stamps[rows[0]]))
                tx[rows] = self._requests(c, psn[rows])
                c.requests += len(rows)
                c.last_ns = int(stamps[rows[-1]])
                if frames is not None:
                    c.request_frame = bytes(frames[int(rows[-1])])
        answers = (kinds == ACK) | (kinds == READ_RESP) | (kinds == ATOMIC_ACK)
        if answers.any():
            for qpn in _distinct(destqp[answers]):
                rows = np.flatnonzero(answers & (destqp == qpn)) if qpn != -1 else \
                    np.flatnonzero(answers)
                qpn = int(destqp[rows[0]])
                c = self.requester_of(direction, qpn)
                if c is None and frames is not None:
                    c = self._bind(direction, qpn, frames[int(rows[0])])
                if c is None:
                    continue
                tx[rows] = self._answers(c, psn[rows])
                c.answers += len(rows)
                c.last_ns = int(stamps[rows[-1]])
                if frames is not None:
                    c.answer_frame = bytes(frames[int(rows[-1])])
                aeth = rows[_HAS_AETH[opcode[rows]]]
                if len(aeth):
                    c.msn = int(cols["aeth.msn"][aeth[-1]])
        return tx

    def _new(self, direction: int, qpn: int, psn: int, t: int) -> Connection:
        c = Connection(len(self.connections), direction, qpn, psn, psn, first_ns=t, last_ns=t,
                       high=psn)
        peer = self.cm_pairs.get((direction, qpn))
        if peer is not None:
            c.peer_qpn, c.cm = peer, True
            self.by_requester[(direction, peer)] = c
        self.connections.append(c)
        self.by_responder[(direction, qpn)] = c
        return c

    def _requests(self, c: Connection, psns: np.ndarray) -> np.ndarray:
        first, last = int(psns[0]), int(psns[-1])
        if (not self.count_all and (first - c.high) & PSN_MASK == 0
                and (last - first) & PSN_MASK == len(psns) - 1
                and (len(psns) == 1 or bool(np.all(np.diff(psns) % (1 << 24) == 1)))):
            # the common case: the next PSNs in order, each sent the first time
            c.high += len(psns)
            _advance(c)
            return _ONES[:len(psns)] if len(psns) <= len(_ONES) else np.ones(len(psns), np.int64)
        ext = _extend(psns, c.high - 1)
        before = np.maximum.accumulate(np.concatenate(([c.high - 1], ext)))[:-1]
        tx = np.where(ext > before, 1, 2)
        c.high = max(c.high, int(ext.max()) + 1)
        _advance(c)
        if self.count_all:
            tx = _count(c.sent, psns, c.high)
        return tx

    def _answers(self, c: Connection, psns: np.ndarray) -> np.ndarray:
        ref = c.answer_high if c.answer_high is not None else c.start_psn - 1
        ext = _extend(psns, ref)
        before = np.maximum.accumulate(np.concatenate(([ref], ext)))[:-1]
        tx = np.where((ext > before) | (c.answer_high is None) & (np.arange(len(ext)) == 0),
                      1, 2)
        c.answer_high = max(ref, int(ext.max()))
        c.answer_psn = int(psns[-1])
        c.next_answer_psn = (c.answer_high + 1) & PSN_MASK
        _advance(c)
        if self.count_all:
            tx = _count(c.answered, psns, c.answer_high)
        return tx

    def _bind(self, direction: int, qpn: int, frame: bytes) -> Connection | None:
        """The connection whose requester is QPN ``qpn``, learnt from an answer (``frame``):
        the one connection going the other way with no requester yet, between the same
        addresses (the nearest by PSN when there are several)."""
        cols = _scan(frame)
        src, dst = _addresses(cols, 0)
        free = [c for c in self.connections if c.direction != direction and c.peer_qpn is None
                and _addresses(_scan(c.request_frame), 0) == (dst, src)]
        if not free:
            return None
        psn = int(cols["bth.psn"][0])
        c = min(free, key=lambda c: (psn - c.start_psn) & PSN_MASK)
        c.peer_qpn = qpn
        self.by_requester[(c.direction, qpn)] = c
        return c

    def _cm(self, direction: int, frames: list[bytes]) -> None:
        """CM REQ/REP on QP1: the QPNs they exchange pair the two directions' connections."""
        if not frames:
            return
        from ibwire.scan import scan_frames

        lengths = np.array([len(f) for f in frames], np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        cols = scan_frames(b"".join(bytes(f) for f in frames), offsets, lengths,
                           np.zeros(len(frames), np.uint8), fields=list(FIELDS))
        for i in range(len(frames)):
            req, rep = int(cols["cm.req.localqpn"][i]), int(cols["cm.rep.localqpn"][i])
            if req:
                self.cm_offers[direction] = (req, int(cols["cm.req.startpsn"][i]))
            elif rep and (1 - direction) in self.cm_offers:
                active, _ = self.cm_offers.pop(1 - direction)
                # requests of the active side go (1 - direction) to the passive side's QPN
                for d, responder, requester in ((1 - direction, rep, active),
                                                (direction, active, rep)):
                    self.cm_pairs[(d, responder)] = requester
                    c = self.by_responder.get((d, responder))
                    if c is not None:
                        c.peer_qpn, c.cm = requester, True
                        self.by_requester[(d, requester)] = c


def _advance(c: Connection) -> None:
    """``next_psn``: one past the highest request PSN, or past the highest answer PSN when
    that is further: an RDMA READ request takes a PSN for each of its response packets (IBA
    9.4.1.1), which the answers show (the PMTU that sets their number is not on the wire)."""
    high = c.high if c.answer_high is None else max(c.high, c.answer_high + 1)
    c.next_psn = high & PSN_MASK


def _count(counts: dict[int, int], psns: np.ndarray, high: int) -> np.ndarray:
    out = np.empty(len(psns), np.int64)
    for j, p in enumerate(psns.tolist()):
        out[j] = counts[p] = counts.get(p, 0) + 1
    if len(counts) > 1 << 17:   # forget PSNs far behind the highest
        low = (high - (1 << 16)) & PSN_MASK
        for p in [p for p in counts if (p - low) & PSN_MASK >= HALF]:
            del counts[p]
    return out


def _addresses(cols: dict[str, np.ndarray], i: int) -> tuple[bytes, bytes]:
    """(source, destination) of row ``i``: IPv4, else IPv6, else GRH GIDs, else MACs."""
    for s, d in (("ip.src", "ip.dst"), ("ipv6.src", "ipv6.dst"), ("grh.sgid", "grh.dgid"),
                 ("eth.src", "eth.dst")):
        src, dst = cols[s][i], cols[d][i]
        if np.any(src) or np.any(dst):
            return bytes(np.asarray(src).tobytes()), bytes(np.asarray(dst).tobytes())
    return b"", b""


def _scan(frame: bytes) -> dict[str, np.ndarray]:
    from ibwire.scan import scan_frames

    return scan_frames(frame, [0], [len(frame)], [0], fields=list(FIELDS))


def _distinct(values: np.ndarray) -> list[int]:
    """The distinct values (-1 alone when there is one: the caller then takes every row)."""
    if values.min() == values.max():
        return [-1]
    return np.unique(values).tolist()


def _aeth_opcodes() -> np.ndarray:
    from ibwire.tables import opcodes

    table = np.zeros(256, bool)
    for op in opcodes().values():
        table[op.value] = "AETH" in op.headers
    return table


_HAS_AETH = _aeth_opcodes()

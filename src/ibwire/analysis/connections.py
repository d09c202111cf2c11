"""Rows of scanned batches into connections, each with its observer, batch by batch.

A *stream* is the packets of one kind going one way to one QP: requests from address A to
address B for QP Y (UD: and from source QP S, DETH), or answers (ACK, NAK, READ response,
atomic ACK, CNP) from B to A for QP X. A request stream to a QP that a captured CM exchange
connected (:mod:`ibwire.analysis.cm`) knows its requester QPN X at once. A connection joins
a request stream with the answer stream of the same queue pair:

1. an answer stream to QP X joins the connection from A to B whose requester QPN is known to
   be X (UD's DETH source QPN, the CM exchange, or learnt earlier);
2. else (RoCEv2) the only one whose requests come from the answers' UDP source port: both
   ends of an RC connection use the port Linux derives from the flow label of the QPN pair
   (``rdma_get_udp_sport``, include/rdma/ib_verbs.h), so several WRITE QPs on one address
   pair with the same PSNs are told apart;
3. else, among those that sent READs (for READ responses) or atomics (for atomic ACKs), the
   one whose request PSNs (seen so far or in this batch) hold a PSN the answers echo (an
   ACK, NAK, READ response or atomic ACK carries the request's PSN, IBA 9.7.5.1);
4. else the only connection from A to B that has no answers yet;
5. else it stands alone (requester QPN X, responder QPN unknown) and is joined by the next
   request stream from A to B that has none.

QP0 and QP1 (subnet and general management, IBA 3.5.2.1) are not connections. Memory grows
with streams and connections, never with packets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ibwire._twins import load_twin
from ibwire.analysis.addresses import address_text, row_addresses
from ibwire.analysis.cm import CmIndex
from ibwire.crc._common import CUT_HEADER, TRUNCATED
from ibwire.scan.program import slot_bit
from ibwire.transport.cm import CmSession
from ibwire.transport.cm import report as cm_report
from ibwire.transport.observed import STALL_NS, Observed
from ibwire.transport.opkinds import (
    ATOMIC,
    ATOMIC_ACK,
    CNP,
    FAMILY,
    KIND,
    OTHER,
    READ,
    READ_RESP,
    REQUEST,
)

_streams, implementation = load_twin("ibwire.analysis._streams",
                                     "ibwire.analysis._streams_python")
"""The row grouping's twin: "c" (``ibwire.analysis._streams``) or "python"."""
TRANSPORT_NAMES = {0: "RC", 1: "UC", 3: "UD", 5: "XRC"}
#: Scanner columns the analysis reads.
FIELDS = ("bth.opcode", "bth.destqp", "bth.psn", "bth.a", "aeth.syndrome", "deth.srcqp",
          "udp.srcport",
          "reth.dmalen", "reth.va")


@dataclass
class Connection:
    """One requester -> responder direction of a queue pair, and its observer."""

    index: int
    requester: tuple[int, int]         # address words
    responder: tuple[int, int]
    requester_qpn: int | None
    responder_qpn: int | None
    transport: str
    observed: Observed
    answered: bool = False             # an answer stream has joined
    families: set[int] = field(default_factory=set)  # request families seen (FAMILY)
    trace: list[dict[str, np.ndarray]] | None = field(default=None)
    cm: CmSession | None = None        # the CM session that set it up, when captured
    udp_sport: int = 0                 # RoCEv2 UDP source port of its requests (0: none)
    #: Rows not yet fed to ``observed`` (``Connections(observe=False)``), batch by batch,
    #: and how many (with CHUNK_ROWS more a batch, for the arrays that hold them).
    pending: list[dict[str, np.ndarray]] = field(default_factory=list)
    pending_rows: int = 0
    #: Its packets the capture cut (a snap length): their CRCs and payloads are not there.
    cut_packets: int = 0

    def identity(self) -> dict[str, Any]:
        return {"requester": {"address": address_text(*self.requester),
                              "qpn": self.requester_qpn},
                "responder": {"address": address_text(*self.responder),
                              "qpn": self.responder_qpn},
                "transport": self.transport,
                "cm": None if self.cm is None else cm_report(self.cm, self.requester),
                "cm_packets": 0 if self.cm is None else self.cm.packets,
                "cut_packets": self.cut_packets}


def _psn_in(psns: np.ndarray, observed: Observed, batch_psns: np.ndarray) -> bool:
    """Some answer PSN is among a connection's request PSNs (this batch, or its range)."""
    if len(batch_psns):
        # np.isin, without np.unique (which loads numpy.ma: 30-100 ms at start-up)
        ordered = np.sort(batch_psns)
        at = np.minimum(np.searchsorted(ordered, psns), len(ordered) - 1)
        if (ordered[at] == psns).any():
            return True
    seen = observed.seen_range()
    if seen is None:
        return False
    low, span = seen[0] & 0xFFFFFF, seen[1] - seen[0]
    return bool((((psns - low) & 0xFFFFFF) <= span).any())


#: Rows held for observers not fed yet (``Connections(observe=False)``), at most (about 40
#: bytes a row; a batch's rows of one connection count CHUNK_ROWS more, the arrays that
#: hold them): past it, the connections with the most waiting catch up, until half as
#: many wait. Those of many rows are fed in bulk cheaply; the many of a few rows each,
#: which the per-row rules would take, mostly never are.
PENDING_ROWS = 1 << 18
CHUNK_ROWS = 32


class Connections:
    """Connections of one capture, fed batch by batch.

    With ``observe`` False, only the numbering is wanted (``ibwire export`` without
    ``--qp``): a connection's rows wait, batch by batch, until the joining of an answer
    stream reads what its observer has seen (rule 3 above) or PENDING_ROWS rows wait in
    all, and are then fed as they came; the observers' reports are not made. Once no
    answer stream can join a connection that way (one has, or its requester's QPN is
    known), its rows are no longer kept and its observer is never read. The numbers are
    those of ``observe`` True: an observer fed the same batches in the same order ends in
    the same state whenever it is fed."""

    def __init__(self, pmtu: int | None = None, trace: bool = False, observe: bool = True, stall_ns: int = STALL_NS) -> None:
        self.pmtu = pmtu
        self.stall_ns = stall_ns
        self.trace = trace
        self.observe = observe
        self._pending_rows = 0
        self.list: list[Connection] = []
        self.cm = CmIndex()
        self._streams: dict[tuple[int, ...], Connection] = {}
        self._folded: dict[int, Connection] = {}   # id of a connection finish folded -> into
        #: CNP streams that go to the responder (marks on its READ responses)
        self._to_responder: set[tuple[int, ...]] = set()
        self._by_pair: dict[tuple[int, int, int, int], list[Connection]] = {}

    def _new(self, requester: tuple[int, int], responder: tuple[int, int],
             requester_qpn: int | None, responder_qpn: int | None, transport: str
             ) -> Connection:
        c = Connection(len(self.list), requester, responder, requester_qpn, responder_qpn,
                       transport, Observed(self.pmtu, self.stall_ns),
                       trace=[] if self.trace else None)
        self.list.append(c)
        self._by_pair.setdefault((*requester, *responder), []).append(c)
        return c

    def feed(self, cols: dict[str, np.ndarray], numbers: np.ndarray | None = None
             ) -> list[tuple[Connection, dict[str, np.ndarray]]]:
        """Take one scanned batch; returns each connection's rows of it (``ROW_FIELDS``
        columns, capture order) after feeding them to its observer. ``numbers``, one per
        batch row, gets the ``index`` of each row's connection (left as it is for rows of
        none)."""
        keyed = stream_keys(cols)
        if keyed is None:
            return []
        rows, columns = keyed
        take = _taker(rows, len(cols["record"]))
        op = take(cols["bth.opcode"])
        kind = KIND[op]
        answer = columns[5] != 0
        first, members_of = streams_of(columns)
        keys = [tuple(int(c[f]) for c in columns) for f in first.tolist()]
        psn = take(cols["bth.psn"])
        udp_bit = slot_bit("udp")
        conn_of = np.empty(len(keys), np.int64)
        inverse = np.empty(len(rows), np.intp)
        for s, members in enumerate(members_of):
            inverse[members] = s
        # requests first, so that answers can find their PSNs in this batch
        request_psns: dict[int, np.ndarray] = {}
        # requests, then answers that echo PSNs, then CNP-only streams
        todo = sorted(range(len(keys)), key=lambda s: (
            bool(answer[first[s]]), bool((kind[members_of[s]] == CNP).all()), first[s]))
        for s in todo:
            members = members_of[s]
            c = self._streams.get(keys[s])
            if c is None:
                row = int(rows[first[s]])
                sport = int(cols["udp.srcport"][row]) if cols["headers"][row] & udp_bit else 0
                c = self._stream(keys[s], op[first[s]], psn[members], kind[members],
                                 request_psns, sport)
            if not answer[first[s]]:
                # (np.unique would load numpy.ma: 30-100 ms at start-up)
                c.families.update(np.flatnonzero(np.bincount(FAMILY[op[members]])).tolist())
                request_psns[c.index] = np.concatenate(
                    (request_psns.get(c.index, np.zeros(0, psn.dtype)), psn[members]))
            conn_of[s] = c.index
        row_conn = conn_of[inverse]
        if numbers is not None:
            numbers[rows] = row_conn
        if not self.observe:
            present = [self.list[i] for i in dict.fromkeys(conn_of.tolist())]
            for c in present:
                if c.pending and not self._may_join(c):
                    self._drop_pending(c)
            if not any(self._may_join(c) for c in present):
                return []
        to_responder = np.zeros(len(rows), bool)
        for s in range(len(keys)):
            if keys[s] in self._to_responder:
                to_responder[members_of[s]] = True
        # a stable sort of small integers is a radix sort in numpy
        small = row_conn.astype(np.int16) if len(self.list) < (1 << 15) else row_conn
        by_conn = np.argsort(small, kind="stable")
        cuts = np.flatnonzero(np.diff(row_conn[by_conn])) + 1
        out: list[tuple[Connection, dict[str, np.ndarray]]] = []
        bounds = [0, *cuts.tolist(), len(by_conn)]
        owners = [self.list[int(row_conn[by_conn[a]])] for a in bounds[:-1]]
        # each column gathered once, in connection order; each connection's rows a slice
        fields = _row_columns(cols, rows[by_conn])
        fields["to_responder"] = to_responder[by_conn]
        cut = np.cumsum(cols["cut"][rows[by_conn]] != 0)  # packets the capture cut, to count
        for a, b, c in zip(bounds, bounds[1:], owners, strict=False):
            c.cut_packets += int(cut[b - 1] - (cut[a - 1] if a else 0))
            if self.observe:
                mine = {k: v[a:b] for k, v in fields.items()}
                self._observe(c, mine)
                out.append((c, mine))
            elif self._may_join(c):  # copies: a slice would hold the whole batch's columns
                c.pending.append({k: v[a:b].copy() for k, v in fields.items()})
                c.pending_rows += b - a + CHUNK_ROWS
                self._pending_rows += b - a + CHUNK_ROWS
        if self._pending_rows > PENDING_ROWS:
            for c in sorted(self.list, key=lambda x: x.pending_rows, reverse=True):
                if self._pending_rows <= PENDING_ROWS // 2:
                    break
                if self._may_join(c):
                    self._catch_up(c)
                else:
                    self._drop_pending(c)
        return out

    @staticmethod
    def _observe(c: Connection, rows: dict[str, np.ndarray]) -> None:
        c.observed.feed(rows)

    @staticmethod
    def _may_join(c: Connection) -> bool:
        """Whether an answer stream may still be joined to ``c`` by the PSNs it echoes
        (``_stream``), the one reader of an observer's state without ``observe``: not once
        an answer stream has joined it, nor once its requester's QPN is known."""
        return not c.answered and c.requester_qpn is None

    def _drop_pending(self, c: Connection) -> None:
        """Forget the rows waiting for ``c``'s observer (nothing will read it)."""
        self._pending_rows -= c.pending_rows
        c.pending.clear()
        c.pending_rows = 0

    def _catch_up(self, c: Connection) -> None:
        """Feed ``c``'s observer the rows waiting for it."""
        for rows in c.pending:
            self._observe(c, rows)
        self._drop_pending(c)

    def _stream(self, key: tuple[int, ...], opcode: int, psns: np.ndarray,
                kinds: np.ndarray, request_psns: dict[int, np.ndarray], sport: int
                ) -> Connection:
        sh, sl, dh, dl, qpn, is_answer, srcqp = key
        transport = TRANSPORT_NAMES.get(opcode >> 5, "RC")
        if not is_answer:
            # the CM exchange, when captured, names the requester QPN
            hint = (self.cm.requester_of((sh, sl), (dh, dl), qpn) if transport != "UD"
                    else None)
            known = hint[1] if hint is not None else None
            c = None
            for cand in self._by_pair.get((sh, sl, dh, dl), []):
                if (cand.responder_qpn is None and cand.transport in (transport, "?")
                        and (known is None or cand.requester_qpn in (None, known))):
                    c = cand
                    break
            if c is None:
                c = self._new((sh, sl), (dh, dl), srcqp if transport == "UD" else known, qpn,
                              transport)
            else:
                c.responder_qpn, c.transport = qpn, transport
                if known is not None:
                    c.requester_qpn = known
            if hint is not None:
                c.cm = hint[0]
            c.udp_sport = c.udp_sport or sport
        else:
            # answers from (sh, sl) to (dh, dl) for QP qpn: the requester is (dh, dl)
            cands = [c for c in self._by_pair.get((dh, dl, sh, sl), [])
                     if c.responder_qpn is not None and not c.answered]
            # READ responses answer READs, atomic ACKs atomics (IBA 9.7.5.1.3, 9.7.5.1.4)
            for answers, family in ((READ_RESP, READ), (ATOMIC_ACK, ATOMIC)):
                if (kinds == answers).any():
                    cands = [c for c in cands if family in c.families]
            echo = psns[kinds != CNP]
            c = next((x for x in cands if x.requester_qpn == qpn), None)
            if c is None and sport and not (kinds == CNP).all():
                # both ends of an RC connection pick the same UDP source port (Linux
                # rdma_get_udp_sport: from the flow label of the QPN pair)
                same = [x for x in cands if x.requester_qpn is None and x.udp_sport == sport]
                c = same[0] if len(same) == 1 else None
            if c is None and len(echo):
                found = [x for x in cands if x.requester_qpn is None and _psn_in(
                    echo, self._seen(x), request_psns.get(x.index, np.zeros(0)))]
                c = found[0] if len(found) == 1 else None
            if c is None:
                free = [x for x in cands if x.requester_qpn is None and x.transport != "UD"]
                c = free[0] if len(free) == 1 else None
            if c is None and (kinds == CNP).all():
                # CNPs from A to the QP B answered from: its CE-marked READ responses'
                c = next((x for x in self._by_pair.get((sh, sl, dh, dl), [])
                          if x.responder_qpn == qpn and READ in x.families), None)
                if c is not None:
                    self._streams[key] = c
                    self._to_responder.add(key)
                    return c
            if c is None:
                c = self._new((dh, dl), (sh, sl), qpn, None,
                              transport if (kinds != CNP).any() else "?")
            c.requester_qpn = qpn
            c.answered = True
        self._streams[key] = c
        return c

    def _seen(self, c: Connection) -> Observed:
        """``c``'s observer, fed every row of ``c`` so far."""
        self._catch_up(c)
        return c.observed

    def finish(self) -> None:
        """Settle what needs the whole capture: CNPs seen before their connection's
        requests join it when one connection of the address pair can take them; UC pairs
        that answer nothing but send the other way (one stream each way of an address pair)
        name each other's QPN. (Without ``observe``, the observers are left as they are.)"""
        if self.observe:
            for c in self.list:
                c.observed.finish()
        for c in [x for x in self.list if x.transport == "?"]:
            free = [x for x in self._by_pair.get((*c.requester, *c.responder), [])
                    if x is not c and x.transport != "?" and not x.answered
                    and x.requester_qpn in (None, c.requester_qpn)]
            if len(free) == 1:
                _merge_cnps(free[0], c, self.observe)
                free[0].requester_qpn = c.requester_qpn
                self.list.remove(c)
                self._folded[id(c)] = free[0]
        for c in self.list:
            if c.requester_qpn is None:
                back = [x for x in self._by_pair.get((*c.responder, *c.requester), [])
                        if x.transport == c.transport and x.responder_qpn is not None]
                ours = [x for x in self._by_pair.get((*c.requester, *c.responder), [])
                        if x.transport == c.transport]
                if len(back) == 1 and len(ours) == 1:
                    c.requester_qpn = back[0].responder_qpn
        self._cm_only()

    def stream_connections(self) -> Iterator[tuple[tuple[int, ...], Connection, int]]:
        """Each stream key (:func:`stream_keys`) with the connection it ended in, after
        :meth:`finish` (which may fold one connection into another), and the ``index`` of
        the connection it was given when first seen."""
        for key, c in self._streams.items():
            yield key, self._folded.get(id(c), c), c.index

    def _cm_only(self) -> None:
        """A connection for each CM session no traffic joined (rejected, or set up and
        never used), requester at the active side."""
        joined = {id(c.cm) for c in self.list if c.cm is not None}
        for session in self.cm.sessions.list:
            a, p = session.active, session.passive
            if id(session) in joined or a.get("address") is None or p.get("address") is None:
                continue
            c = self._new(a["address"], p["address"], a.get("qpn"), p.get("qpn"),
                          session.transport or "?")
            c.cm = session
            c.observed.finish()


def stream_keys(cols: dict[str, np.ndarray]
                ) -> tuple[np.ndarray, tuple[np.ndarray, ...]] | None:
    """(rows of a batch that belong to a connection, their stream key columns: source and
    destination address words, destination QPN, answer or not, UD source QPN); None when
    no row does. A stream is the packets of one kind going one way to one QP."""
    # a packet whose later header the capture cut (a snap length) is a packet all the same
    error = cols["error"]
    sound = (error == 0) | ((error == TRUNCATED) & ((cols["cut"] & CUT_HEADER) != 0))
    has_bth = ((cols["headers"] & slot_bit("bth")) != 0) & sound
    opcode = cols["bth.opcode"]
    kind = KIND[opcode]
    qpn = cols["bth.destqp"]
    rows = np.flatnonzero(has_bth & (kind != OTHER) & (qpn > 1))
    if not len(rows):
        return None
    take = _taker(rows, len(opcode))
    answer = take(kind) != REQUEST
    op = take(opcode)
    sh, sl, dh, dl = row_addresses(cols, rows)
    ud = (op >> 5 == 3) & ~answer
    srcqp = np.where(ud, take(cols["deth.srcqp"]), 0).astype(np.uint64)
    return rows, (sh, sl, dh, dl, take(qpn).astype(np.uint64), answer.astype(np.uint64),
                  srcqp)


def _taker(rows: np.ndarray, n: int) -> Callable[[np.ndarray], np.ndarray]:
    """``column[rows]``, without the copy when ``rows`` are all ``n`` rows in order."""
    if len(rows) == n:
        return lambda column: column
    return lambda column: column[rows]


def streams_of(columns: tuple[np.ndarray, ...]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Rows with equal values in every column, grouped: (first row of each group, each
    group's rows in order), groups in the order they first appear (``group_rows`` of the C
    twin ``ibwire.analysis._streams`` or of ``_streams_python``)."""
    first, order, starts = _streams.group_rows(columns)
    bounds = starts.tolist()
    return first, [order[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def group_numbers(columns: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Rows with equal values in every column, numbered: (first row of each group, in the
    order the groups first appear; each row's group number, int32), by the same grouping
    as :func:`streams_of`."""
    first, order, starts = _streams.group_rows(columns)
    group = np.empty(len(order), np.int32)
    group[order] = np.repeat(np.arange(len(first), dtype=np.int32), np.diff(starts))
    return first, group


def _merge_cnps(into: Connection, cnps: Connection, observed: bool = True) -> None:
    """Fold a connection that holds only CNPs into the one they belong to (``observed``:
    its observer's counts and findings too)."""
    if observed:
        into.observed.merge_cnps(cnps.observed)
    into.answered = True
    if into.trace is not None and cnps.trace is not None:
        into.trace.extend(cnps.trace)


def _row_columns(cols: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """The observer's row columns (``ROW_FIELDS``) of the batch rows ``rows``."""
    return {
        "record": cols["record"][rows], "time": cols["timestamp_ns"][rows],
        "opcode": cols["bth.opcode"][rows], "psn": cols["bth.psn"][rows],
        "ackreq": cols["bth.a"][rows], "syndrome": cols["aeth.syndrome"][rows],
        "dmalen": cols["reth.dmalen"][rows], "va": cols["reth.va"][rows], "payload": np.maximum(cols["payload.length"][rows], 0),
        "ce": cols["ecn"][rows] == 3, "icrc_bad": cols["icrc_ok"][rows] == 0,
    }

"""What a sniffer on the wire knows of the live connections: each RoCEv2 queue pair's QPN,
its peer, the next PSN each way, the last MSN, its CM communication IDs, addresses and ports.

Fed frame by frame (:meth:`LiveState.feed`), from a capture or a live socket; no I/O, no clock.
The CM exchange names both ends of a connection (REQ: the active side's QPN, Starting PSN and
communication ID; REP: the passive side's and the REQ's ID as its remote one; IBA Vol. 1
12.6.5, 12.6.8; Linux drivers/infiniband/core/cm.c); without it, a queue pair is paired with
the one that answered it. PSNs follow the requests seen: the next PSN a responder expects is
one past the last request to it (an RDMA READ request counts its response packets, at the
path MTU the state assumes, 1024 bytes unless told: the rig's guests run at Ethernet MTU
1500, for which Linux's rxe picks a path MTU of 1024).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ibwire.dissect import parse
from ibwire.errors import IbwireError
from ibwire.transport.cm import CM_CLASS, COMM_IDS, REP, REQ

PSN_MOD = 1 << 24
#: RC responses (IBA 1.4 9.2 table 38): RDMA READ RESPONSE FIRST..ONLY, ACKNOWLEDGE,
#: ATOMIC ACKNOWLEDGE.
RC_RESPONSES = frozenset(range(0x0D, 0x13))
READ_REQUEST = 0x0C
ROCE_V2 = ("rocev2_ipv4", "rocev2_ipv6")


@dataclass
class QpState:
    """One end of a live connection, as seen on the wire."""

    address: str
    qpn: int
    mac: str | None = None
    peer: tuple[str, int] | None = None
    """(address, QPN) of the other end."""
    recv_psn: int | None = None
    """The PSN of the next request this QP expects (one past the last request to it)."""
    send_psn: int | None = None
    """The PSN of the next request this QP sends (one past its last request)."""
    acked_psn: int | None = None
    """One past the PSN of the last response this QP received (what its peer has answered
    of its requests): below :attr:`send_psn`, it has requests outstanding."""
    msn: int | None = None
    """The MSN of the last ACK this QP sent (its responder's message count)."""
    comm_id: int | None = None
    peer_comm_id: int | None = None
    service_id: int | None = None
    udp_sport: int | None = None
    """The UDP source port of the last packet this QP sent."""
    pkey: int = 0xFFFF
    packets_in: int = 0
    packets_out: int = 0
    last_seen: int = 0
    closed: bool = False
    """A DREQ for its connection was seen."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.address, self.qpn)

    @property
    def outstanding(self) -> bool:
        """It has sent requests its peer has not answered yet (as far as the wire showed)."""
        return self.send_psn is not None and self.send_psn != self.acked_psn

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class LiveState:
    """The live connections seen so far; :meth:`feed` every frame of the wire in order."""

    pmtu: int = 1024
    qps: dict[tuple[str, int], QpState] = field(default_factory=dict)
    macs: dict[str, str] = field(default_factory=dict)
    frames: int = 0
    _pending_req: dict[int, tuple[str, int]] = field(default_factory=dict)

    # -- feeding -----------------------------------------------------------------------

    def feed(self, frame: bytes, link: str = "ethernet") -> None:
        """Learn what ``frame`` says (frames that are not RoCEv2 are ignored)."""
        self.frames += 1
        try:
            packet = parse(frame, link)
        except IbwireError:
            return
        if packet.encapsulation not in ROCE_V2 or packet.icrc is None:
            return
        f = packet.fields()
        src = f.get("ip.src") or f.get("ipv6.src")
        dst = f.get("ip.dst") or f.get("ipv6.dst")
        if "eth.src" in f:
            self.macs[src] = f["eth.src"]
        if "eth.dst" in f:
            self.macs.setdefault(dst, f["eth.dst"])
        if f.get("mad.mgmtclass") == CM_CLASS:
            self._cm(src, f)
            return
        opcode, qpn, psn = f["bth.opcode"], f["bth.destqp"], f["bth.psn"]
        if opcode >= 0x20:  # UC/UD/others: only RC is followed
            return
        to = self._qp(dst, qpn)
        to.packets_in += 1
        to.last_seen = self.frames
        sender = self._sender(src, to, opcode, psn)
        if sender is not None:
            sender.packets_out += 1
            sender.udp_sport = f.get("udp.srcport")
            sender.last_seen = self.frames
        if opcode in RC_RESPONSES:
            if "aeth.msn" in f and sender is not None:
                sender.msn = f["aeth.msn"]
            if opcode not in (0x0D, 0x0E):  # the last packet of a response
                to.acked_psn = (psn + 1) % PSN_MOD
            return
        to.recv_psn = (psn + self._span(opcode, f)) % PSN_MOD
        to.pkey = f.get("bth.p_key", to.pkey)
        if sender is not None:
            sender.send_psn = to.recv_psn

    def _span(self, opcode: int, f: dict[str, Any]) -> int:
        if opcode == READ_REQUEST:
            return max(1, -(-int(f.get("reth.dmalen", 0)) // self.pmtu))
        return 1

    def _qp(self, address: str, qpn: int) -> QpState:
        key = (address, qpn)
        if key not in self.qps:
            self.qps[key] = QpState(address, qpn, self.macs.get(address))
        qp = self.qps[key]
        if qp.mac is None:
            qp.mac = self.macs.get(address)
        return qp

    def _sender(self, src: str, to: QpState, opcode: int, psn: int) -> QpState | None:
        """The QP at ``src`` that sent a packet to ``to``: its known peer, else the one QP at
        ``src`` whose peer is unknown (paired then). Of several such QPs, an answer's sender
        is the responder whose requests its PSN answers: the nearest below the PSN it
        expects next (so the QPs of a connection without CM pair as ``ibwire impair``'s
        state pairs them)."""
        if to.peer is not None:
            return self.qps.get(to.peer)
        lonely = [q for q in self.qps.values() if q.address == src and q.peer is None
                  and q is not to]
        if len(lonely) > 1 and opcode in RC_RESPONSES:
            lonely = sorted((q for q in lonely if q.recv_psn is not None),
                            key=lambda q: (q.recv_psn - 1 - psn) % PSN_MOD)[:1]
        if len(lonely) != 1:
            return None
        mate = lonely[0]
        mate.peer, to.peer = to.key, mate.key
        return mate

    def _cm(self, src: str, f: dict[str, Any]) -> None:
        attribute = f.get("mad.attributeid")
        if attribute == REQ and "cm.req.localqpn" in f:
            qp = self._qp(src, f["cm.req.localqpn"])
            qp.comm_id = f["cm.req"]
            qp.recv_psn = f["cm.req.startpsn"]
            qp.service_id = f["cm.req.serviceid"]
            qp.closed = False
            self._pending_req[qp.comm_id] = qp.key
        elif attribute == REP and "cm.rep.localqpn" in f:
            qp = self._qp(src, f["cm.rep.localqpn"])
            qp.comm_id = f["cm.rep"]
            qp.peer_comm_id = f["cm.rep.remotecommid"]
            qp.recv_psn = f["cm.rep.startpsn"]
            qp.closed = False
            active = self.qps.get(self._pending_req.pop(qp.peer_comm_id, ("", -1)))
            if active is not None:
                qp.service_id = active.service_id
                active.peer_comm_id = qp.comm_id
                active.peer, qp.peer = qp.key, active.key
                active.send_psn, qp.send_psn = qp.recv_psn, active.recv_psn
                active.acked_psn, qp.acked_psn = qp.recv_psn, active.recv_psn
        elif attribute in COMM_IDS and attribute not in (REQ, REP):
            _, local, remote = COMM_IDS[attribute]
            if attribute == 0x15 and local in f:  # DREQ: that connection is going away
                for qp in self.qps.values():
                    if qp.comm_id in (f[local], f.get(remote)):
                        qp.closed = True

    # -- reading -----------------------------------------------------------------------

    def connections(self) -> list[tuple[QpState, QpState]]:
        """Live RC connections, both ends known, newest first: (one end, the other)."""
        seen, out = set(), []
        for qp in sorted(self.qps.values(), key=lambda q: -q.last_seen):
            if qp.peer is None or qp.key in seen or qp.closed:
                continue
            other = self.qps.get(qp.peer)
            if other is None or other.closed:
                continue
            seen.update((qp.key, other.key))
            out.append((replace(qp), replace(other)))
        return out

    def connection(self, service_id: int | None = None) -> tuple[QpState, QpState] | None:
        """The newest live connection (of ``service_id``, when given), ends ordered by
        address (so that a fresh run of the same scenario names them the same way)."""
        for a, b in self.connections():
            if service_id is not None and service_id not in (a.service_id, b.service_id):
                continue
            return (a, b) if a.address <= b.address else (b, a)
        return None

    def addresses(self) -> list[str]:
        """The RoCE endpoints' addresses seen (sorted)."""
        return sorted({q.address for q in self.qps.values()} | set(self.macs))

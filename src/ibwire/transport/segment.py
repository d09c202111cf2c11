"""Messages into packets: request segmentation by path MTU, READ responses, ACKs.

Rules (IBA Vol. 1 ch. 9; the same in Linux ``drivers/infiniband/sw/rxe/rxe_req.c``):
- A SEND or RDMA WRITE of L bytes takes max(1, ceil(L / PMTU)) packets and as many PSNs:
  FIRST and MIDDLE carry exactly PMTU bytes, LAST the rest (1..PMTU), ONLY 0..PMTU.
  RETH rides on WRITE FIRST/ONLY with the whole message's VA and length; ImmDt and IETH on
  LAST/ONLY; DETH on every UD packet; SE only on the last packet (9.2.3).
- An RDMA READ request is one packet that reserves max(1, ceil(L / PMTU)) PSNs, one per
  response packet (9.7.4.1.4); a request resent from the k-th of those PSNs asks for the rest
  of the message: VA + k * PMTU, L - k * PMTU.
- READ responses are FIRST/MIDDLE/LAST/ONLY with the PSNs of the request; AETH rides on FIRST,
  LAST and ONLY, not MIDDLE (Table 35).
- An atomic is one packet, one PSN, answered by an ATOMIC ACKNOWLEDGE with the same PSN.
- AckReq is set on the last packet of every RC message, and on every N-th PSN of the QP for
  an ``ack_every`` policy (rxe: ``RXE_MAX_PKT_PER_ACK``); a requester with a window also
  sets it on the packet that fills the window. UC and UD are never acknowledged.
- XRC is RC with the XRC opcodes: every request carries an XRCETH naming the destination
  XRC SRQ, the answers are XRC READ RESPONSE / ACKNOWLEDGE / ATOMIC ACKNOWLEDGE, which carry
  no XRCETH (IBA Vol. 1 Table 38, Annex A14; the XRC rows of specs/opcodes.tsv).
Which ETHs an opcode carries is read from specs/opcodes.tsv, not listed here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from ibwire.headers.aeth import encode_syndrome
from ibwire.tables import opcodes, opcodes_by_name
from ibwire.transport.packets import Aeth, AtomicEth, Deth, Packet, Reth
from ibwire.transport.psn import psn_add
from ibwire.transport.verbs import RELIABLE, WorkRequest, check_pmtu, verb_opcodes

#: AETH syndromes (rxe_hdr.h: ACK with unlimited credits 0x1F, NAK codes 0x60 + code).
ACK_SYNDROME = encode_syndrome("ACK", 0x1F)
NAK_PSN_SEQUENCE_ERROR = 0
NAK_INVALID_REQUEST = 1

_OP = {name: op.value for name, op in opcodes_by_name().items()}


class Responses(NamedTuple):
    """The answer opcodes of a reliable transport: READ responses FIRST, MIDDLE, LAST, ONLY,
    ACKNOWLEDGE (ACK and every NAK), ATOMIC ACKNOWLEDGE."""

    read: tuple[int, int, int, int]
    ack: int
    atomic_ack: int


def _responses(transport: str) -> Responses:
    op = {suffix: _OP[f"{transport}_{suffix}"] for suffix in (
        "RDMA_READ_RESPONSE_FIRST", "RDMA_READ_RESPONSE_MIDDLE", "RDMA_READ_RESPONSE_LAST",
        "RDMA_READ_RESPONSE_ONLY", "ACKNOWLEDGE", "ATOMIC_ACKNOWLEDGE")}
    values = list(op.values())
    return Responses((values[0], values[1], values[2], values[3]), values[4], values[5])


#: Answer opcodes by reliable transport (UC and UD, never answered, use RC's).
RESPONSES = {transport: _responses(transport) for transport in RELIABLE}
READ_RESPONSE, ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE = RESPONSES["RC"]


def packets_for(length: int, pmtu: int) -> int:
    """Packets (and PSNs) a message of ``length`` bytes takes at ``pmtu``: at least one."""
    return max(1, -(-length // pmtu))


@dataclass(frozen=True)
class Segmenter:
    """The packets of one QP's messages. ``dest_qp`` is the remote QPN (UD: the default for
    requests that name none); ``src_qp`` and ``q_key`` fill the DETH of UD packets,
    ``xrc_srq`` the XRCETH of XRC requests."""

    transport: str
    pmtu: int
    dest_qp: int
    src_qp: int = 0
    q_key: int = 0
    ack_every: int | None = None
    xrc_srq: int = 0

    def __post_init__(self) -> None:
        check_pmtu(self.pmtu)
        if self.ack_every is not None and self.ack_every < 1:
            raise ValueError(f"ack_every must be at least 1, not {self.ack_every}")

    @property
    def responses(self) -> Responses:
        """The opcodes the responder answers with."""
        return RESPONSES.get(self.transport, RESPONSES["RC"])

    def psn_count(self, wr: WorkRequest) -> int:
        """PSNs ``wr`` takes: one per packet, one per READ response packet, one per atomic."""
        if wr.is_atomic:
            return 1
        return packets_for(wr.length, self.pmtu)

    def request(self, wr: WorkRequest, k: int, psn: int, index: int,
                retransmission: bool = False, ackreq: bool = False) -> Packet:
        """The request packet sent for the ``k``-th PSN of ``wr`` (PSN ``psn``, the ``index``-th
        PSN of the QP, counted for ``ack_every``). For a READ, the request for the rest of the
        message from response ``k`` on. ``ackreq`` forces AckReq (RC), as a requester does
        on the packet that fills its window."""
        ops = verb_opcodes(self.transport, wr.verb)
        n = self.psn_count(wr)
        last = k == n - 1
        ackreq = self.transport in RELIABLE and (
            ackreq or last or wr.is_read
            or (self.ack_every is not None and (index + 1) % self.ack_every == 0))
        dest_qp = wr.dest_qp if wr.dest_qp is not None and self.transport == "UD" else self.dest_qp
        deth = None
        if self.transport == "UD":
            deth = Deth(wr.q_key if wr.q_key is not None else self.q_key, self.src_qp)
        table = opcodes()
        if wr.is_read:
            off = k * self.pmtu
            return Packet(ops.only, psn, dest_qp, ackreq=ackreq,
                          reth=Reth(wr.remote_va + off, wr.rkey, wr.length - off),
                          deth=deth, offset=off, wr_id=wr.wr_id, retransmission=retransmission,
                          xrc_srq=self._xrc(table[ops.only].headers))
        if wr.is_atomic:
            return Packet(ops.only, psn, dest_qp, ackreq=ackreq,
                          atomic=AtomicEth(wr.remote_va, wr.rkey, wr.swap_add, wr.compare),
                          deth=deth, wr_id=wr.wr_id, retransmission=retransmission,
                          xrc_srq=self._xrc(table[ops.only].headers))
        if n == 1:
            opcode = ops.only
        else:
            assert ops.first is not None and ops.middle is not None and ops.last is not None
            opcode = ops.first if k == 0 else ops.last if last else ops.middle
        off = k * self.pmtu
        headers = table[opcode].headers
        return Packet(
            opcode, psn, dest_qp, payload_len=min(self.pmtu, wr.length - off), ackreq=ackreq,
            se=wr.solicited and last,
            reth=Reth(wr.remote_va, wr.rkey, wr.length) if "RETH" in headers else None,
            immdt=wr.imm if "ImmDt" in headers else None,
            ieth=wr.invalidate_rkey if "IETH" in headers else None,
            deth=deth, offset=off, wr_id=wr.wr_id, retransmission=retransmission,
            xrc_srq=self._xrc(headers))

    def _xrc(self, headers: tuple[str, ...]) -> int | None:
        return self.xrc_srq if "XRCETH" in headers else None

    # --- responder side -------------------------------------------------------------------

    def read_responses(self, psn: int, length: int, msn: int,
                       wr_id: int | None = None) -> Iterator[Packet]:
        """The responses to a READ request with PSN ``psn`` for ``length`` bytes."""
        n = packets_for(length, self.pmtu)
        first, middle, last, only = self.responses.read
        aeth = Aeth(ACK_SYNDROME, msn)
        for k in range(n):
            off = k * self.pmtu
            size = min(self.pmtu, length - off)
            if n == 1:
                opcode = only
            else:
                opcode = first if k == 0 else last if k == n - 1 else middle
            yield Packet(opcode, psn_add(psn, k), self.dest_qp, payload_len=size,
                         aeth=None if opcode == middle else aeth, offset=off, wr_id=wr_id)

    def ack(self, psn: int, msn: int) -> Packet:
        """ACK of every request up to and including ``psn``."""
        return Packet(self.responses.ack, psn, self.dest_qp, aeth=Aeth(ACK_SYNDROME, msn))

    def nak(self, psn: int, msn: int, code: int = NAK_PSN_SEQUENCE_ERROR) -> Packet:
        """NAK naming ``psn``: PSN sequence error (code 0) says ``psn`` is the one expected."""
        return Packet(self.responses.ack, psn, self.dest_qp,
                      aeth=Aeth(encode_syndrome("NAK", code), msn))

    def rnr_nak(self, psn: int, msn: int, timer: int) -> Packet:
        """RNR NAK for ``psn`` asking the requester to wait ``timer`` (IBA Table 45 code)."""
        return Packet(self.responses.ack, psn, self.dest_qp,
                      aeth=Aeth(encode_syndrome("RNR_NAK", timer), msn))

    def atomic_ack(self, psn: int, msn: int, original: int) -> Packet:
        """ATOMIC ACKNOWLEDGE of the atomic with PSN ``psn``: the value found at its VA."""
        return Packet(self.responses.atomic_ack, psn, self.dest_qp, aeth=Aeth(ACK_SYNDROME, msn),
                      atomic_ack=original)

"""One transport packet as the model emits and receives it: header values, not bytes.

:class:`Packet` holds the BTH fields the transport decides and the extended transport headers
its opcode carries (which ones: specs/opcodes.tsv). The payload is a length and an offset into
the message; whoever puts the packet on a wire chooses the bytes. :meth:`Packet.fields` gives
the flat keys :func:`ibwire.build` takes (``bth.psn``, ``reth.va`` ...), so a frame is
``build(encap, {**addressing, **p.fields()}, payload_of(p))``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ibwire.tables import Opcode, opcodes


class Reth(NamedTuple):
    """RDMA ETH: virtual address, R_Key, DMA length (IBA 9.3.3)."""

    va: int
    r_key: int
    dmalen: int


class AtomicEth(NamedTuple):
    """Atomic ETH: VA, R_Key, swap (or add) data, compare data (IBA 9.3.4)."""

    va: int
    r_key: int
    swap_add: int
    compare: int


class Deth(NamedTuple):
    """Datagram ETH: Q_Key and source QPN (IBA 9.3.2)."""

    q_key: int
    src_qp: int


class Aeth(NamedTuple):
    """ACK ETH: syndrome byte and MSN (IBA 9.3.5; decoded by ibwire.headers.aeth)."""

    syndrome: int
    msn: int


class Packet(NamedTuple):
    """A transport packet: BTH values, the ETHs of its opcode, and where its payload sits.

    ``payload_len`` bytes of the message starting at ``offset`` travel in it (PadCnt follows).
    ``xrc_srq`` is the XRC SRQ number in the XRCETH of an XRC request (IBA Vol. 1 Annex A14).
    ``wr_id`` names the work request it belongs to and ``retransmission`` says that its PSN
    was sent before; neither is on the wire.
    """

    opcode: int
    psn: int
    dest_qp: int
    payload_len: int = 0
    ackreq: bool = False
    se: bool = False
    becn: bool = False
    reth: Reth | None = None
    immdt: int | None = None
    ieth: int | None = None
    atomic: AtomicEth | None = None
    deth: Deth | None = None
    aeth: Aeth | None = None
    atomic_ack: int | None = None
    offset: int = 0
    wr_id: int | None = None
    retransmission: bool = False
    xrc_srq: int | None = None

    @property
    def op(self) -> Opcode:
        return opcodes()[self.opcode]

    @property
    def name(self) -> str:
        return opcodes()[self.opcode].name

    @property
    def padcnt(self) -> int:
        """Pad bytes that bring the payload to a multiple of 4 (BTH PadCnt, IBA 9.2.3)."""
        return -self.payload_len & 3

    def fields(self) -> dict[str, Any]:
        """The packet's values under :func:`ibwire.build` keys (PadCnt, lengths, CRCs left to
        the builder, which derives them)."""
        out: dict[str, Any] = {
            "bth.opcode": self.opcode, "bth.psn": self.psn, "bth.destqp": self.dest_qp,
            "bth.a": int(self.ackreq), "bth.se": int(self.se),
        }
        if self.becn:
            out["bth.becn"] = 1
        if self.deth is not None:
            out["deth.q_key"], out["deth.srcqp"] = self.deth
        if self.xrc_srq is not None:
            out["xrceth.xrcsrq"] = self.xrc_srq
        if self.reth is not None:
            out["reth.va"], out["reth.r_key"], out["reth.dmalen"] = self.reth
        if self.atomic is not None:
            (out["atomiceth.va"], out["atomiceth.r_key"], out["atomiceth.swapdt"],
             out["atomiceth.cmpdt"]) = self.atomic
        if self.aeth is not None:
            out["aeth.syndrome"], out["aeth.msn"] = self.aeth
        if self.atomic_ack is not None:
            out["atomicacketh.origremdt"] = self.atomic_ack
        if self.immdt is not None:
            out["immdt"] = self.immdt
        if self.ieth is not None:
            out["ieth"] = self.ieth
        return out

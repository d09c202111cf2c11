"""Work requests: the verbs a requester posts, and which opcodes carry each on each transport.

The opcode names come from specs/opcodes.tsv (IBA Vol. 1 Table 35): a verb on a transport is
the rows ``<transport>_<FIRST, MIDDLE, LAST, ONLY>`` below; a verb a transport lacks (READ on
UC, SEND with invalidate on UC, anything but SEND on UD) has no rows and is refused. XRC
(IBA Vol. 1 Annex A14: an XRC INI QP sends the RC verbs with the XRC opcodes 0xA0-0xB7
and an XRCETH naming the destination SRQ) is reliable as RC is.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from ibwire.errors import IbwireError
from ibwire.tables import opcodes_by_name

TRANSPORTS = ("RC", "UC", "UD", "XRC")
#: Transports whose requests are acknowledged: ACK/NAK, retries, READ and atomics.
RELIABLE = ("RC", "XRC")
VERBS = ("send", "send_imm", "send_inv", "write", "write_imm", "read", "fetch_add", "cmp_swap")
#: Path MTUs a QP may use (IBA 9.7.5.1.6 / ibv_mtu: 256 .. 4096).
PMTUS = (256, 512, 1024, 2048, 4096)
#: Bytes an atomic operates on (IBA 9.4.5).
ATOMIC_BYTES = 8
MAX_MESSAGE = 1 << 31  # the RETH DMA length is 32 bits; IBA caps messages at 2^31 bytes


class TransportError(IbwireError):
    """A work request or a QP setting the transport cannot carry (READ on UD, MTU 3000...)."""


# Opcode name suffixes per verb: (first, middle, last, only); None where there is none.
_SUFFIXES: dict[str, tuple[str | None, str | None, str | None, str]] = {
    "send": ("SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_ONLY"),
    "send_imm": ("SEND_FIRST", "SEND_MIDDLE", "SEND_LAST_WITH_IMMEDIATE",
                 "SEND_ONLY_WITH_IMMEDIATE"),
    "send_inv": ("SEND_FIRST", "SEND_MIDDLE", "SEND_LAST_WITH_INVALIDATE",
                 "SEND_ONLY_WITH_INVALIDATE"),
    "write": ("RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST", "RDMA_WRITE_ONLY"),
    "write_imm": ("RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST_WITH_IMMEDIATE",
                  "RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
    "read": (None, None, None, "RDMA_READ_REQUEST"),
    "fetch_add": (None, None, None, "FETCH_ADD"),
    "cmp_swap": (None, None, None, "COMPARE_SWAP"),
}


class VerbOpcodes(NamedTuple):
    """Opcode values of a verb on a transport; ``first`` etc. are None for one-packet verbs."""

    first: int | None
    middle: int | None
    last: int | None
    only: int


@cache
def verb_opcodes(transport: str, verb: str) -> VerbOpcodes:
    """The opcodes that carry ``verb`` on ``transport``, or TransportError if it has none."""
    if transport not in TRANSPORTS:
        raise TransportError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if verb not in _SUFFIXES:
        raise TransportError(f"verb {verb!r} is not one of {', '.join(VERBS)}")
    table = opcodes_by_name()
    first, middle, last, only = (
        table.get(f"{transport}_{s}") if s else None for s in _SUFFIXES[verb])
    multi = _SUFFIXES[verb][0] is not None
    if only is None or (multi and transport != "UD" and None in (first, middle, last)):
        raise TransportError(f"{transport} has no {verb.upper()} opcodes")
    return VerbOpcodes(*(op.value if op is not None else None for op in (first, middle, last)),
                       only.value)


@dataclass(frozen=True)
class WorkRequest:
    """One message a requester posts (``ibv_send_wr``, reduced to what reaches the wire).

    ``length`` is the message size (READ: the bytes asked for; atomics are always 8 bytes).
    ``imm`` is the immediate data of SEND/WRITE with immediate, ``invalidate_rkey`` the R_Key a
    SEND with invalidate names, ``swap_add``/``compare`` the atomic operands. ``solicited``
    sets SE on the last packet. On UD, ``dest_qp`` and ``q_key`` address the datagram.
    """

    verb: str
    length: int = 0
    wr_id: int = 0
    remote_va: int = 0
    rkey: int = 0
    imm: int = 0
    invalidate_rkey: int = 0
    swap_add: int = 0
    compare: int = 0
    solicited: bool = False
    dest_qp: int | None = None
    q_key: int | None = None

    @property
    def is_read(self) -> bool:
        return self.verb == "read"

    @property
    def is_atomic(self) -> bool:
        return self.verb in ("fetch_add", "cmp_swap")

    def checked(self, transport: str, pmtu: int) -> WorkRequest:
        """This request, or TransportError saying why ``transport`` at ``pmtu`` cannot carry it."""
        verb_opcodes(transport, self.verb)
        if not 0 <= self.length <= MAX_MESSAGE:
            raise TransportError(f"message length {self.length} is outside 0..2^31")
        if self.is_atomic and self.length not in (0, ATOMIC_BYTES):
            raise TransportError(f"an atomic operates on {ATOMIC_BYTES} bytes, not {self.length}")
        if transport == "UD" and self.length > pmtu:
            raise TransportError(f"a UD message ({self.length} bytes) must fit one packet "
                                 f"(PMTU {pmtu})")
        return self


def check_pmtu(pmtu: int) -> int:
    if pmtu not in PMTUS:
        raise TransportError(f"path MTU {pmtu!r} is not one of {', '.join(map(str, PMTUS))}")
    return pmtu


class RequestKind(NamedTuple):
    """What a request opcode is: ``family`` send/write/read/atomic, ``position``
    first/middle/last/only, and the verb when the opcode tells it (LAST and ONLY do)."""

    family: str
    position: str
    verb: str | None


def _kind_of(name: str) -> RequestKind | None:
    base = name.split("_", 1)[1]
    if base in ("RDMA_READ_REQUEST",):
        return RequestKind("read", "only", "read")
    if base in ("FETCH_ADD", "COMPARE_SWAP"):
        return RequestKind("atomic", "only", "fetch_add" if base == "FETCH_ADD" else "cmp_swap")
    for family, prefix in (("send", "SEND_"), ("write", "RDMA_WRITE_")):
        if base.startswith(prefix):
            position = base[len(prefix):].split("_", 1)[0].lower()
            if position not in ("first", "middle", "last", "only"):
                return None
            verb = None
            if position in ("last", "only"):
                verb = family if family == "send" else "write"
                if base.endswith("WITH_IMMEDIATE"):
                    verb += "_imm"
                elif base.endswith("WITH_INVALIDATE"):
                    verb += "_inv"
            return RequestKind(family, position, verb)
    return None


@cache
def request_kinds() -> dict[int, RequestKind]:
    """Request opcodes of RC, UC, UD and XRC, by value (responses, ACKs, CNPs are not requests)."""
    return {op.value: kind for op in opcodes_by_name().values()
            if op.transport in TRANSPORTS and (kind := _kind_of(op.name)) is not None}

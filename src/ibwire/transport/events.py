"""What the requester and responder report besides the packets they emit.

Events are plain frozen dataclasses; ``time_ns`` is the ``now_ns`` of the call that produced
them (the model has no clock of its own).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Completed:
    """Requester: a work request finished (RC: acknowledged or answered; UC/UD: sent).
    ``result`` is the original remote value an atomic returned."""

    wr_id: int
    verb: str
    first_psn: int
    psn_count: int
    length: int
    time_ns: int
    result: int | None = None


@dataclass(frozen=True)
class Retransmitting:
    """Requester: goes back to ``psn`` and sends again from there. ``cause``: ``nak`` (PSN
    sequence error NAK), ``timeout`` (local ACK timeout), ``rnr`` (RNR NAK wait over),
    ``read`` (READ response or atomic ACK missing before a later response or ACK)."""

    psn: int
    cause: str
    time_ns: int


@dataclass(frozen=True)
class RnrWaiting:
    """Requester: an RNR NAK for ``psn``; nothing is sent before ``until_ns``."""

    psn: int
    timer: int
    until_ns: int


@dataclass(frozen=True)
class Failed:
    """Requester: the QP went to the error state. ``reason``: ``retry_exceeded``,
    ``rnr_retry_exceeded`` or ``remote_error`` (a NAK other than PSN sequence error)."""

    wr_id: int | None
    psn: int
    reason: str
    time_ns: int


@dataclass(frozen=True)
class Delivered:
    """Responder: a message was accepted whole (SEND/WRITE: its last packet; READ and atomics:
    the request) and counted in the MSN, which is now ``msn``."""

    verb: str
    first_psn: int
    last_psn: int
    length: int
    msn: int
    time_ns: int
    imm: int | None = None
    invalidated_rkey: int | None = None


@dataclass(frozen=True)
class Duplicate:
    """Responder: a request packet whose PSN was already accepted (answered again per IBA
    9.7.5.1.2: re-ACK, READ responses again, the saved atomic ACK)."""

    psn: int
    time_ns: int


@dataclass(frozen=True)
class OutOfSequence:
    """Responder: a request packet ahead of the expected PSN ``expected``; ``nak`` says
    whether this packet drew the NAK (only the first packet of a gap does)."""

    psn: int
    expected: int
    nak: bool
    time_ns: int


@dataclass(frozen=True)
class RnrNakSent:
    """Responder: answered ``psn`` with an RNR NAK carrying ``timer``."""

    psn: int
    timer: int
    time_ns: int


@dataclass(frozen=True)
class Discarded:
    """A packet dropped without an answer. ``reason``: ``icrc`` (bad ICRC), ``uc_sequence``
    (UC packet after a loss, until the next FIRST/ONLY), ``q_key`` (UD Q_Key mismatch),
    ``opcode_sequence``, ``unexpected`` (a response or ACK nothing waits for), ``error_state``."""

    psn: int
    reason: str
    time_ns: int


Event = (Completed | Retransmitting | RnrWaiting | Failed | Delivered | Duplicate | OutOfSequence
         | RnrNakSent | Discarded)

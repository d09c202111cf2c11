"""Which frames the rules of a fault plan hit, and what they do to them: :func:`candidates`
narrows a whole batch with numpy (the frames no rule can hit are forwarded without Python
per frame), :func:`selects` decides for one frame, :func:`act` edits it or forges. What a rule applies to by default, and what its keys
select, is described in :mod:`ibwire.impair.plan`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ibwire.impair import forge
from ibwire.impair.plan import ANSWER_KINDS, NAK_CODES, READ_RESPONSE_KINDS, Rule
from ibwire.impair.state import ANSWERS, Connection, LiveState
from ibwire.transport.opkinds import ACK, ATOMIC_ACK, READ_RESP, REQUEST
from ibwire.transport.psn import PSN_MASK


def candidates(rules: list[Rule], state: LiveState, waiting: Iterable[int], d: int,
               cols: dict[str, np.ndarray], kinds: np.ndarray, tx: np.ndarray
               ) -> np.ndarray:
    """The rows of a batch going ``d`` that some rule may hit, or that belong to a
    connection ``waiting`` after an RNR NAK (a superset, narrowed with numpy: the rest of
    the batch is sent on without Python per frame). ``kinds``: each row's
    :data:`ibwire.transport.opkinds.KIND`; ``tx``: the transmission of its PSN."""
    ib = cols["ib"]
    out = np.zeros(len(ib), bool)
    for k in waiting:
        c = state.connections[k]
        if c.direction == d:
            out |= ib & (kinds == REQUEST) & (cols["bth.destqp"] == c.qpn)
    for rule in rules:
        if rule.spent() or (rule.direction is not None and rule.direction != d):
            continue
        # the most selective test first: a batch the rule cannot hit costs a few operations
        m = ib
        if (rule.qp is not None and rule.psn is not None and rule.opcode is None
                and rule.kind not in ANSWER_KINDS and rule.kind not in READ_RESPONSE_KINDS):
            if rule.qp >= len(state.connections):
                continue
            c = state.connections[rule.qp]
            if c.direction != d:
                continue
            m = (((cols["bth.psn"].astype(np.int64) - c.start_psn) & PSN_MASK) == rule.psn)
            if not m.any():
                continue
            m &= ib & (cols["bth.destqp"] == c.qpn)
        if rule.psn_abs is not None:
            m = m & (cols["bth.psn"] == rule.psn_abs)
            if not m.any():
                continue
        if rule.opcode is not None:
            m = m & (cols["bth.opcode"] == rule.opcode)
        elif rule.kind in ANSWER_KINDS:
            m = m & ((kinds == ACK) | (kinds == READ_RESP) | (kinds == ATOMIC_ACK))
        elif rule.kind in READ_RESPONSE_KINDS:
            m = m & (kinds == READ_RESP)
        else:
            m = m & (kinds == REQUEST)
        want = rule.transmission()
        if want:
            m &= tx == want if want == 1 or state.count_all else tx >= 2
        out |= m
    return out


def selects(rule: Rule, d: int, kind: int, opcode: int, qpn: int, psn: int, tx: int,
            conn: Connection | None) -> bool:
    """Whether ``rule`` hits a frame going ``d`` (its BTH opcode, DestQP, PSN, the
    transmission of that PSN, its :data:`~ibwire.transport.opkinds.KIND` and
    connection), counts and rates aside."""
    if rule.opcode is not None:
        if opcode != rule.opcode:
            return False
    elif rule.kind in ANSWER_KINDS:
        if kind not in ANSWERS:
            return False
    elif rule.kind in READ_RESPONSE_KINDS:
        if kind != READ_RESP:
            return False
    elif kind != REQUEST:
        return False
    if rule.direction is not None and rule.direction != d:
        return False
    if rule.qp is not None and (conn is None or conn.index != rule.qp):
        return False
    if rule.qpn is not None and (conn.qpn if conn is not None else qpn) != rule.qpn:
        return False
    if rule.psn is not None and (conn is None or conn.psn_offset(psn) != rule.psn):
        return False
    if rule.psn_abs is not None and psn != rule.psn_abs:
        return False
    want = rule.transmission()
    return not want or tx == want


def act(rule: Rule, entry: dict[str, Any], i: int, frame: bytearray,
        cols: dict[str, np.ndarray], conn: Connection | None, psn: int,
        forged: list[tuple[bytes, dict[str, Any]]]) -> str | None:
    """Applies the edit of ``rule`` to ``frame`` (row ``i`` of ``cols``), or builds its
    forged packet into ``forged`` with its manifest ``entry``; the reason when it cannot
    apply to this frame, else None. Drops, copies and holds are the caller's."""
    kind = rule.kind
    if kind == "corrupt":
        at = int(cols["offset.icrc"][i])
        if at < 0:
            return "the frame has no ICRC"
        forge.corrupt(frame, at)
    elif kind in ("ecn", "ecn_resp"):
        at = int(cols["offset.network"][i])
        if at < 0 or not forge.mark_ce(frame, at):
            return "ECN marks are RoCEv2's (IP): not this frame's"
    elif kind == "delay":
        entry["us"] = rule.us
    elif kind == "reorder":
        entry["by"] = rule.by
    elif kind == "dup":
        entry["copies"] = rule.copies
    elif kind in ("nak", "rnr", "cnp"):
        if conn is None or conn.peer_qpn is None:
            return "the requester's QPN is not known yet (no answer nor CM exchange seen)"
        if kind == "cnp":
            packet = forge.forged_cnp(conn)
        elif kind == "rnr":
            packet = forge.forged_nak(conn, psn, rule.timer, rnr=True)
            entry["timer"] = rule.timer
        else:
            packet = forge.forged_nak(conn, psn, NAK_CODES[rule.code])
            entry["code"] = rule.code
        entry["peer_qpn"] = conn.peer_qpn
        entry["msn"] = conn.msn or 0
        forged.append((packet, entry))
    return None

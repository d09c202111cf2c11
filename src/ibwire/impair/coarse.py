"""The pump's filter: which frames the C pump (``pump.c``) must hand to Python.

A superset of what the plan and the live state need, in terms C tests per frame without
Python: one row per rule (and per connection waiting after an RNR NAK, and one for a hook)
of ``direction, class, opcode, DestQP, PSN`` (-1: any), and the sorted keys ``direction << 24
| DestQP`` of the requests and answers whose connection the state knows. A frame matching a
row goes to Python, where :func:`ibwire.impair.rules.selects` decides with the rest of the
rule (``nth=``, ``rate=``, ``count=``, ``tx=``); an IB frame of a connection the state does
not know goes to Python so that the state learns it (as does every MAD: the CM exchange).

How a rule becomes a row: its direction; its class (requests, answers, READ responses, or
its ``opcode=``); with ``qp=K`` the K-th connection's direction and responder QPN for
requests (its requester QPN for answers, once learnt), nothing when that connection has not
appeared (the rule cannot hit anything yet; its first request surfaces as a new
connection); with ``psn=P`` the PSN P past the connection's first (one row per connection
without ``qp=``); ``qpn=`` for requests; ``psn-abs=`` as given. ``tx=`` is not tested in C:
a rule whose only selector is ``tx=`` sends its whole class to Python.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ibwire.impair.plan import ANSWER_KINDS, READ_RESPONSE_KINDS, Rule
from ibwire.impair.state import ANSWERS, LiveState
from ibwire.transport.psn import PSN_MASK

REQUESTS, ANSWER_CLASS, READ_RESPONSES, OPCODE, ANY_IB = range(5)
WORDS = 5
CM_QP = 1


def _class(rule: Rule) -> tuple[int, int]:
    if rule.opcode is not None:
        return OPCODE, rule.opcode
    if rule.kind in ANSWER_KINDS:
        return ANSWER_CLASS, -1
    if rule.kind in READ_RESPONSE_KINDS:
        return READ_RESPONSES, -1
    return REQUESTS, -1


def rule_rows(rules: list[Rule], state: LiveState, waiting: Iterable[int], hook: bool
              ) -> np.ndarray:
    """The rows (``WORDS`` int64 each) of the rules not spent, the connections ``waiting``
    after an RNR NAK (their requests) and a hook (every IB frame)."""
    rows: list[list[int]] = []
    if hook:
        rows.append([-1, ANY_IB, -1, -1, -1])
    for k in waiting:
        c = state.connections[k]
        rows.append([c.direction, REQUESTS, -1, c.qpn, -1])
    for rule in rules:
        if rule.spent():
            continue
        cls, opcode = _class(rule)
        if rule.qp is not None:
            if rule.qp >= len(state.connections):
                continue
            targets = [state.connections[rule.qp]]
        elif rule.psn is not None:
            targets = list(state.connections)
        else:
            targets = [None]
        for c in targets:
            direction = -1 if rule.direction is None else rule.direction
            destqp = psn = -1
            if c is not None:
                way = (c.direction if cls == REQUESTS else 1 - c.direction
                       if cls != OPCODE else direction)
                if direction not in (-1, way):
                    continue
                direction = way
                if cls == REQUESTS:
                    destqp = c.qpn
                elif cls != OPCODE and c.peer_qpn is not None:
                    destqp = c.peer_qpn
                if rule.psn is not None:
                    psn = (c.start_psn + rule.psn) & PSN_MASK
            if rule.qpn is not None and cls == REQUESTS:
                if destqp not in (-1, rule.qpn):
                    continue
                destqp = rule.qpn
            if rule.psn_abs is not None:
                psn = rule.psn_abs
            rows.append([direction, cls, opcode, destqp, psn])
    return np.array(rows, np.int64).reshape(-1, WORDS)


def known_keys(state: LiveState, unbound: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """(requests, answers): the sorted keys of the frames whose connection the state knows
    (a request's by its direction and DestQP; an answer's by its direction and the
    requester's QPN), the answers ``unbound`` too (no connection would take them: they
    teach the state nothing until a new connection appears)."""
    requests = [d << 24 | qpn for d, qpn in state.by_responder]
    answers = [(1 - d) << 24 | qpn for d, qpn in state.by_requester]
    answers.extend(unbound)
    return (np.unique(np.array(requests, np.int64)), np.unique(np.array(answers, np.int64)))


def unbound_answers(state: LiveState, d: int, cols: dict[str, np.ndarray],
                    kinds: np.ndarray) -> set[int]:
    """The keys of the answers of a batch going ``d`` that no connection took (after the
    state was fed the batch)."""
    destqp = cols["bth.destqp"]
    answers = cols["ib"] & np.isin(kinds, ANSWERS) & (destqp > CM_QP)
    if not answers.any():
        return set()
    return {d << 24 | int(q) for q in np.unique(destqp[answers]).tolist()
            if state.requester_of(d, int(q)) is None}

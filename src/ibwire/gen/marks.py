"""The responder's port when CE-marked requests draw CNPs, in closed form.

The simulation (:mod:`ibwire.gen.run`) has the responder, the notification point, decide on a
CNP when a CE-marked request arrives, at most one per pacing interval
(:class:`ibwire.transport.CnpPacer`, one QP: one key), and send it on its port before any
answer waiting there once the interval since the last CNP left has passed. The answers
(ACKs, NAKs) are otherwise sent the moment their request arrives, the port being free (every
request takes at least as long on the wire as an answer). :func:`responder_port` plays the
few frames around each CNP one by one and leaves the others where they were.
"""

from __future__ import annotations

import numpy as np


def cnp_decisions(marks: np.ndarray, interval: int) -> np.ndarray:
    """Which of the CE-marked arrivals ``marks`` (ns, ascending) draw a CNP: the first, then
    the first at least ``interval`` after the last that drew one."""
    out = []
    i = 0
    while i < len(marks):
        out.append(i)
        i = max(i + 1, int(np.searchsorted(marks, int(marks[i]) + interval, "left")))
    return np.array(out, dtype=np.int64)


def responder_port(queued: np.ndarray, wire: np.ndarray, decided: np.ndarray, interval: int,
                   cnp_wire: int) -> tuple[np.ndarray, np.ndarray] | None:
    """When each answer and each CNP leaves the responder's port: ``queued`` the times the
    answers are made (ascending), ``wire`` their wire times, ``decided`` the times CNPs are
    decided (ascending). Returns (answers' send times, CNPs' send times), or None when the
    answers a CNP holds back are still waiting at the next CNP's decision (then the
    conversation is simulated)."""
    sent = queued.copy()
    cnps = np.empty(len(decided), dtype=np.int64)
    free = -1 << 62     # when the port is free
    left: int | None = None
    j = 0               # the first answer not yet placed
    count = len(queued)
    for c, d in enumerate(decided.tolist()):
        before = int(np.searchsorted(queued, d, "left"))
        if j < before:          # answers made before the decision went at once
            j = before
            free = max(free, int(sent[j - 1] + wire[j - 1]))
        due = d if left is None else max(d, left + interval)
        t = max(free, d)
        while True:
            if due <= t:
                cnps[c] = left = t
                free = t + cnp_wire
                break
            if j < count and queued[j] <= t:
                sent[j] = t
                free = t + int(wire[j])
                j += 1
            t = max(free, min(int(queued[j]) if j < count else due, due))
        while j < count and queued[j] <= free:      # the answers the CNP held back
            sent[j] = free
            free += int(wire[j])
            j += 1
        if c + 1 < len(decided) and free >= int(decided[c + 1]):
            return None
    return sent, cnps

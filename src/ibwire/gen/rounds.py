"""The recovery rounds of rate faults on one reliable QP (:mod:`ibwire.gen.recovery`): which
PSN indices the requester sends when, from the victims the seed picks.

Each round is a row ``(first index, end, first send time, first victim, NAK trigger (-1:
none), end of the duplicates, 0 / 1: resent on the local ACK timer / 2: its sequel)``: the
requester sends indices ``first .. end - 1`` back to back from the send time; the responder
accepts those before the victim, takes those before the end of the duplicates as
duplicates, and NAKs on the trigger.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import numpy as np

from ibwire.gen.fast import asks_ack

if TYPE_CHECKING:
    from ibwire.gen.fast import _Qp


def draws(seed: int, count: int) -> np.ndarray:
    """The first ``count`` values ``random.Random(seed).random()`` returns, drawn by numpy
    from the same Mersenne Twister state (both make a double of two 32-bit outputs the
    same way)."""
    state = random.Random(seed).getstate()[1]
    stream = np.random.RandomState()
    stream.set_state(("MT19937", np.array(state[:624], dtype=np.uint32), state[624]))
    return stream.random_sample(count)


class Rounds:
    """The rounds of :class:`ibwire.gen.recovery.RatePlan`, from the attributes it sets."""

    qps: list[_Qp]
    generation: Any
    rates: dict[str, float]
    start: int
    delay: int
    timeout: int | None
    ack_wire: int
    nak_wire: int
    edges: np.ndarray       # wire time before each PSN index (cumulative)
    wire: np.ndarray        # wire time of each PSN index
    lost: np.ndarray        # struck by drop, by PSN index
    bad: np.ndarray         # struck by corrupt
    answer_draws: np.ndarray

    def _victims(self) -> list[tuple[int, ...]] | None:
        """The rounds of lost and corrupted requests (:mod:`ibwire.gen.recovery` says how)."""
        q = self.qps[0]
        n, edges, delay = q.packets, self.edges, self.delay
        failing = self.lost | self.bad
        struck = np.flatnonzero(failing)
        # the first packet at or after j that arrives intact (n: none)
        intact = np.where(failing, n, np.arange(n, dtype=np.int64))
        intact = np.concatenate((np.minimum.accumulate(intact[::-1])[::-1], [n, n]))
        # each round: (first index, end, first send time, first victim, NAK trigger (-1:
        # none), end of the duplicates, 1: resent on the local ACK timer, 2: its sequel)
        runs: list[tuple[int, int, int, int, int, int, int]] = []
        a, f, high = 0, self.start, 0
        restart = self.start    # when the local ACK timer last started
        while True:
            at = int(np.searchsorted(struck, high))
            v = int(struck[at]) if at < len(struck) else n
            if v >= n:
                runs.append((a, n, f, n, -1, a, 0))
                break
            trigger = int(intact[v + 1])
            if trigger >= n:
                # nothing after the victim draws a NAK: the requester sends to the end,
                # then its local ACK timer (started by the last ACK) sends again from the
                # first PSN not acknowledged; what the responder had is duplicates, ACKed
                runs.append((a, n, f, v, -1, a, 0))
                if self.timeout is None:
                    return None
                last = self._last_ackreq(a, v)
                if last >= 0:
                    restart = max(restart, f + int(edges[last + 1] - edges[a]) + delay
                                  + self.ack_wire + delay)
                una = last + 1 if last >= 0 else a
                due = restart + self.timeout
                if una < v:
                    # the first duplicate's ACK acknowledges up to the victim: the requester
                    # goes on from there with the next packet it sends after that ACK
                    back = due + int(self.wire[una]) + delay + self.ack_wire + delay
                    jump = max(una + 1, int(np.searchsorted(edges, back - due + int(edges[una]))))
                    if jump < v:
                        runs.append((una, jump, due, n, -1, v, 1))
                        runs.append((v, n, due + int(edges[jump] - edges[una]), n, -1, v, 2))
                        break
                runs.append((una, n, due, n, -1, v, 1))
                break
            t_nak = (f + int(edges[trigger + 1] - edges[a]) + delay + self.nak_wire + delay)
            j = min(int(np.searchsorted(edges, t_nak - f + int(edges[a]))), n)
            runs.append((a, j, f, v, trigger, a, 0))
            high = max(high, j)
            a, f, restart = v, max(f + int(edges[j] - edges[a]), t_nak), t_nak
        return runs

    def _lost_answers(self) -> list[tuple[int, ...]] | None:
        """The rounds of lost ACKs: one round sends everything, a later ACK covering a lost
        one; when the last ones are lost, the local ACK timer sends again from the first
        PSN not acknowledged, each resend a duplicate the responder ACKs (each such ACK
        drawn for loss too), until one of those ACKs comes back (the requester has nothing
        left to send then) or the retries run out (then it is simulated)."""
        q, spec = self.qps[0], self.generation.scenario.qps[0]
        n, edges, delay = q.packets, self.edges, self.delay
        rate = self.rates["lose_ack"]
        asks = np.flatnonzero(asks_ack(q, np.arange(n, dtype=np.int64)))
        self.answer_draws = draws(self.generation.scenario.seed, len(asks) + n)
        kept = asks[self.answer_draws[:len(asks)] >= rate]
        runs: list[tuple[int, ...]] = [(0, n, self.start, n, -1, 0, 0)]
        if len(kept) and kept[-1] == n - 1:
            return runs
        if self.timeout is None:
            return None
        una, restart = 0, self.start
        if len(kept):
            una = int(kept[-1]) + 1
            restart = self.start + int(edges[una]) + delay + self.ack_wire + delay
        rank = len(asks)
        for _ in range(spec.retry_cnt):
            due = restart + self.timeout
            left = n - una
            if int(edges[n] - edges[una]) >= self.timeout:
                return None     # the timer would fire again amid the resends
            if rank + left > len(self.answer_draws):
                self.answer_draws = draws(self.generation.scenario.seed, 2 * (rank + left))
            back = np.flatnonzero(self.answer_draws[rank:rank + left] >= rate)
            if not len(back):       # every duplicate's ACK lost: the timer again
                runs.append((una, n, due, n, -1, n, 1))
                rank, restart = rank + left, due
                continue
            p = una + int(back[0])
            came = due + int(edges[p + 1] - edges[una]) + delay + self.ack_wire + delay
            end = min(n, int(np.searchsorted(edges, came - due + int(edges[una]))))
            runs.append((una, end, due, n, -1, n, 1))
            return runs
        return None     # retry_cnt timeouts in a row: the model fails the QP

    def _last_ackreq(self, a: int, v: int) -> int:
        """The last PSN index in ``a .. v - 1`` that asks for an ACK, or -1."""
        asks = np.flatnonzero(asks_ack(self.qps[0], np.arange(a, v, dtype=np.int64)))
        return a + int(asks[-1]) if len(asks) else -1


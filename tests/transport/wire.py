"""A two-link test bench for the transport model: a requester and a responder joined by a
wire with a fixed delay and a fixed time per packet, losing the packets a test names.

It is deliberately simple and independent of ibwire.gen: tests check the transport against
the spec through it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from ibwire.transport import Packet, Requester, Responder

#: lose(direction, n, packet) -> True drops the n-th packet put on the wire (n counts both
#: directions from 0; direction is "req" for requests, "resp" for answers).
Lose = Callable[[str, int, Packet], bool]


@dataclass
class Sent:
    time: int
    direction: str
    packet: Packet
    lost: bool


@dataclass
class Run:
    wire: list[Sent] = field(default_factory=list)
    requester_events: list = field(default_factory=list)
    responder_events: list = field(default_factory=list)
    end: int = 0

    def sent(self, direction: str) -> list[Packet]:
        return [s.packet for s in self.wire if s.direction == direction]

    def events(self, kind: type, side: str = "requester") -> list:
        found = self.requester_events if side == "requester" else self.responder_events
        return [e for e in found if isinstance(e, kind)]


def run(req: Requester, resp: Responder, *, delay: int = 1_000, gap: int = 100,
        lose: Lose | None = None, max_steps: int = 200_000) -> Run:
    """Drive both ends until nothing is left to send, in flight or timed."""
    out = Run()
    heap: list[tuple[int, int, str, Packet]] = []
    seq = 0
    t = 0
    free = {"req": 0, "resp": 0}
    ready = {"req": True, "resp": True}
    ends = {"req": req, "resp": resp}
    for _ in range(max_steps):
        for side in ("req", "resp"):
            if ready[side] and free[side] <= t:
                packet = ends[side].next_packet(t)
                if packet is None:
                    ready[side] = False
                    continue
                lost = bool(lose and lose(side, len(out.wire), packet))
                out.wire.append(Sent(t, side, packet, lost))
                free[side] = t + gap
                if not lost:
                    heapq.heappush(heap, (t + delay, seq, side, packet))
                    seq += 1
        times = [heap[0][0]] if heap else []
        times += [max(free[s], t) for s in ("req", "resp") if ready[s]]
        deadline = req.next_deadline()
        if deadline is not None:
            times.append(deadline)
        if not times:
            out.end = t
            out.requester_events += req.pop_events()
            return out
        t = max(t, min(times))
        while heap and heap[0][0] <= t:
            _, _, side, packet = heapq.heappop(heap)
            if side == "req":
                out.responder_events += resp.receive(packet, t)
                ready["resp"] = True
            else:
                out.requester_events += req.receive(packet, t)
                ready["req"] = True
        if deadline is not None and deadline <= t:
            out.requester_events += req.timeout(t)
            ready["req"] = True
        out.requester_events += req.pop_events()
    raise AssertionError("the bench did not settle")


def drop_psns(psns: dict[int, int], direction: str = "req") -> Lose:
    """Lose the first ``psns[p]`` transmissions of PSN ``p`` in ``direction``."""
    left = dict(psns)

    def lose(side: str, n: int, packet: Packet) -> bool:
        if side == direction and left.get(packet.psn, 0) > 0:
            left[packet.psn] -= 1
            return True
        return False

    return lose


def drop_nth(indices: set[int]) -> Lose:
    """Lose the packets with these positions on the wire (both directions counted)."""
    return lambda side, n, packet: n in indices

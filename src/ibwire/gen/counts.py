"""Per-connection counts of what a tap sees, with the QP analysis definitions.

- Request packets: SEND/WRITE FIRST..ONLY, READ requests (one packet, all the PSNs it
  reserves), atomics, UD SENDs. ``data_packets``: request packets whose PSN was not seen before
  in that direction (24-bit arithmetic); ``retransmitted_packets``: the others. A packet with a
  bad ICRC still counts as seen.
- ``messages``: FIRST/ONLY/READ/atomic/UD packets among the data packets.
- ``data_bytes``: payload of data packets plus READ response payload seen for the first time.
- ``acks``, ``naks_psn_seq_error``, ``rnr_naks``: ACKNOWLEDGE packets with AETH syndrome
  0x00-0x1F, 0x60, 0x20-0x3F; ``read_responses``, ``atomic_acks``, ``cnps`` by opcode;
  ``ecn_ce_packets``: CE-marked packets of the connection, either direction, CNPs excluded.
"""

from __future__ import annotations

from typing import Any

from ibwire.transport import CNP_OPCODE, PSN_MASK, Packet, psn_diff
from ibwire.transport.segment import ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, READ_RESPONSE, packets_for
from ibwire.transport.verbs import request_kinds

COUNTERS = ("data_packets", "retransmitted_packets", "messages", "data_bytes", "acks",
            "naks_psn_seq_error", "rnr_naks", "naks_other", "read_responses", "atomic_acks",
            "cnps", "ecn_ce_packets")


class SeenPsns:
    """Which PSNs of one direction were seen, relative to a start PSN: everything below
    ``high`` except ``holes`` (memory grows with gaps, not with packets)."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.high = 0
        self.holes: set[int] = set()

    def mark(self, psn: int, count: int) -> bool:
        """Mark ``count`` PSNs from ``psn``; True when ``psn`` itself was seen before."""
        first = self.high + psn_diff(psn, (self.start + self.high) & PSN_MASK)
        seen = 0 <= first < self.high and first not in self.holes
        end = first + count
        if first > self.high:
            self.holes.update(range(self.high, first))
        for i in range(max(first, 0), min(end, self.high)):
            self.holes.discard(i)
        self.high = max(self.high, end)
        return seen


class QpCounts:
    """Counts of one connection at the tap."""

    def __init__(self, start_psn: int, pmtu: int) -> None:
        self.values: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.requests = SeenPsns(start_psn)
        self.responses = SeenPsns(start_psn)
        self.pmtu = pmtu
        self._kinds = request_kinds()

    def see(self, packet: Packet, ce: bool) -> None:
        v = self.values
        op = packet.opcode
        if op == CNP_OPCODE:
            v["cnps"] += 1
            return
        if ce:
            v["ecn_ce_packets"] += 1
        kind = self._kinds.get(op)
        if kind is not None:
            count = 1
            if kind.family == "read" and packet.reth is not None:
                count = packets_for(packet.reth.dmalen, self.pmtu)
            if self.requests.mark(packet.psn, count):
                v["retransmitted_packets"] += 1
            else:
                v["data_packets"] += 1
                v["data_bytes"] += packet.payload_len
                if kind.position in ("first", "only"):
                    v["messages"] += 1
        elif op in READ_RESPONSE:
            v["read_responses"] += 1
            if not self.responses.mark(packet.psn, 1):
                v["data_bytes"] += packet.payload_len
        elif op == ATOMIC_ACKNOWLEDGE:
            v["atomic_acks"] += 1
        elif op == ACKNOWLEDGE and packet.aeth is not None:
            syndrome = packet.aeth.syndrome
            if syndrome >> 5 == 0:
                v["acks"] += 1
            elif syndrome >> 5 == 1:
                v["rnr_naks"] += 1
            elif syndrome == 0x60:
                v["naks_psn_seq_error"] += 1
            else:
                v["naks_other"] += 1

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

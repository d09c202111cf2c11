"""The CM exchange of a scenario's RC/UC/XRC connections: REQ, REP, RTU before the data, DREQ,
DREP after it, as frames with the times the tap sees them.

Connections are set up one after the other (as perftest's RDMA CM mode does), each message
sent :data:`CM_TURNAROUND_NS` after the one it answers arrives; the data starts once the last
RTU is on the wire. Teardown starts when the requester is done (its last frame sent, its last
answer in) and closes the connections one after the other. The CM MADs go on the link as the
data does (same serialisation, delay and tap rules as :mod:`ibwire.gen.run`), are never lost
and are built with :func:`ibwire.build` (they are few). Communication IDs, transaction IDs,
QP1 PSNs, the REQ's Starting PSN (the PSN the requester's QP would receive first) and the
RDMA CM source port come from a generator seeded with the scenario's seed, apart from the
faults' (the fault draws are those of a run without CM).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ibwire.builder import build
from ibwire.transport.cm import (
    MTU_CODES,
    SERVICE_TYPES,
    CmEnd,
    CmSession,
    CmSetup,
    ca_guid,
    report,
)

if TYPE_CHECKING:
    from ibwire.gen.run import Generation

#: Time a CM agent takes to answer a message (a model constant: real agents take longer).
CM_TURNAROUND_NS = 2_000
_MAPPED = "::ffff:"


class CmExchange:
    """The CM messages of one generation; :meth:`setup` and :meth:`teardown` give frames as
    ``(tap time, frame, qp)``; :attr:`counts` the CM MADs the tap saw per QP."""

    def __init__(self, generation: Generation) -> None:
        s = generation.scenario
        self.generation = generation
        self.setups: dict[int, CmSetup] = {}
        self.counts: dict[int, int] = {}
        if not s.cm:
            return
        rng = random.Random(f"ibwire.gen.cm/{s.seed}")
        self.qp1_psn = {True: rng.getrandbits(24), False: rng.getrandbits(24)}
        encap = s.encapsulation
        ipv = 6 if encap == "rocev2_ipv6" else 4
        ib = encap.startswith("ib_")
        for k, spec in enumerate(s.qps):
            if spec.transport not in SERVICE_TYPES:
                continue
            requester_qpn, responder_qpn = s.qpns(k)
            ends = []
            for ep, qpn, psn in ((s.requester, requester_qpn, rng.getrandbits(24)),
                                 (s.responder, responder_qpn, s.start_psn(k))):
                gid = _MAPPED + ep.ip if encap == "rocev2_ipv4" else ep.ip6
                ends.append(CmEnd(gid=gid, lid=ep.lid if ib else 0xFFFF,
                                  ip=ep.ip if ipv == 4 else ep.ip6, qpn=qpn,
                                  comm_id=rng.getrandbits(32), guid=ca_guid(ep.mac),
                                  start_psn=psn))
            self.setups[k] = CmSetup(
                ends[0], ends[1], transport=spec.transport, pmtu=spec.mtu, pkey=s.pkey,
                source_port=rng.randrange(32768, 61000), ip_version=ipv, tclass=s.dscp << 2,
                hop_limit=0 if encap == "ib_local" else 64,
                subnet_local=int(encap == "ib_local"), ack_timeout=spec.timeout,
                retry_cnt=spec.retry_cnt, rnr_retry=spec.rnr_retry,
                setup_tid=rng.getrandbits(64), teardown_tid=rng.getrandbits(64))
            self.counts[k] = 0
        assert all(spec.mtu in MTU_CODES for spec in s.qps)

    def _frame(self, active: bool, keys: dict[str, Any]) -> bytes:
        framer = self.generation.framer
        base = framer._base["fwd" if active else "rev"]
        fields = {**base, **keys, "bth.psn": self.qp1_psn[active]}
        self.qp1_psn[active] = (self.qp1_psn[active] + 1) & 0xFFFFFF
        if framer.encapsulation.startswith("rocev2"):
            fields["udp.srcport"] = 0xC000
        if framer.encapsulation == "rocev2_ipv4":
            fields["ip.id"] = self.generation.next_ip_id("fwd" if active else "rev")
        return build(framer.encapsulation, fields)

    def _chain(self, start: int, which: tuple[str, ...]
               ) -> tuple[list[tuple[int, bytes, int]], int]:
        """Messages ``which`` of every connection, one after the other from ``start``:
        (tap time, frame, qp) in tap order, and when the requester's port is free after the
        last message it sent."""
        g = self.generation
        delay, tap = g.scenario.link.delay_ns, g.scenario.tap
        out: list[tuple[int, bytes, int]] = []
        t = free = start
        for k, setup in self.setups.items():
            for name, active, keys in setup.messages():
                if name not in which:
                    continue
                frame = self._frame(active, keys)
                end = t + g._wire_ns(frame)
                arrive = end + delay
                near, far = ("requester", "responder") if active else ("responder", "requester")
                seen = {near: t, "switch": t + delay // 2, far: arrive}[tap]
                out.append((seen, frame, k))
                self.counts[k] += 1
                if active:
                    free = end
                t = arrive + CM_TURNAROUND_NS
        out.sort(key=lambda x: x[0])
        return out, free

    def setup(self) -> tuple[list[tuple[int, bytes, int]], int]:
        """REQ, REP, RTU of every connection, and the time the data may start (the last RTU
        is on the wire), from the scenario's start time."""
        return self._chain(self.generation.scenario.start_ns, ("REQ", "REP", "RTU"))

    def teardown(self, done: int) -> list[tuple[int, bytes, int]]:
        """DREQ, DREP of every connection, from ``done`` (the requester's data phase over)."""
        return self._chain(done, ("DREQ", "DREP"))[0]

    def manifest(self, qps: list[dict[str, Any]]) -> None:
        """Set ``cm_packets`` and ``cm`` of the manifest's queue pairs."""
        for k, entry in enumerate(qps):
            entry["cm_packets"] = self.counts.get(k, 0)
            setup = self.setups.get(k)
            if setup is None:
                entry["cm"] = None
                continue
            session = CmSession(active={"address": "requester", "comm_id": setup.active.comm_id},
                                passive={"address": "responder",
                                         "comm_id": setup.passive.comm_id},
                                service_id=setup.service_id, transport=setup.transport,
                                state="disconnected")
            entry["cm"] = report(session, "requester")

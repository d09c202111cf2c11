"""What to generate: two endpoints, their queue pairs and operations, faults, the link.

A :class:`Scenario` is plain data; :func:`ibwire.gen.generate` runs it through the transport
model. Faults name a queue pair by its position (0 = the first created) and a PSN by its
offset from that QP's starting PSN, or ask for a seeded fraction of packets (``rate``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ibwire.errors import IbwireError
from ibwire.transport import PSN_MASK, RequesterConfig, WorkRequest, psn_add
from ibwire.transport.cnp import SCOPES
from ibwire.transport.segment import Segmenter
from ibwire.transport.verbs import RELIABLE, check_pmtu

ENCAPSULATIONS = ("rocev2_ipv4", "rocev2_ipv6", "rocev1", "ib_local", "ib_global")
TAPS = ("requester", "responder", "switch")
#: drop: a request packet lost in the network; corrupt: a request packet with a bad ICRC;
#: lose_ack: an ACK, NAK, READ response or atomic ACK lost; rnr: the responder answers the
#: request with an RNR NAK (``timer``); ecn: a request packet marked CE on its way;
#: ecn_resp: a READ response marked CE on its way (the requester sends the CNP).
FAULT_KINDS = ("drop", "corrupt", "lose_ack", "rnr", "ecn", "ecn_resp")
#: How a stack marks its RoCEv2 packets (IP DSCP, ECN codepoint of unmarked packets, DSCP of
#: CNPs). ``dcqcn`` (the default): a RoCE fabric with congestion control, as RoCE NICs are
#: set up for it (ECT(0) so that switches can mark CE instead of dropping, DSCP 26 for the
#: RoCE class, 48 for CNPs). ``rxe``: Linux soft-RoCE, which sets neither (Not-ECT, DSCP 0;
#: seen on the rig) and has no congestion control: nothing can be marked.
PROFILES = {"dcqcn": {"dscp": 26, "ecn": 2, "cnp_dscp": 48},
            "rxe": {"dscp": 0, "ecn": 0, "cnp_dscp": 48}}


class ScenarioError(IbwireError):
    """Settings that cannot be generated (a fault past the last PSN, an unknown tap ...)."""


@dataclass(frozen=True)
class Endpoint:
    """One host: MAC, IP (v4 or v6 text), GID (IPv6 text, for GRH encapsulations), LID."""

    mac: str
    ip: str
    ip6: str
    lid: int


REQUESTER = Endpoint("02:00:00:00:00:01", "192.0.2.1", "fe80::1", 1)
RESPONDER = Endpoint("02:00:00:00:00:02", "192.0.2.2", "fe80::2", 2)


@dataclass(frozen=True)
class QpSpec:
    """One connection: ``iters`` messages of ``verb`` and ``size`` bytes, requester to
    responder. QPNs and (XRC) the XRC SRQ number the requests name default from the QP's
    position when None, the starting PSN from the seed (:meth:`Scenario.start_psn`)."""

    verb: str = "write"
    size: int = 1024
    iters: int = 1
    transport: str = "RC"
    mtu: int = 1024
    start_psn: int | None = None
    requester_qpn: int | None = None
    responder_qpn: int | None = None
    ack_every: int | None = None
    timeout: int = 14
    retry_cnt: int = 7
    rnr_retry: int = 7
    window: int | None = None
    q_key: int = 0x11111111
    xrc_srq: int | None = None


@dataclass(frozen=True)
class Fault:
    """``kind`` at QP ``qp`` PSN offset ``psn``, or on a ``rate`` fraction of the packets it
    applies to (seeded). ``timer`` is the RNR timer code of an ``rnr`` fault."""

    kind: str
    qp: int | None = None
    psn: int | None = None
    rate: float | None = None
    timer: int = 1


@dataclass(frozen=True)
class Link:
    """The wire between the endpoints: ``gbps`` for serialisation, ``delay_ns`` one way."""

    gbps: float = 100.0
    delay_ns: int = 1_000


@dataclass(frozen=True)
class Scenario:
    qps: tuple[QpSpec, ...] = (QpSpec(),)
    faults: tuple[Fault, ...] = ()
    encapsulation: str = "rocev2_ipv4"
    link: Link = Link()
    tap: str = "requester"
    seed: int = 0
    requester: Endpoint = REQUESTER
    responder: Endpoint = RESPONDER
    dscp: int = 26
    ecn: int = 2                  # ECT(0) on RoCEv2 packets; CE (3) is what marking sets
    cnp_interval_us: float = 4.0
    cnp_scope: str = "qp"
    cnp_dscp: int = 48
    pkey: int = 0xFFFF
    #: 802.1Q tags (VLAN ID, priority) on every Ethernet frame, outermost first (two: QinQ).
    vlans: tuple[tuple[int, int], ...] = ()
    #: RC/UC/XRC connections set up and torn down by the CM (REQ, REP, RTU ... DREQ, DREP on
    #: QP1, :mod:`ibwire.gen.cm`); False: out of band (``ibwire gen --no-cm``).
    cm: bool = False
    #: When the conversation starts (ns since the Unix epoch): the first frame's timestamp.
    #: 0 (1970-01-01) keeps the library's output the same from run to run; ``ibwire gen``
    #: starts at the current time unless ``--start-time`` pins it.
    start_ns: int = 0

    def start_psn(self, k: int) -> int:
        """QP ``k``'s first PSN: ``QpSpec.start_psn``, else 24 random bits drawn from the
        seed, as real stacks choose it (perftest: ``lrand48() & 0xffffff``; rdma_cm,
        Linux ``cma.c``: ``get_random_u32() & 0xffffff``)."""
        spec = self.qps[k]
        if spec.start_psn is not None:
            return spec.start_psn
        return random.Random(f"ibwire gen {self.seed} start psn {k}").getrandbits(24)

    def ip_id_start(self, direction: str) -> int:
        """The first IPv4 ID the requester's host (``fwd``) or the responder's (``rev``)
        sends: 16 random bits from the seed, as Linux starts each destination's counter
        (``__ip_select_ident``, net/ipv4/route.c); every packet it sends takes the next."""
        return random.Random(f"ibwire gen {self.seed} ip id {direction}").getrandbits(16)

    def udp_sport(self, k: int) -> int:
        """The UDP source port of QP ``k``'s packets, both ways: Linux's
        ``rdma_get_udp_sport()`` (include/rdma/ib_verbs.h), which rxe uses when the QP is
        connected (``rxe_qp.c``): the flow label of the two QPNs
        (``rdma_calc_flow_label``) folded into 0xC000-0xFFFF."""
        local, remote = self.qpns(k)
        v = local * remote
        v ^= v >> 20
        v ^= v >> 40
        label = v & 0xFFFFF
        return 0xC000 | (label & 0x3FFF) ^ (label >> 14)

    def qpns(self, k: int) -> tuple[int, int]:
        spec = self.qps[k]
        return (spec.requester_qpn if spec.requester_qpn is not None else 0x100 + 2 * k,
                spec.responder_qpn if spec.responder_qpn is not None else 0x101 + 2 * k)

    def xrc_srq(self, k: int) -> int:
        """The XRC SRQ number QP ``k``'s XRC requests name (XRCETH): 0x200 + k by default."""
        spec = self.qps[k]
        return spec.xrc_srq if spec.xrc_srq is not None else (0x200 + k) & PSN_MASK

    def work(self, k: int) -> Iterator[WorkRequest]:
        """QP ``k``'s work requests, made one at a time (a long run holds only those posted)."""
        spec = self.qps[k]
        size = 8 if spec.verb in ("fetch_add", "cmp_swap") else spec.size
        _, responder_qpn = self.qpns(k)
        for i in range(spec.iters):
            yield WorkRequest(spec.verb, size, wr_id=i, remote_va=0x10000 + i * max(size, 8),
                              rkey=0x1000 + k, imm=i, invalidate_rkey=0x2000 + k, swap_add=1,
                              dest_qp=responder_qpn, q_key=spec.q_key)

    def psns_per_message(self, k: int) -> int:
        """PSNs one message of QP ``k`` takes (every message of a QP is alike)."""
        config = self.requester_config(k)
        segmenter = Segmenter(config.transport, config.pmtu, config.dest_qp, config.src_qp,
                              config.q_key, config.ack_every)
        return segmenter.psn_count(next(self.work(k)))

    def psn_count(self, k: int) -> int:
        """PSNs QP ``k`` uses in all (its messages, first transmissions)."""
        spec = self.qps[k]
        return spec.iters * self.psns_per_message(k) if spec.iters else 0

    def requester_config(self, k: int) -> RequesterConfig:
        spec = self.qps[k]
        requester_qpn, responder_qpn = self.qpns(k)
        return RequesterConfig(
            transport=spec.transport, pmtu=spec.mtu, start_psn=self.start_psn(k),
            dest_qp=responder_qpn, src_qp=requester_qpn, q_key=spec.q_key,
            ack_every=spec.ack_every, timeout=spec.timeout, retry_cnt=spec.retry_cnt,
            rnr_retry=spec.rnr_retry, window=spec.window, xrc_srq=self.xrc_srq(k))

    def _placed(self, fault: Fault) -> Fault:
        """``fault`` naming its queue pair: a PSN without ``qp`` is the only QP's (QP 0);
        with several QPs it names none, which is an error."""
        if fault.rate is not None or fault.qp is not None or fault.psn is None:
            return fault
        if len(self.qps) > 1:
            raise ScenarioError(f"{fault.kind}: psn={fault.psn} names no queue pair of the "
                                f"{len(self.qps)}: add qp=K (0..{len(self.qps) - 1})")
        return replace(fault, qp=0)

    def check(self) -> Scenario:
        """This scenario, or ScenarioError/TransportError saying what cannot be generated.
        The scenario returned names the queue pair of every fault (see :meth:`_placed`)."""
        if self.encapsulation not in ENCAPSULATIONS:
            raise ScenarioError(f"encapsulation {self.encapsulation!r} is not one of "
                                f"{', '.join(ENCAPSULATIONS)}")
        if self.tap not in TAPS:
            raise ScenarioError(f"tap {self.tap!r} is not one of {', '.join(TAPS)}")
        if self.cnp_scope not in SCOPES:
            raise ScenarioError(f"CNP scope {self.cnp_scope!r} is not one of {', '.join(SCOPES)}")
        if not self.qps:
            raise ScenarioError("a scenario needs at least one queue pair")
        for name, value, top in (("dscp", self.dscp, 63), ("cnp_dscp", self.cnp_dscp, 63),
                                 ("ecn", self.ecn, 3), ("pkey", self.pkey, 0xFFFF)):
            if not 0 <= value <= top:
                raise ScenarioError(f"{name} must be 0..{top}, not {value}")
        if self.ecn == 3:
            raise ScenarioError("ecn 3 is CE, which only marking sets: use the ecn fault")
        marks = sorted({f.kind for f in self.faults if f.kind in ("ecn", "ecn_resp")})
        if self.ecn == 0 and marks and self.encapsulation.startswith("rocev2"):
            raise ScenarioError(
                f"{' and '.join(marks)}: packets sent Not-ECT (ecn 0, as the rxe profile "
                f"sends them) are never marked CE: a router drops them instead (RFC 3168 "
                f"section 5); send them ECN-capable (--ecn 2, the dcqcn profile) or use drop")
        if self.vlans and self.encapsulation.startswith("ib_"):
            raise ScenarioError(f"VLAN tags are Ethernet's: {self.encapsulation} has none")
        for vid, pcp in self.vlans:
            if not 0 <= vid <= 4095 or not 0 <= pcp <= 7:
                raise ScenarioError(f"VLAN {vid}:{pcp}: the ID must be 0..4095, the priority 0..7")
        if self.start_ns < 0:
            raise ScenarioError(f"the start time must not be before 1970, not {self.start_ns} ns")
        if self.link.gbps <= 0 or self.link.delay_ns < 0:
            raise ScenarioError("the link needs a positive speed and a delay of 0 or more")
        placed = tuple(self._placed(fault) for fault in self.faults)
        if placed != self.faults:
            return replace(self, faults=placed).check()
        psn_counts = []
        for k, spec in enumerate(self.qps):
            check_pmtu(spec.mtu)
            if spec.xrc_srq is not None and spec.transport != "XRC":
                raise ScenarioError(f"QP {k}: an XRC SRQ number is for XRC requests, not "
                                    f"{spec.transport}'s")
            if spec.xrc_srq is not None and not 0 <= spec.xrc_srq <= PSN_MASK:
                raise ScenarioError(f"QP {k}: XRC SRQ number {spec.xrc_srq} is not 24 bits "
                                    f"(0..0xFFFFFF)")
            if spec.iters < 0:
                raise ScenarioError(f"QP {k}: iters must not be negative")
            config = self.requester_config(k)
            if spec.iters:
                next(self.work(k)).checked(config.transport, config.pmtu)
            psn_counts.append(self.psn_count(k))
        for fault in self.faults:
            if fault.kind not in FAULT_KINDS:
                raise ScenarioError(f"fault {fault.kind!r} is not one of {', '.join(FAULT_KINDS)}")
            if fault.kind == "ecn_resp" and not self.encapsulation.startswith("rocev2"):
                raise ScenarioError(f"ecn_resp: ECN marks are RoCEv2's (IP), not "
                                    f"{self.encapsulation}'s")
            if fault.rate is not None:
                if not 0 <= fault.rate <= 1 or fault.qp is not None or fault.psn is not None:
                    raise ScenarioError(f"{fault.kind}: rate must be 0..1 and stand alone")
                if fault.kind == "rnr":
                    raise ScenarioError("rnr faults name a qp and a psn, not a rate")
                continue
            if fault.psn is None:
                raise ScenarioError(f"{fault.kind}: give a rate, or a psn (and qp=K when "
                                    f"there are several queue pairs)")
            if fault.qp is None or not 0 <= fault.qp < len(self.qps):
                raise ScenarioError(f"{fault.kind}: qp must be 0..{len(self.qps) - 1}, "
                                    f"not {fault.qp}")
            if not 0 <= fault.psn < psn_counts[fault.qp]:
                raise ScenarioError(f"{fault.kind}: psn offset {fault.psn} is past QP "
                                    f"{fault.qp}'s last PSN (it uses {psn_counts[fault.qp]})")
            if fault.kind == "rnr" and self.qps[fault.qp].transport not in RELIABLE:
                raise ScenarioError("RNR NAKs exist only on RC and XRC")
            if fault.kind == "lose_ack":
                self._check_answered(fault.qp, fault.psn)
            if fault.kind == "ecn_resp" and self.qps[fault.qp].verb != "read":
                raise ScenarioError(f"ecn_resp marks READ responses: QP {fault.qp} does "
                                    f"{self.qps[fault.qp].verb}, not read")
            step = self.psns_per_message(fault.qp)
            if (fault.kind not in ("lose_ack", "ecn_resp") and self.qps[fault.qp].verb == "read"
                    and fault.psn % step):
                raise ScenarioError(
                    f"{fault.kind}: psn offset {fault.psn} of QP {fault.qp} is reserved by a "
                    f"READ for its responses, no request carries it (READ requests are at "
                    f"offsets that are multiples of {step})")
        return self

    def _check_answered(self, k: int, offset: int) -> None:
        """ScenarioError when no answer of QP ``k`` can carry PSN ``offset``: UC and UD are
        never answered, and a SEND/WRITE packet without AckReq draws no ACK of its own (the
        ACK of a later packet covers it: ``--ack-every`` coalescing). Unless another fault on
        the QP could make a NAK or RNR NAK name it, or a window sets AckReq as it fills."""
        spec = self.qps[k]
        if spec.transport not in RELIABLE:
            raise ScenarioError(f"lose_ack: QP {k} is {spec.transport}, which is never "
                                "acknowledged: there is no answer to lose")
        if spec.verb not in ("send", "send_imm", "send_inv", "write", "write_imm") or (
                spec.window is not None):
            return
        if any(f.kind in ("drop", "corrupt", "rnr") and (f.rate is not None or f.qp == k)
               for f in self.faults):
            return
        config = self.requester_config(k)
        segmenter = Segmenter(config.transport, config.pmtu, config.dest_qp, config.src_qp,
                              config.q_key, config.ack_every)
        wr = next(self.work(k))
        step = segmenter.psn_count(wr)

        def acked(i: int) -> bool:
            return segmenter.request(wr, i % step, psn_add(config.start_psn, i), i).ackreq

        if acked(offset):
            return
        later = next((i for i in range(offset + 1, self.psn_count(k)) if acked(i)), None)
        every = (f" and once every {spec.ack_every} packets (--ack-every)" if spec.ack_every
                 else "")
        raise ScenarioError(
            f"lose_ack: no ACK carries PSN offset {offset} of QP {k}: AckReq is set on the "
            f"last packet of each message{every}, so the ACK of offset {later} covers it "
            f"(coalesced); lose that one, or set --ack-every")


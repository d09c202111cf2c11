"""Connection setup and teardown of RC/UC/XRC queue pairs as the (RDMA) CM does it, as data.

The active side sends a ConnectRequest (REQ), the passive side a ConnectReply (REP), the
active side ReadyToUse (RTU); teardown is a DisconnectRequest (DREQ) answered by a
DisconnectReply (DREP); a ConnectReject (REJ) ends a setup. All are CM MADs (class 0x07,
method Send) on QP1: UD SEND only, DETH Q_Key 0x80010000 and source QPN 1 (IBA Vol. 1
12.6-12.9, 13.5.1; Linux drivers/infiniband/core/cm.c). The RDMA CM (drivers/infiniband/core/
cma.c) puts the port space and port in the REQ's service ID (``rdma_get_service_id``: port
space << 16 | port, IBA Annex A11.2.2) and its IP header (``struct cma_hdr``: version, IP
version, source port, source and destination IP) in the REQ's private data.

Each side's Starting PSN is the PSN its queue pair expects to receive first (Linux
``ib_send_cm_req`` keeps the REQ's as the active side's ``rq_psn``, ``cm_rep_handler`` the
REP's as its ``sq_psn``): the requester's data starts at the REP's Starting PSN.

XRC (an XRC INI QP connecting to an XRC TGT QP) is Transport Service Type 3 with Extended
Transport Type 1 in the REQ; the REQ leaves Responder Resources, Retry Count, RNR Retry Count
and SRQ at 0, and the REP carries the TGT QPN in its Local EE Context Number (Local QPN 0),
SRQ 1, no Initiator Depth nor End-to-End Flow Control (Linux drivers/infiniband/core/cm.c
``cm_format_req``/``cm_format_rep``, cm_msgs.h ``cm_req_set_qp_type``; IBA Vol. 1 12.6.5
and 12.6.8 as Annex A14 amends them for XRC).

:class:`CmSetup` gives the messages of one connection (the generator builds them); a
:class:`CmSessions` reads CM messages back into sessions (the QP analysis pairs directions
with them). Both use the key names of :func:`ibwire.build` and :func:`ibwire.parse`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ibwire.tables import cm_rej_reasons

CM_CLASS = 0x07
#: Attribute IDs (specs/mad_attributes.tsv; Linux cm_msgs.h CM_*_ATTR_ID).
REQ, MRA, REJ, REP, RTU, DREQ, DREP = 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16
#: (record prefix, key of the sender's communication ID, key of the receiver's) by attribute.
COMM_IDS: dict[int, tuple[str, str, str]] = {
    REQ: ("cm.req", "cm.req", ""),
    MRA: ("cm.mra", "cm.mra.localcommid", "cm.mra.remotecommid"),
    REJ: ("cm.rej", "cm.rej.localcommid", "cm.rej.remotecommid"),
    REP: ("cm.rep", "cm.rep", "cm.rep.remotecommid"),
    RTU: ("cm.rtu", "cm.rtu.localcommid", "cm.rtu.remotecommid"),
    DREQ: ("cm.dreq", "cm.dreq.localcommid", "cm.dreq.remotecommid"),
    DREP: ("cm.drsp", "cm.drsp.localcommid", "cm.drsp.remotecommid"),
}
#: RDMA CM port space of RC connections (include/rdma/rdma_cm.h RDMA_PS_TCP).
RDMA_PS_TCP = 0x0106
#: The port perftest listens on by default (perftest's DEF_PORT), 0x4853.
DEFAULT_PORT = 18515
#: Path MTU codes of the REQ's PathPacketPayloadMTU (IBA Vol. 1 12.6.5; ib_verbs.h enum
#: ib_mtu).
MTU_CODES = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}
#: REQ Transport Service Type (IBA 12.6.5 table 106; cm_msgs.h cm_req_set_qp_type): RC 0,
#: UC 1, XRC 3 (with Extended Transport Type 1: EXTENDED_TRANSPORT_TYPES).
SERVICE_TYPES = {"RC": 0, "UC": 1, "XRC": 3}
EXTENDED_TRANSPORT_TYPES = {"XRC": 1}
#: CM response timeout Linux's RDMA CM asks for (cma.c CMA_CM_RESPONSE_TIMEOUT) and its
#: max retries (CMA_MAX_CM_RETRIES).
CM_RESPONSE_TIMEOUT, CM_MAX_RETRIES = 20, 15


def service_id(port: int, port_space: int = RDMA_PS_TCP) -> int:
    """The RDMA CM service ID of ``port`` in ``port_space`` (0x0000000001PPpppp)."""
    return (port_space << 16) | port


def ca_guid(mac: str) -> int:
    """The node GUID a RoCE device derives from its MAC (modified EUI-64: ff:fe in the
    middle, the universal/local bit flipped; Linux addrconf_addr_eui48)."""
    b = bytes.fromhex(mac.replace(":", ""))
    return int.from_bytes(bytes([b[0] ^ 2]) + b[1:3] + b"\xff\xfe" + b[3:], "big")


@dataclass(frozen=True)
class CmEnd:
    """One side of a connection: its GID (IPv6 text), LID, IP, QPN, communication ID, CA
    GUID and the PSN its queue pair expects to receive first."""

    gid: str
    lid: int
    ip: str
    qpn: int
    comm_id: int
    guid: int
    start_psn: int


@dataclass(frozen=True)
class CmSetup:
    """What the CM exchange of one RC/UC/XRC connection carries; :meth:`messages` in order."""

    active: CmEnd
    passive: CmEnd
    transport: str = "RC"
    pmtu: int = 1024
    pkey: int = 0xFFFF
    port: int = DEFAULT_PORT
    source_port: int = 0
    ip_version: int = 4
    tclass: int = 0
    hop_limit: int = 64
    subnet_local: int = 0
    ack_timeout: int = 14
    retry_cnt: int = 7
    rnr_retry: int = 7
    resources: int = 16
    setup_tid: int = 0
    teardown_tid: int = 0

    @property
    def service_id(self) -> int:
        return service_id(self.port)

    def messages(self) -> list[tuple[str, bool, dict[str, Any]]]:
        """(name, sent by the active side, :func:`ibwire.build` keys of the MAD) of REQ,
        REP, RTU, DREQ (active side) and DREP."""
        a, p = self.active, self.passive
        ip = ("cm.req.ip_cm.sip4", "cm.req.ip_cm.dip4") if self.ip_version == 4 else (
            "cm.req.ip_cm.sip6", "cm.req.ip_cm.dip6")
        req = {
            "mad.transactionid": self.setup_tid, "cm.req": a.comm_id,
            "cm.req.serviceid": self.service_id, "cm.req.localcaguid": a.guid,
            "cm.req.localqpn": a.qpn, "cm.req.responderres": self.resources,
            "cm.req.initdepth": self.resources, "cm.req.remoteresptout": CM_RESPONSE_TIMEOUT,
            "cm.req.transpsvctype": SERVICE_TYPES[self.transport],
            "cm.req.e2eflowctrl": 1, "cm.req.startpsn": a.start_psn,
            "cm.req.localresptout": CM_RESPONSE_TIMEOUT, "cm.req.retrcount": self.retry_cnt,
            "cm.req.pkey": self.pkey, "cm.req.pppmtu": MTU_CODES[self.pmtu],
            "cm.req.rnrretrcount": self.rnr_retry, "cm.req.maxcmretr": CM_MAX_RETRIES,
            "cm.req.prim_locallid": a.lid, "cm.req.prim_remotelid": p.lid,
            "cm.req.prim_localgid": a.gid, "cm.req.prim_remotegid": p.gid,
            "cm.req.prim_tfcclass": self.tclass, "cm.req.prim_hoplim": self.hop_limit,
            "cm.req.prim_subnetlocal": self.subnet_local,
            "cm.req.prim_localacktout": self.ack_timeout,
            "cm.req.ip_cm.ipv": self.ip_version, "cm.req.ip_cm.sport": self.source_port,
            ip[0]: a.ip, ip[1]: p.ip,
        }
        rep = {
            "mad.transactionid": self.setup_tid, "cm.rep": p.comm_id,
            "cm.rep.remotecommid": a.comm_id, "cm.rep.localqpn": p.qpn,
            "cm.rep.startpsn": p.start_psn, "cm.rep.respres": self.resources,
            "cm.rep.initdepth": self.resources, "cm.rep.e2eflowctrl": 1,
            "cm.rep.rnrretrcount": self.rnr_retry, "cm.rep.localcaguid": p.guid,
        }
        if self.transport == "XRC":
            # cm.c: an XRC INI sends no responder resources, retry counts or SRQ; an XRC TGT
            # answers with its QPN as the EE context, SRQ 1, no initiator depth or flow control
            req.update({"cm.req.ext_transport": EXTENDED_TRANSPORT_TYPES["XRC"],
                        "cm.req.responderres": 0, "cm.req.retrcount": 0,
                        "cm.req.rnrretrcount": 0})
            rep.update({"cm.rep.localqpn": 0, "cm.rep.localeecn": p.qpn, "cm.rep.srq": 1,
                        "cm.rep.initdepth": 0, "cm.rep.e2eflowctrl": 0})
        rtu = {"mad.transactionid": self.setup_tid, "cm.rtu.localcommid": a.comm_id,
               "cm.rtu.remotecommid": p.comm_id}
        dreq = {"mad.transactionid": self.teardown_tid, "cm.dreq.localcommid": a.comm_id,
                "cm.dreq.remotecommid": p.comm_id, "cm.req.remoteqpneecn": p.qpn}
        drep = {"mad.transactionid": self.teardown_tid, "cm.drsp.localcommid": p.comm_id,
                "cm.drsp.remotecommid": a.comm_id}
        return [("REQ", True, req), ("REP", False, rep), ("RTU", True, rtu),
                ("DREQ", True, dreq), ("DREP", False, drep)]


# --- reading CM messages back -------------------------------------------------------------

@dataclass
class CmSession:
    """One CM connection as a capture shows it. ``active``/``passive`` hold the address
    (any hashable), QPN, communication ID and Starting PSN each side announced (None where
    unseen). ``state``: requested, replied, established, rejected, disconnecting,
    disconnected."""

    active: dict[str, Any] = field(default_factory=dict)
    passive: dict[str, Any] = field(default_factory=dict)
    service_id: int | None = None
    transport: str | None = None
    state: str = "requested"
    reason: str | None = None
    packets: int = 0


STATES_AFTER = {REQ: "requested", REP: "replied", RTU: "established", REJ: "rejected",
                DREP: "disconnected"}


class CmSessions:
    """CM messages in capture order -> sessions, found by (address, communication ID) of
    either side."""

    def __init__(self) -> None:
        self.list: list[CmSession] = []
        self._by_end: dict[tuple[Hashable, int], CmSession] = {}

    def receive(self, src: Hashable, dst: Hashable, attribute: int,
                fields: Mapping[str, Any]) -> CmSession | None:
        """One CM MAD from ``src`` to ``dst``; the session it belongs to (None: not a
        connection message, or a MRA/REJ/RTU/DREQ/DREP of a session never seen)."""
        names = COMM_IDS.get(attribute)
        if names is None:
            return None
        prefix, local_key, remote_key = names
        local = fields.get(local_key)
        remote = fields.get(remote_key) if remote_key else None
        session = self._by_end.get((src, local)) if local is not None else None
        if session is None and remote:
            session = self._by_end.get((dst, remote))
        if attribute == REQ and session is None:
            session = CmSession(service_id=fields.get("cm.req.serviceid"))
            session.transport = {v: k for k, v in SERVICE_TYPES.items()}.get(
                fields.get("cm.req.transpsvctype"), "?")
            session.active = {"address": src, "comm_id": local,
                              "qpn": fields.get("cm.req.localqpn"),
                              "start_psn": fields.get("cm.req.startpsn")}
            session.passive = {"address": dst}
            self.list.append(session)
        if session is None:
            if attribute not in (DREQ, DREP):
                return None
            # a capture that starts after the setup: the teardown still names the session
            session = CmSession(state="established")
            session.active = {"address": src, "comm_id": local}
            session.passive = {"address": dst, "comm_id": remote}
            if attribute == DREQ:
                session.passive["qpn"] = fields.get("cm.req.remoteqpneecn")
            self.list.append(session)
        session.packets += 1
        if attribute != REQ and not any(end.get("comm_id") == local and end.get("address") == src
                                        for end in (session.active, session.passive)):
            # the sender's ID, first seen here (a REJ or MRA of the REQ)
            for end in (session.passive, session.active):
                if end.get("comm_id") is None and end.get("address") == src:
                    end["comm_id"] = local
                    break
        self._by_end[(src, local)] = session
        if remote:
            self._by_end[(dst, remote)] = session
        if attribute == REP:
            # an XRC TGT's QPN is in the Local EE Context Number (cm.c cm_format_rep_event)
            qpn_key = "cm.rep.localeecn" if session.transport == "XRC" else "cm.rep.localqpn"
            session.passive.update({"address": src, "comm_id": local,
                                    "qpn": fields.get(qpn_key),
                                    "start_psn": fields.get("cm.rep.startpsn")})
        elif attribute == REJ:
            code = fields.get("cm.rej.reason")
            session.reason = cm_rej_reasons().get(code, f"reason {code}")
        if attribute in STATES_AFTER:
            if session.state not in ("rejected", "disconnected") or attribute == REJ:
                session.state = STATES_AFTER[attribute]
        elif attribute == DREQ and session.state != "disconnected":
            session.state = "disconnecting"
        return session


def report(session: CmSession, requester: Hashable) -> dict[str, Any]:
    """The ``cm`` object of a connection whose requester is at ``requester``: the service
    ID, the communication IDs of the requester's side (local) and the responder's (remote),
    the state and, when rejected, the REJ reason name."""
    mine, theirs = ((session.active, session.passive)
                    if session.active.get("address") == requester
                    else (session.passive, session.active))
    out = {"service_id": session.service_id, "local_comm_id": mine.get("comm_id"),
           "remote_comm_id": theirs.get("comm_id"), "state": session.state}
    if session.reason is not None:
        out["reason"] = session.reason
    return out

"""Notification-point CNP pacing (RoCEv2 Annex A17 / DCQCN).

A host that receives a RoCEv2 packet marked ECN CE answers with a Congestion Notification
Packet (BTH opcode 0x81) unless it sent one within the minimum interval for the same pacing
scope (``min_time_between_cnps`` under ``/sys/class/net/<if>/ecn/roce_np/`` on NVIDIA NICs,
4 us in public mlxconfig dumps; CNP DSCP 48 by default). NICs pace per QP, per IP pair, per
destination IP or per port (Lumina, SIGCOMM'23, ``analyzer/checker/cnp_check.py``). A CNP
is due when no CNP of the scope was sent before, or the last one is at least the interval
old (Lumina's checker uses "more than"; the two differ only at exactly the interval).

Scope keys, for a CE-marked packet from ``src`` to ``dst`` for QP ``dest_qp`` (the CNP goes
back to ``src``): ``qp`` (src, dst, dest_qp), ``ip-pair`` (src, dst), ``dest-ip`` (src: the
CNP's destination), ``port`` (one key for the whole port).
"""

from __future__ import annotations

from collections.abc import Hashable

from ibwire.tables import opcodes_by_name
from ibwire.transport.packets import Packet

SCOPES = ("qp", "ip-pair", "dest-ip", "port")
CNP_OPCODE = opcodes_by_name()["CNP"].value
#: DSCP NVIDIA NICs give CNPs by default (mlxconfig CNP_DSCP).
CNP_DSCP = 48


def scope_key(scope: str, src: Hashable, dst: Hashable, dest_qp: int) -> Hashable:
    """The pacing key a CE-marked packet from ``src`` to ``dst`` for ``dest_qp`` falls in."""
    if scope == "qp":
        return (src, dst, dest_qp)
    if scope == "ip-pair":
        return (src, dst)
    if scope == "dest-ip":
        return src
    if scope == "port":
        return None
    raise ValueError(f"CNP pacing scope {scope!r} is not one of {', '.join(SCOPES)}")


class CnpPacer:
    """Decides, per CE-marked packet, whether the notification point sends a CNP, and when
    it may leave: a CNP decided on time can still wait for its port behind a long frame, so
    that the next one, decided an interval later but sent at once, would follow it closer
    than the interval on the wire; :meth:`send_at` holds it until the interval has passed
    since the last one of its key left (:meth:`sent`)."""

    def __init__(self, interval_ns: int, scope: str = "qp") -> None:
        if interval_ns < 0:
            raise ValueError(f"CNP interval must not be negative, not {interval_ns}")
        scope_key(scope, None, None, 0)
        self.interval_ns = interval_ns
        self.scope = scope
        self._last: dict[Hashable, int] = {}
        self._left: dict[Hashable, int] = {}

    def on_marked(self, src: Hashable, dst: Hashable, dest_qp: int, now_ns: int
                  ) -> Hashable | None:
        """A CE-marked packet arrived at ``now_ns``: the scope key of the CNP to send for it,
        or None when none is due (wrap a key that may be None, as ``port``'s, to test it)."""
        key = scope_key(self.scope, src, dst, dest_qp)
        last = self._last.get(key)
        if last is not None and now_ns - last < self.interval_ns:
            return None
        self._last[key] = now_ns
        return (key,)

    def send_at(self, due: Hashable) -> int:
        """The earliest time (ns) the CNP ``on_marked`` returned ``due`` for may leave."""
        left = self._left.get(due)
        return 0 if left is None else left + self.interval_ns

    def sent(self, due: Hashable, now_ns: int) -> None:
        """The CNP for ``due`` left at ``now_ns``."""
        self._left[due] = now_ns


def cnp_packet(dest_qp: int) -> Packet:
    """A CNP to QP ``dest_qp`` (the QP that sent the marked packet): BECN set, PSN 0, as the
    ConnectX-4 Lx CNP in scapy's ``test/contrib/roce.uts`` has them."""
    return Packet(CNP_OPCODE, 0, dest_qp, becn=True)

"""Where the InfiniBand layers sit in scapy: bindings, the UDP port 4791 rule, link types.

* Ethernet, 802.1Q, 802.1ad and Linux cooked capture (SLL) type 0x8915 -> :class:`GRH`
  (RoCEv1); GRH NxtHdr 0x1B -> :class:`BTH`; LRH LNH 3 -> GRH, LNH 2 -> BTH.
* UDP destination port 4791 -> BTH whatever the source port. scapy's UDP picks the first
  matching entry of ``UDP.payload_guess``, where DNS (sport 53), TFTP and others were bound
  before us, so an ACK from port 53 would become DNS. :func:`install` therefore wraps
  ``UDP.guess_payload_class``: destination port 4791 is decided before any binding is looked
  at, so layers loaded later cannot take it back either.
* BTH -> extended headers: by the opcode's chain from specs/opcodes.tsv (``layers.CHAINS``);
  only top-down defaults are bound here (``BTH()/AETH()`` gets RC_ACKNOWLEDGE,
  ``BTH()/CNPPadding()`` gets CNP, as scapy.contrib.roce does).
* ``UDP()/BTH()`` defaults to source port 49152 and UDP checksum 0, as rxe and ConnectX NICs
  send RoCEv2 (every RoCEv2 frame of the shared captures has checksum 0) and as
  :func:`ibwire.build` does; ``UDP(chksum=None)`` has scapy compute it.
* ``conf.l2types``: LINKTYPE_INFINIBAND (247) -> :class:`LRH`, so ``rdpcap`` starts there.
* The layers bound to ours copy and clone a chain that carries ours as cheaply as ours do
  (:mod:`ibwire.scapy.carriers`); other packets are made by scapy's code as before.

With scapy.contrib.roce loaded too, in either order: both sets of classes work for building;
dissection gives ibwire's layers, because our bottom-up bindings are put first and the UDP
rule runs before contrib's ``bind_layers(UDP, BTH, dport=4791)``. Both modules define classes
called BTH, GRH, AETH and CNPPadding: in a namespace that star-imports both, the later import
wins the names.
"""

from __future__ import annotations

from typing import Any

from scapy.config import conf
from scapy.layers.inet import UDP
from scapy.layers.l2 import CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, bind_top_down

from ibwire.builder import DEFAULTS
from ibwire.scapy import carriers
from ibwire.scapy.layers import AETH, BTH, GRH, GRH_NXTHDR, LNH_GLOBAL, LNH_LOCAL, LRH, CNPPadding
from ibwire.tables import constants, link_types, opcodes_by_name

_C = constants()
ROCE_V1_ETHERTYPE = _C["ROCE_V1_ETHERTYPE"]
ROCE_V2_PORT = _C["ROCE_V2_UDP_PORT"]
#: UDP source port of built RoCEv2 packets when none is given (first port of the range
#: RoCEv2 uses for flow entropy; ibwire.build's default too). The UDP checksum defaults to 0.
DEFAULT_SOURCE_PORT = DEFAULTS["udp.srcport"]
LINKTYPE_INFINIBAND = next(value for (family, value), (name, _) in link_types().items()
                           if family == "pcap" and name == "INFINIBAND")


def bind_first(lower: type[Packet], upper: type[Packet], **fields: Any) -> None:
    """``bind_layers``, with the dissection entry put before every earlier binding of ``lower``."""
    bind_top_down(lower, upper, **fields)
    others = [(fval, cls) for fval, cls in lower.payload_guess
              if not (cls is upper and fval == fields)]
    lower.payload_guess = [(dict(fields), upper), *others]


def _install_udp_rule() -> None:
    current = UDP.guess_payload_class
    if getattr(current, "ibwire_roce_v2", False):
        return

    def guess_payload_class(self: UDP, payload: bytes) -> type[Packet]:
        dport = self.fields.get("dport")  # set when dissected
        if dport == ROCE_V2_PORT or (dport is None and self.dport == ROCE_V2_PORT):
            return BTH
        return current(self, payload)

    guess_payload_class.ibwire_roce_v2 = True  # type: ignore[attr-defined]
    guess_payload_class.__doc__ = "RoCEv2 first (ibwire.scapy), then scapy's UDP bindings."
    UDP.guess_payload_class = guess_payload_class  # type: ignore[method-assign]


def install() -> None:
    """Bind every layer (idempotent; done on import of :mod:`ibwire.scapy`)."""
    for lower in (Ether, Dot1Q, Dot1AD):
        bind_first(lower, GRH, type=ROCE_V1_ETHERTYPE)
    bind_first(CookedLinux, GRH, proto=ROCE_V1_ETHERTYPE)
    bind_first(GRH, BTH, nxthdr=GRH_NXTHDR)
    bind_first(LRH, GRH, lnh=LNH_GLOBAL)
    bind_first(LRH, BTH, lnh=LNH_LOCAL)
    bind_first(UDP, BTH, dport=ROCE_V2_PORT)
    bind_top_down(UDP, BTH, sport=DEFAULT_SOURCE_PORT, dport=ROCE_V2_PORT, chksum=0)
    _install_udp_rule()
    ops = opcodes_by_name()
    bind_top_down(BTH, AETH, opcode=ops["RC_ACKNOWLEDGE"].value)
    bind_top_down(BTH, CNPPadding, opcode=ops["CNP"].value)
    conf.l2types.register(LINKTYPE_INFINIBAND, LRH)
    carriers.install()

"""Where the InfiniBand layers sit in scapy: bindings, the UDP port 4791 entry, link types.

Importing :mod:`ibwire.scapy` calls :func:`install`, which does only what scapy's own contrib
modules do: ``bind_top_down`` on ibwire's classes, entries in the ``payload_guess`` lists of
the layers below them, and link types in ``conf.l2types`` that scapy has no entry for. No
method of any scapy class is replaced (the faster copies and builds of scapy's Ethernet, IP
and UDP layers are an opt-in: :func:`ibwire.scapy.fast_paths`).

* Ethernet, 802.1Q, 802.1ad and Linux cooked capture (SLL) type 0x8915 -> :class:`GRH`
  (RoCEv1); GRH NxtHdr 0x1B -> :class:`BTH`; LRH LNH 3 -> GRH, LNH 2 -> BTH.
* UDP destination port 4791 (IANA "roce") -> BTH, whatever the source port. scapy's
  ``Packet.guess_payload_class`` takes the first matching entry of ``UDP.payload_guess``,
  where DNS (sport 53), TFTP and others were bound before us, and where ``bind_layers``
  appends; so :func:`bind_first` puts our entry *first* in the list: an ACK from port 53
  dissects as BTH, not DNS. A module bound to UDP later with ``bind_layers`` (DNS,
  ``load_contrib("roce")``, ...) appends after it and cannot take port 4791 back; one that
  puts its own entries first, or ``split_layers(UDP, BTH, dport=4791)``, can: calling
  :func:`install` again puts ours first again.
* BTH -> extended headers: by the opcode's chain from specs/opcodes.tsv (``layers.CHAINS``);
  only top-down defaults are bound here (``BTH()/AETH()`` gets RC_ACKNOWLEDGE,
  ``BTH()/CNPPadding()`` gets CNP, as scapy.contrib.roce does).
* ``UDP()/BTH()`` defaults to source port 49152 and UDP checksum 0, as rxe and ConnectX NICs
  send RoCEv2 (every RoCEv2 frame of the shared captures has checksum 0) and as
  :func:`ibwire.build` does; ``UDP(chksum=None)`` has scapy compute it.
* ``conf.l2types``: LINKTYPE_INFINIBAND (247) -> :class:`LRH`, so ``rdpcap`` starts there,
  registered only if scapy has no layer for 247 (scapy 2.8 has none); writing an LRH
  (``wrpcap``) uses 247 either way.

With scapy.contrib.roce loaded too, in either order: both sets of classes work for building;
dissection gives ibwire's layers, because our bottom-up entries come first in every list
contrib's ``bind_layers`` appends to (Ether, UDP). Both modules define classes called BTH,
GRH, AETH and CNPPadding: in a namespace that star-imports both, the later import wins the
names.
"""

from __future__ import annotations

from typing import Any

from scapy.config import conf
from scapy.layers.inet import UDP
from scapy.layers.l2 import CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, bind_top_down

from ibwire.builder import DEFAULTS
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
    """``bind_layers``, with the dissection entry put before every earlier binding of ``lower``.

    The list is replaced by a new one, as scapy's ``bind_bottom_up`` does; the entries of
    other layers keep their order (a previous entry of ours for the same fields is dropped).
    """
    bind_top_down(lower, upper, **fields)
    others = [entry for entry in lower.payload_guess  # the same entries, in the same order
              if not (entry[1] is upper and entry[0] == fields)]
    lower.payload_guess = [(dict(fields), upper), *others]


def register_link_type(number: int, layer: type[Packet]) -> bool:
    """Register ``layer`` as link type ``number`` for reading unless scapy has a layer for it
    already (True if registered), and ``number`` as the link type written for ``layer``."""
    conf.l2types.register_layer2num(number, layer)
    if number in conf.l2types.num2layer:
        return False
    conf.l2types.register_num2layer(number, layer)
    return True


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
    ops = opcodes_by_name()
    bind_top_down(BTH, AETH, opcode=ops["RC_ACKNOWLEDGE"].value)
    bind_top_down(BTH, CNPPadding, opcode=ops["CNP"].value)
    register_link_type(LINKTYPE_INFINIBAND, LRH)

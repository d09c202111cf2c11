"""Every header ibwire knows, declared once with Construct (see :mod:`ibwire.headers.layout`).

The names below are loaded on first use, so that a module of this package that needs no
declaration (:mod:`ibwire.headers.fields`, :mod:`ibwire.headers.aeth`) loads without Construct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ibwire._lazy import lazy_exports

if TYPE_CHECKING:
    from ibwire.headers.encap import ETHERNET, IPV4, IPV6, UDP, VLAN
    from ibwire.headers.layout import Field, Header
    from ibwire.headers.link import GRH, ICRC, LRH, VCRC
    from ibwire.headers.mad import MAD, RMPP
    from ibwire.headers.transport import (
        AETH,
        ATOMIC_ACK_ETH,
        ATOMIC_ETH,
        BTH,
        CNP_PAD,
        DETH,
        EXTENDED,
        FETH,
        IETH,
        IMM_DT,
        RDETH,
        RETH,
        XRCETH,
    )

    #: Every fixed-size header, by key prefix.
    ALL: dict[str, Header]

_WHERE = {
    **dict.fromkeys(("ETHERNET", "IPV4", "IPV6", "UDP", "VLAN"), "ibwire.headers.encap"),
    **dict.fromkeys(("GRH", "ICRC", "LRH", "VCRC"), "ibwire.headers.link"),
    **dict.fromkeys(("MAD", "RMPP"), "ibwire.headers.mad"),
    **dict.fromkeys(("AETH", "ATOMIC_ACK_ETH", "ATOMIC_ETH", "BTH", "CNP_PAD", "DETH",
                     "EXTENDED", "FETH", "IETH", "IMM_DT", "RDETH", "RETH", "XRCETH"),
                    "ibwire.headers.transport"),
    "Field": "ibwire.headers.fields",
    "Header": "ibwire.headers.layout",
}
_exported = lazy_exports(__name__, globals(), _WHERE)


def __getattr__(name: str) -> Any:
    if name != "ALL":
        return _exported(name)
    every = {h.name: h for h in (*(_exported(n) for n in ("ETHERNET", "VLAN", "IPV4", "IPV6",
                                                          "UDP", "LRH", "GRH", "BTH")),
                                 *_exported("EXTENDED").values(), _exported("MAD"),
                                 _exported("RMPP"))}
    globals()["ALL"] = every
    return every


__all__ = [
    "AETH", "ALL", "ATOMIC_ACK_ETH", "ATOMIC_ETH", "BTH", "CNP_PAD", "DETH", "ETHERNET",
    "EXTENDED", "FETH", "GRH", "ICRC", "IETH", "IMM_DT", "IPV4", "IPV6", "LRH", "MAD",
    "RDETH", "RETH", "RMPP", "UDP", "VCRC", "VLAN", "XRCETH", "Field", "Header",
]

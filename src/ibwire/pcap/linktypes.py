"""Link types: where, inside a stored record, the frame for ibwire's dissector starts.

Driven by ``specs/link_types.tsv``: family ``pcap`` maps a LINKTYPE_ to where its records start
(``ethernet``, ``ip``, ``infiniband`` directly; ``sll``, ``sll2``, ``erf`` through a header);
family ``arphrd`` lists the ARPHRD_ types whose Linux SLL/SLL2 protocol field is an EtherType,
and family ``ethertype`` the EtherTypes ibwire dissects (IPv4/IPv6 -> ``ip``, RoCEv1 -> ``grh``).
The code that finds the frame behind such a header is :mod:`ibwire.pcap.locators`; this module
only answers from the table, so ``ibwire check`` can ask it without loading the ERF reader.
"""

from __future__ import annotations

from functools import cache

from ibwire.pcap.records import LINK_CODES, LINK_OTHER
from ibwire.tables import link_types

HEADER_KINDS = ("erf", "sll", "sll2")
"""Where records of a link type start with a link-layer header before the frame."""


def header_kind(linktype: int) -> str | None:
    """'erf', 'sll' or 'sll2' when records of ``linktype`` start with such a header."""
    entry = link_types().get(("pcap", linktype))
    return entry[1] if entry and entry[1] in HEADER_KINDS else None


@cache
def direct_link_codes() -> dict[int, int]:
    """LINKTYPE_ -> link code, for link types whose records are the frame itself."""
    return {value: LINK_CODES[starts_at] for (family, value), (_name, starts_at)
            in link_types().items() if family == "pcap" and starts_at in LINK_CODES}


@cache
def sll_link_codes() -> dict[tuple[int, int], int]:
    """(ARPHRD type, protocol) -> link code of what follows a Linux cooked header, for the
    pairs ibwire dissects (any other pair: other traffic)."""
    rows = link_types()
    arphrds = [value for (family, value), (_n, starts) in rows.items()
               if family == "arphrd" and starts == "protocol"]
    ethertypes = {value: LINK_CODES.get(starts, LINK_OTHER)
                  for (family, value), (_n, starts) in rows.items() if family == "ethertype"}
    return {(arphrd, proto): code for arphrd in arphrds for proto, code in ethertypes.items()}


def sll_link_code(arphrd: int, protocol: int) -> int:
    """Link code of the payload of a Linux cooked header."""
    return sll_link_codes().get((arphrd, protocol), LINK_OTHER)


def linktype_name(linktype: int) -> str:
    entry = link_types().get(("pcap", linktype))
    return f"LINKTYPE_{entry[0]}" if entry else f"linktype {linktype}"

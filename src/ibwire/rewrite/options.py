"""What ``ibwire rewrite`` changes: its options, parsed from tcprewrite's spelling.

The IP and port options mean what they mean to tcprewrite 4.4 (``src/tcpedit/tcpedit_opts.def``
of appneta/tcpreplay): an address inside the first CIDR of a pair is moved into the second,
keeping the bits that the second prefix leaves free (``10.1.2.3`` under
``10.0.0.0/8:172.16.0.0/12`` becomes ``172.17.2.3``); the first pair that matches wins; a
bare address is a /32 (/128); IPv6 CIDRs are written in brackets, ``[2001:db8::/32]``.
``--portmap`` maps source and destination ports, ``80:8080,8000-8999:80``.

The RoCE options (``--qpmap``, ``--psn-offset``, ``--pkey``) and the native InfiniBand maps
(``--lidmap``, ``--gidmap``) take numbers in decimal or 0x-hex.
"""

from __future__ import annotations

import ipaddress
from dataclasses import MISSING, dataclass, field
from functools import cached_property

from ibwire.errors import IbwireError

IpNet = ipaddress.IPv4Network | ipaddress.IPv6Network


class OptionError(IbwireError):
    """An option value that cannot be understood."""


def number(text: str, what: str, bits: int) -> int:
    """A decimal or 0x-hex number that fits ``bits`` bits."""
    try:
        value = int(text.strip(), 0)
    except ValueError:
        raise OptionError(f"{what}: {text!r} is not a decimal or 0x-hex number") from None
    if not 0 <= value < 1 << bits:
        raise OptionError(f"{what}: {text!r} does not fit {bits} bits")
    return value


def _network(text: str, what: str) -> IpNet:
    text = text.strip()
    if text.startswith("[") and "]" in text:
        inner, _, rest = text[1:].partition("]")
        text = inner + rest
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise OptionError(f"{what}: {text!r} is not an IPv4 or IPv6 CIDR") from None


def _split_pair(item: str, what: str) -> tuple[str, str]:
    """``A:B`` where A and B may be bracketed IPv6 CIDRs (which hold colons)."""
    if item.startswith("["):
        end = item.find("]")
        if end < 0 or item[end + 1:end + 2] != ":":
            raise OptionError(f"{what}: {item!r} is not [CIDR]:[CIDR]")
        return item[:end + 1], item[end + 2:]
    left, sep, right = item.partition(":")
    if not sep or not right:
        raise OptionError(f"{what}: {item!r} is not OLD:NEW")
    return left, right


def cidr_map(text: str, what: str) -> list[tuple[IpNet, IpNet]]:
    """``--srcipmap``/``--dstipmap``/``--pnat``: comma-separated CIDR pairs."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        old, new = (_network(side, what) for side in _split_pair(item, what))
        if old.version != new.version:
            raise OptionError(f"{what}: {item!r} maps IPv{old.version} to IPv{new.version}")
        pairs.append((old, new))
    if not pairs:
        raise OptionError(f"{what}: no CIDR pairs in {text!r}")
    return pairs


def map_address(pairs: list[tuple[IpNet, IpNet]], raw: bytes) -> bytes | None:
    """The new address for ``raw`` (4 or 16 bytes) under the first matching pair, or None."""
    value = int.from_bytes(raw, "big")
    bits = len(raw) * 8
    for old, new in pairs:
        if old.max_prefixlen != bits:
            continue
        if value & int(old.netmask) == int(old.network_address):
            moved = int(new.network_address) | (value & int(new.hostmask))
            return moved.to_bytes(len(raw), "big")
    return None


def port_map(text: str) -> list[tuple[int, int, int]]:
    """``--portmap``: ``OLD:NEW`` and ``LOW-HIGH:NEW`` items -> (low, high, new) ranges."""
    ranges = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        old, new = _split_pair(item, "--portmap")
        low, _, high = old.partition("-")
        lo = number(low, "--portmap", 16)
        hi = number(high, "--portmap", 16) if high else lo
        if hi < lo:
            raise OptionError(f"--portmap: range {old!r} runs backwards")
        ranges.append((lo, hi, number(new, "--portmap", 16)))
    if not ranges:
        raise OptionError(f"--portmap: no ports in {text!r}")
    return ranges


def map_port(ranges: list[tuple[int, int, int]], port: int) -> int:
    for low, high, new in ranges:
        if low <= port <= high:
            return new
    return port


def number_map(text: str, what: str, bits: int, width: int = 0) -> dict[int, int]:
    """``OLD:NEW,...`` of numbers (``--qpmap``, ``--lidmap``)."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        old, new = _split_pair(item, what)
        out[number(old, what, bits)] = number(new, what, bits)
    if not out:
        raise OptionError(f"{what}: nothing to map in {text!r}")
    return out


def gid_map(text: str) -> dict[bytes, bytes]:
    """``--gidmap OLD=NEW,...``: GIDs as IPv6 addresses (``fe80::1=fe80::2``)."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        old, sep, new = item.partition("=")
        if not sep:
            raise OptionError(f"--gidmap: {item!r} is not OLD=NEW (GIDs written as IPv6)")
        try:
            out[ipaddress.IPv6Address(old.strip()).packed] = \
                ipaddress.IPv6Address(new.strip()).packed
        except ValueError:
            raise OptionError(f"--gidmap: {item!r}: a GID is written as an IPv6 address") \
                from None
    return out


def psn_offsets(texts: list[str]) -> tuple[int, dict[int, int]]:
    """``--psn-offset N`` (every QP) and ``--psn-offset QPN:N`` (requests to that QP, and the
    responses that carry its PSNs) -> (default offset, {QPN: offset})."""
    default, per_qp = 0, {}
    for text in texts:
        for item in filter(None, (part.strip() for part in text.split(","))):
            if ":" in item:
                qpn, off = item.split(":", 1)
                per_qp[number(qpn, "--psn-offset", 24)] = number(off, "--psn-offset", 24)
            else:
                default = number(item, "--psn-offset", 24)
    return default, per_qp


def mac(text: str, what: str) -> bytes:
    parts = text.strip().split(":")
    try:
        raw = bytes(int(p, 16) for p in parts)
    except ValueError:
        raw = b""
    if len(raw) != 6 or any(len(p) not in (1, 2) for p in parts):
        raise OptionError(f"{what}: {text!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    return raw


def ttl(text: str) -> tuple[str, int]:
    """``--ttl N`` sets, ``+N`` adds (up to 255), ``-N`` subtracts (down to 1)."""
    sign = text[:1] if text[:1] in "+-" else "="
    value = number(text.lstrip("+-"), "--ttl", 8)
    return sign, value


@dataclass
class RewriteOptions:
    """Everything ``ibwire rewrite`` may change; None or empty: leave it alone."""

    srcipmap: list[tuple[IpNet, IpNet]] = field(default_factory=list)
    dstipmap: list[tuple[IpNet, IpNet]] = field(default_factory=list)
    pnat: list[tuple[IpNet, IpNet]] = field(default_factory=list)
    portmap: list[tuple[int, int, int]] = field(default_factory=list)
    enet_smac: bytes | None = None
    enet_dmac: bytes | None = None
    enet_vlan: str | None = None  # "add" or "del"
    vlan_tag: int | None = None
    vlan_pri: int | None = None
    vlan_cfi: int | None = None
    ttl: tuple[str, int] | None = None
    tos: int | None = None
    tclass: int | None = None
    flowlabel: int | None = None
    dscp: int | None = None
    ecn: int | None = None
    mtu_trunc: int | None = None
    fixcsum: bool = False
    qpmap: dict[int, int] = field(default_factory=dict)
    psn_offset: int = 0
    psn_offset_qp: dict[int, int] = field(default_factory=dict)
    pkey: int | None = None
    lidmap: dict[int, int] = field(default_factory=dict)
    gidmap: dict[bytes, bytes] = field(default_factory=dict)
    keep_bad_icrc: bool = False

    def __post_init__(self) -> None:
        if self.enet_vlan not in (None, "add", "del"):
            raise OptionError(f"--enet-vlan: {self.enet_vlan!r} is not add or del")
        if self.enet_vlan is None and (self.vlan_tag, self.vlan_pri, self.vlan_cfi) != (
                None, None, None):
            raise OptionError("--enet-vlan-tag/-pri/-cfi need --enet-vlan add")
        if self.enet_vlan == "add" and self.vlan_tag is None:
            raise OptionError("--enet-vlan add needs --enet-vlan-tag")
        if self.tos is not None and (self.dscp is not None or self.ecn is not None):
            raise OptionError("--tos sets the whole byte; give it or --dscp/--ecn, not both")

    @cached_property
    def edits(self) -> bool:
        """True when any edit is asked for. tcprewrite 4.4 then recomputes the IPv4 and TCP/UDP
        checksums of every IP packet, as ``--fixcsum`` does; so does ibwire."""
        defaults = RewriteOptions.__dataclass_fields__
        return any(getattr(self, name) != (f.default if f.default_factory is MISSING
                                           else f.default_factory())
                   for name, f in defaults.items() if name not in ("fixcsum", "keep_bad_icrc"))

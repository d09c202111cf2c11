"""What a row of the scanner's columns looks like in ``ibwire show``'s output: its *shape*.

What show writes for a row is a fixed text with the row's values in it, and which text depends
only on the row's shape: its link, encapsulation, headers (the ``headers`` bitmap and the VLAN
tag count), opcode, CRC verdicts, whether it has a payload or IPv4 options, and, for other
traffic, why it is not InfiniBand (as ``ibwire.dissect`` says it). :func:`classify` gives every
row of a batch its shape key, with numpy, mirroring the dissector's decisions; key 0 is a row
whose output the columns cannot tell, to be dissected: errors, VLAN stacks under other
traffic, IPv6 extension headers, packets the dissector warns about, other traffic on links
other than Ethernet and raw IP. ``ibwire.cli.templates`` makes each shape's template and
``ibwire.cli.show_columns`` writes the batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np

from ibwire.crc._common import CUT_ICRC, CUT_VCRC, KIND_NAMES
from ibwire.encap_numbers import (
    ETHERTYPE_IPV4,
    ETHERTYPE_IPV6,
    IP_PROTO_UDP,
    IPV6_EXTENSIONS,
    TPIDS,
)
from ibwire.pcap.records import LINK_NAMES, LINK_OTHER
from ibwire.scan import program
from ibwire.scan.program import SLOT, SLOTS, column, columns
from ibwire.tables import constants, opcodes

# Row categories: how a row is written. DISSECT: by a dissection.
DISSECT, IB, RAW, NOT_PARSED, ETHERTYPE, IP_PROTOCOL, FRAGMENT, NOT_ROCE, IPV6_NEXT = range(9)
_ROCE_PORT = constants()["ROCE_V2_UDP_PORT"]
_ROCEV1_ETHERTYPE = constants()["ROCE_V1_ETHERTYPE"]
#: Why other traffic is not InfiniBand, as ``ibwire.dissect`` words it (its value: ``{}``).
REASONS = {ETHERTYPE: "ethertype 0x{:04x}", IP_PROTOCOL: "IP protocol {}",
            FRAGMENT: "IPv4 non-first fragment", NOT_ROCE: f"not UDP port {_ROCE_PORT}",
            IPV6_NEXT: "IPv6 next header {}"}
_IB_KINDS = tuple(KIND_NAMES.index(k) for k in ("ib_lrh", "ib_grh", "rocev1", "rocev2_ipv4",
                                                 "rocev2_ipv6"))
_RAW_KINDS = tuple(KIND_NAMES.index(k) for k in ("ib_raw", "ib_ip"))
_MAX_TAGS = 15
ETHERNET_LEN, TAG_LEN = SLOTS[SLOT["eth"]].size, SLOTS[SLOT["vlan"]].size
_NOT_IB = program.ERROR_NAMES.index("not_ib")
#: A CRC's state in a :class:`Shape` when the capture cut it (a snap length).
CUT = 2
#: How a line and a tree name each CRC state (the dissecting path as the templates).
CRC_WORDS = {1: "ok", 0: "BAD", CUT: "cut"}
#: What a cut packet's line and tree add: the bytes kept of those on the wire.
KEPT_NOTE = " ({} of {} bytes kept)"

#: Header-field columns the classification reads (more for the output itself).
CLASSIFY_KEYS = ("bth.opcode", "bth.destqp", "bth.padcnt", "deth.srcqp", "aeth.syndrome",
                 "eth.type", "vlan.etype", "ip.hdr_len", "ip.proto", "ip.frag_offset",
                 "ipv6.nxt", "udp.dstport", "lrh.lnh", "mad.mgmtclass", "mad.attributeid",
                 "mad.classspecific", "rmpp.rmpptype", "rmpp.rmppflags", "rmpp.data1",
                 "rmpp.data2")
#: The MAD header columns a summary line's MAD text is made of (``names.mad_summary``).
MAD_KEYS = ("mad.mgmtclass", "mad.attributeid", "mad.method", "mad.status")


@dataclass(frozen=True)
class Shape:
    """What a row's output looks like apart from its values (see the module)."""

    category: int
    link: int
    kind: int
    headers: int
    opcode: int
    vlans: int
    icrc_ok: int  # 1 ok, 0 bad, -1 none, CUT: cut by the capture (not verifiable)
    vcrc_ok: int
    payload: bool
    options: bool

    @property
    def cut(self) -> bool:
        return CUT in (self.icrc_ok, self.vcrc_ok)

    @classmethod
    def of(cls, key: int) -> Shape:
        return cls(key >> 57, (key >> 44) & 7, (key >> 40) & 15, key & 0xFFFFFFFF,
                   (key >> 32) & 0xFF, (key >> 47) & 15, ((key >> 51) & 3) - 1,
                   ((key >> 53) & 3) - 1, bool(key >> 55 & 1), bool(key >> 56 & 1))

    def has(self, name: str) -> bool:
        return bool(self.headers >> SLOT[name] & 1)

    @property
    def link_name(self) -> str:
        return LINK_NAMES[LINK_OTHER if self.link == 7 else self.link]

    @property
    def encapsulation(self) -> str:
        if self.category in (IB, RAW):
            return program.PACKET_ENCAPSULATIONS[KIND_NAMES[self.kind]]
        return "other"

    @property
    def known(self) -> bool:
        return self.category == IB and self.opcode in opcodes()


FIELD_NAMES = frozenset(c.name for c in columns())


# ---------------------------------------------------------------- classification


def _lookup(values: Callable[[int], bool]) -> np.ndarray:
    return np.array([values(op) for op in range(256)], bool)


_KNOWN = _lookup(lambda op: op in opcodes())
_NO_PAYLOAD = _lookup(lambda op: op in opcodes() and not opcodes()[op].payload)
_UD = _lookup(lambda op: op in opcodes() and opcodes()[op].transport == "UD")


@cache
def _decoded_classes() -> np.ndarray:
    """bool[256]: the MAD classes whose bodies ``ibwire.mads`` decodes."""
    from ibwire.mad_numbers import DECODED

    return _lookup(lambda value: value in DECODED)


@cache
def _body_headers() -> dict[int, int]:
    """The size of the header every body of a decoded MAD class starts with
    (``ibwire.scan.declared.mad_body_headers``, as written to ``_layout``)."""
    from ibwire.scan._layout import MAD_BODY_HEADERS

    return dict(MAD_BODY_HEADERS)


@cache
def _attribute_pairs() -> np.ndarray:
    """MgmtClass << 16 | AttributeID of every attribute ``ibwire.mads`` knows, sorted."""
    from ibwire.tables import mad_attributes

    return np.array(sorted(c << 16 | a for c, a in mad_attributes()), np.int64)


def _mad_header_tells(field: Callable[[str], np.ndarray], rmpp: np.ndarray) -> np.ndarray:
    """The rows whose MAD a summary line writes from the MAD header columns alone: a class
    ``ibwire.mads`` does not decode, or a decoded class's attribute it does not know (the
    body is kept as payload) where the checks ``ibwire.mads.parse_body`` makes before such a
    body pass (a failing one is an error on the line): an RMPP DATA segment's number and
    length (``check_rmpp``), a directed-route SMP's hop fields (``check_directed``), the
    body's first header before the ICRC. ``field`` gives the MAD rows' columns, ``rmpp``
    which of them have an RMPP header."""
    from ibwire.mad_numbers import (
        MAD_SIZE,
        MAX_HOPS,
        RMPP_ACTIVE,
        RMPP_DATA,
        RMPP_FIRST,
        RMPP_LAST,
        SA_CLASS,
        SMP_DIRECTED,
    )

    klass, attribute = field("mad.mgmtclass") & 0xFF, field("mad.attributeid")
    tells = ~_decoded_classes()[klass]
    pairs = _attribute_pairs()
    wanted = klass << 16 | attribute
    known = pairs[np.minimum(np.searchsorted(pairs, wanted), len(pairs) - 1)] == wanted
    room = field("offset.icrc") - field("offset.payload")
    hops, pointer = field("mad.classspecific") & 0xFF, field("mad.classspecific") >> 8
    flags, segment = field("rmpp.rmppflags"), field("rmpp.data1")
    active = rmpp & ((flags & RMPP_ACTIVE) != 0)
    data = active & (field("rmpp.rmpptype") == RMPP_DATA)
    first = (flags & RMPP_FIRST) != 0
    rmpp_bad = data & ((segment == 0) | (first != (segment == 1))
                       | (first & ((flags & RMPP_LAST) != 0)
                          & (field("rmpp.data2") > MAD_SIZE - 36)))
    for value, size in _body_headers().items():
        fits = room >= size
        if value == SMP_DIRECTED:
            fits &= (hops <= MAX_HOPS) & (pointer <= hops + 1)
        elif value == SA_CLASS:  # no RMPP header: no body read (a warning only)
            fits = ~rmpp | (~rmpp_bad & ((active & ~data) | fits))
        tells |= (klass == value) & ~known & fits
    return tells


@cache
def line_slots() -> int:
    """The header bits a summary line depends on: its addresses and key fields."""
    from ibwire.cli.show import _ADDRESSES, _KEY_FIELDS

    keys = [k for pair in _ADDRESSES for k in pair]
    keys += [k if k in FIELD_NAMES else "aeth.syndrome" for k, _label, _fmt in _KEY_FIELDS]
    return sum({1 << column(k).slot for k in keys})


@cache
def address_bits() -> int:
    from ibwire.cli.show import _ADDRESSES

    return sum({1 << column(k).slot for pair in _ADDRESSES for k in pair})


def _relevant(mode: str) -> np.uint64:
    """The bits of the shape key that change what ``mode`` writes (fewer shapes to make)."""
    everything = (1 << 61) - 1
    if mode == "line":  # no opcode (its name is a text column), link, VLAN count, IPv4
        # options, or headers it does not show
        return np.uint64(everything & ~(0xFFFFFFFF | 0xFF << 32 | 7 << 44 | 15 << 47
                                        | 1 << 56) | line_slots())
    if mode == "json":  # no payload flag: the length is always written
        return np.uint64(everything & ~(1 << 55))
    return np.uint64(everything)


def _any_of(values: np.ndarray, wanted: Iterable[int]) -> np.ndarray:
    """``np.isin`` without loading numpy.ma (70 ms at start-up)."""
    out = np.zeros(values.shape, bool)
    for v in wanted:
        out |= values == v
    return out


def classify(cols: dict[str, np.ndarray], mode: str = "tree"
             ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The shape key of every row for output ``mode`` (0: dissect it; see :class:`Shape`)
    and the computed columns the templates read (``number``, ``offset.udp``, ...)."""
    headers = cols["headers"].astype(np.uint64)

    def has(name: str) -> np.ndarray:
        return (cols["headers"] & np.uint32(1 << SLOT[name])) != 0

    def field(name: str) -> np.ndarray:
        return cols[name].astype(np.int64)

    error, kind, link = cols["error"], cols["encapsulation"], cols["link"].astype(np.int64)
    vlans = cols["vlan.count"].astype(np.int64)
    net, frame_len = field("offset.network"), field("frame.len")
    opcode = field("bth.opcode")
    hdr_len, proto = field("ip.hdr_len"), field("ip.proto")
    ihl = hdr_len * 4
    dport, nxt = field("udp.dstport"), field("ipv6.nxt")
    category = np.zeros(len(error), np.uint64)

    # InfiniBand transport packets, known opcodes or not
    ib = (error == 0) & _any_of(kind, _IB_KINDS) & has("bth") & (vlans <= _MAX_TAGS)
    ib &= ~(has("ip") & (hdr_len < 5))
    # MADs whose body ibwire.mads decodes: the dissector's, and a tree's or JSON's of a MAD
    # too short for its class's RMPP header (warned about). Other classes' bodies are
    # payload: the MAD header columns tell their trees; a summary line's, for any class
    # whose body (if decoded) has no attribute ibwire.mads knows.
    mad = has("mad")
    if mode != "line":
        klass = field("mad.mgmtclass") & 0xFF
        cut_rmpp = (program.rmpp_classes()[klass] != 0) & ~has("rmpp")
        # an RMPP DATA or ACK header's words are also named by type (ibwire.mads.rmpp_words)
        rmpptype = field("rmpp.rmpptype") & 0xFF
        rmpp_words = has("rmpp") & ((rmpptype == 1) | (rmpptype == 2))
        ib &= ~(mad & (_decoded_classes()[klass] | cut_rmpp | rmpp_words))
    elif mad.any():  # worked out on the MAD rows only
        rows = np.flatnonzero(mad)
        tells = _mad_header_tells(lambda name: cols[name][rows].astype(np.int64),
                                  has("rmpp")[rows])
        ib[rows[~tells]] = False
    known = _KNOWN[opcode]
    warned = known & _NO_PAYLOAD[opcode] & (cols["offset.icrc"] > cols["offset.payload"])
    warned |= (known & _UD[opcode] & ~has("mad")
               & ((field("bth.destqp") <= 1) | (field("deth.srcqp") <= 1)))
    category[ib & ~warned] = IB
    category[(error == 0) & _any_of(kind, _RAW_KINDS) & has("lrh")] = RAW

    # other traffic: why the dissector calls it other, where it would find the payload
    other = error == _NOT_IB
    category[other & (link == LINK_OTHER)] = NOT_PARSED
    ethernet = other & (link == 0) & has("eth") & (vlans <= 1)
    ethertype = np.where(vlans == 0, field("eth.type"), field("vlan.etype"))
    ethernet &= ~_any_of(ethertype, TPIDS)  # a tag cut short
    value = np.zeros(len(error), np.int64)
    payload_at = np.zeros(len(error), np.int64)
    not_ip = ethernet & ~_any_of(ethertype, (ETHERTYPE_IPV4, ETHERTYPE_IPV6,
                                                   _ROCEV1_ETHERTYPE))
    category[not_ip] = ETHERTYPE
    value[not_ip], payload_at[not_ip] = ethertype[not_ip], ETHERNET_LEN + TAG_LEN * vlans[not_ip]
    raw_ip = other & (link == 2)
    v4 = ((ethernet & (ethertype == ETHERTYPE_IPV4)) | raw_ip) & has("ip") & (hdr_len >= 5)

    def put(rows: np.ndarray, what: int, at: np.ndarray) -> None:
        category[rows] = what
        payload_at[rows] = at[rows]

    put(v4 & (proto != IP_PROTO_UDP), IP_PROTOCOL, net + ihl)
    value[v4 & (proto != IP_PROTO_UDP)] = proto[v4 & (proto != IP_PROTO_UDP)]
    udp4 = v4 & (proto == IP_PROTO_UDP) & (net + ihl <= frame_len)
    fragment = cols["ip.frag_offset"] != 0
    put(udp4 & fragment, FRAGMENT, net + ihl)
    put(udp4 & ~fragment & has("udp") & (dport != _ROCE_PORT), NOT_ROCE, net + ihl + 8)
    v6 = ((ethernet & (ethertype == ETHERTYPE_IPV6)) | raw_ip) & has("ipv6")
    v6 &= ~_any_of(nxt, IPV6_EXTENSIONS)
    put(v6 & (nxt != IP_PROTO_UDP), IPV6_NEXT, net + 40)
    value[v6 & (nxt != IP_PROTO_UDP)] = nxt[v6 & (nxt != IP_PROTO_UDP)]
    put(v6 & (nxt == IP_PROTO_UDP) & has("udp") & (dport != _ROCE_PORT), NOT_ROCE, net + 48)

    is_other = category >= NOT_PARSED
    options = has("ip") & (hdr_len > 5) & (proto == IP_PROTO_UDP)
    key = (headers | (opcode.astype(np.uint64) << np.uint64(32))
           | (kind.astype(np.uint64) << np.uint64(40))
           | (np.minimum(link, 7).astype(np.uint64) << np.uint64(44))
           | (np.minimum(vlans, _MAX_TAGS).astype(np.uint64) << np.uint64(47))
           | (_verdict_state(cols["icrc_ok"], cols["cut"] & CUT_ICRC) << np.uint64(51))
           | (_verdict_state(cols["vcrc_ok"], cols["cut"] & CUT_VCRC) << np.uint64(53))
           | ((cols["payload.length"] > 0).astype(np.uint64) << np.uint64(55))
           | (options.astype(np.uint64) << np.uint64(56))
           | (category << np.uint64(57)))
    key[is_other] &= ~np.uint64(0xFF << 32 | 1 << 55)  # one shape whatever the opcode bits
    key &= _relevant(mode)
    key[category == DISSECT] = 0
    extra = {"number": cols["record"] + 1, "reason": value, "options": options,
             "icrc.wire": cols["icrc"].byteswap(), "vcrc.wire": cols["vcrc"].byteswap(),
             "offset.udp": net + np.where(has("ip"), ihl, 40),
             "json.payload": np.where(is_other, np.maximum(frame_len - payload_at, 0),
                                      cols["payload.length"]),
             "payload.captured": np.maximum(np.minimum(
                 frame_len, np.where(cols["offset.icrc"] >= 0, cols["offset.icrc"], frame_len))
                 - cols["offset.payload"], 0)}
    return key, extra


def _verdict_state(ok: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """A CRC's two bits of the shape key: its verdict + 1, or ``CUT + 1`` (3) when the
    capture cut it."""
    return np.where(cut != 0, CUT + 1, ok.astype(np.int64) + 1).astype(np.uint64)



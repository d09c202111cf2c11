"""Names, codes and result types that the C engine and the pure-Python twin share.

The codes mirror the enums of ``kernel.h``; ``SITES`` mirrors its ``IBW_SITES`` table (a test
checks that the two agree). A fault is reported as (error code, site, byte offset) by both
twins and turned into an :mod:`ibwire.errors` exception here, so both raise identical errors.
"""

from __future__ import annotations

import mmap
from typing import NamedTuple, Union

import numpy as np

from ibwire.errors import (
    IbwireError,
    MalformedError,
    NotInfinibandError,
    TruncatedError,
    UnsupportedError,
)

Buffer = Union[bytes, bytearray, memoryview, mmap.mmap, np.ndarray]  # noqa: UP007
"""Anything with the buffer protocol (C-contiguous); read as bytes."""

LINK_CODES: dict[str, int] = {"ethernet": 0, "infiniband": 1, "ip": 2, "grh": 3}
"""Where a frame starts: at the Ethernet header, the LRH, the IPv4/IPv6 header, or a GRH."""

KIND_NAMES: tuple[str, ...] = (
    "none",
    "ib_lrh",  # native IB, LNH 2 (IBA local): LRH, BTH
    "ib_grh",  # native IB, LNH 3 (IBA global): LRH, GRH, BTH
    "ib_raw",  # native IB, LNH 0: VCRC only
    "ib_ip",  # native IB, LNH 1: VCRC only
    "rocev1",  # GRH, BTH (EtherType 0x8915)
    "rocev2_ipv4",  # IPv4, UDP 4791, BTH
    "rocev2_ipv6",  # IPv6, UDP 4791, BTH
)

ERROR_NAMES: tuple[str, ...] = ("ok", "not_ib", "truncated", "malformed", "unsupported")
OK, NOT_IB, TRUNCATED, MALFORMED, UNSUPPORTED = range(5)
# A CRC the length fields place past the bytes a capture kept (kernel.h IBW_CUT_*): the frame
# was cut by a snap length, and that CRC cannot be verified.
CUT_ICRC, CUT_VCRC = 1, 2
# A header of an InfiniBand/RoCE packet runs past the bytes the capture kept (IBW_CUT_HEADER).
CUT_HEADER = 4

_ERRORS: dict[int, tuple[type[IbwireError], str]] = {
    NOT_IB: (NotInfinibandError, "no InfiniBand transport packet with an ICRC/VCRC here"),
    TRUNCATED: (TruncatedError, "frame ends before the data this field requires"),
    MALFORMED: (MalformedError, "field contradicts the packet's structure"),
    UNSUPPORTED: (UnsupportedError, "valid, but not handled by the ICRC engine"),
}
ERROR_CODES: dict[type[IbwireError], int] = {cls: code for code, (cls, _) in _ERRORS.items()}

# (header, field) of every place a fault can be reported; index = C enum ibw_site.
SITES: tuple[tuple[str, str], ...] = (
    ("", ""),
    ("Ethernet", "ethertype"),
    ("VLAN", "ethertype"),
    ("IP", "version"),
    ("IPv4", "header"),
    ("IPv4", "version"),
    ("IPv4", "protocol"),
    ("IPv4", "ihl"),
    ("IPv4", "fragment"),
    ("IPv4", "total_length"),
    ("IPv6", "header"),
    ("IPv6", "version"),
    ("IPv6", "next_header"),
    ("IPv6", "extension_header"),
    ("IPv6", "payload_length"),
    ("UDP", "header"),
    ("UDP", "dst_port"),
    ("UDP", "length"),
    ("GRH", "header"),
    ("GRH", "ipver"),
    ("GRH", "next_header"),
    ("GRH", "payload_length"),
    ("LRH", "header"),
    ("LRH", "packet_length"),
    ("LRH", "lnh"),
    ("VCRC", "vcrc"),
)
SITE: dict[str, int] = {f"{h}.{f}": i for i, (h, f) in enumerate(SITES)}


def fault(code: int, site: int, offset: int) -> IbwireError:
    """The exception for a fault reported as (error code, site, byte offset)."""
    cls, reason = _ERRORS.get(code, (IbwireError, "unknown fault"))
    header, field = SITES[site] if 0 <= site < len(SITES) else ("", "")
    return cls(reason, header=header or None, field=field or None, offset=offset)


def no_icrc() -> IbwireError:
    """A raw or IP native IB packet (LNH 0/1) has a VCRC but no ICRC."""
    return fault(NOT_IB, SITE["LRH.lnh"], 1)


def no_vcrc() -> IbwireError:
    """Only native InfiniBand frames carry a VCRC."""
    return fault(NOT_IB, SITE["VCRC.vcrc"], 0)


def link_code(link: str) -> int:
    try:
        return LINK_CODES[link]
    except (KeyError, TypeError):
        raise ValueError(f"unknown link {link!r}; expected one of {sorted(LINK_CODES)}") from None


class CrcVerdict(NamedTuple):
    """Result of ``verify``: None where a CRC does not apply (no VCRC on RoCE)."""

    icrc_ok: bool | None
    vcrc_ok: bool | None
    icrc_wire: int | None
    icrc_computed: int | None
    vcrc_wire: int | None
    vcrc_computed: int | None


class IcrcSpan(NamedTuple):
    """Where the ICRC region of a frame is (offsets from the frame start).

    ``start`` is the first covered byte; ``pseudo_lrh`` says that 8 bytes of 0xFF come before
    it (RoCE, and native IB with a GRH). ``masks`` holds (offset, bits) pairs: bits forced to
    one before the CRC. ``bth``/``icrc`` are -1 and ``masks`` empty for LNH 0/1 packets;
    ``vcrc`` is -1 except on native IB.
    """

    kind: str
    start: int
    pseudo_lrh: bool
    masks: tuple[tuple[int, int], ...]
    bth: int
    icrc: int
    vcrc: int


class BatchVerdict(NamedTuple):
    """Columns of ``verify_batch``: ok flags are 1 ok, 0 bad, -1 not applicable."""

    icrc_ok: np.ndarray  # int8
    vcrc_ok: np.ndarray  # int8
    error: np.ndarray  # uint8, ERROR_NAMES
    kind: np.ndarray  # uint8, KIND_NAMES


def _int64(values: object) -> np.ndarray:
    if type(values) is np.ndarray and values.dtype == np.int64 and values.ndim == 1:
        return np.ascontiguousarray(values)
    return np.ascontiguousarray(values, dtype=np.int64).reshape(-1)


def batch_arrays(
    offsets: object, lengths: object, links: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contiguous (offsets int64, lengths int64, link codes uint8) for a batch.

    ``links`` is one link name (the returned codes array then has one element) or an array of
    link codes, one per record.
    """
    offs, lens = _int64(offsets), _int64(lengths)
    if offs.shape != lens.shape:
        raise ValueError(f"{offs.size} offsets but {lens.size} lengths")
    if isinstance(links, str):
        return offs, lens, np.array([link_code(links)], dtype=np.uint8)
    raw = np.asarray(links).reshape(-1)
    if raw.dtype.kind not in "iu":
        raise ValueError(f"links must be a link name or an integer array, not {raw.dtype}")
    if raw.shape != offs.shape:
        raise ValueError(f"{raw.size} link codes for {offs.size} records")
    if raw.size and (raw.max() >= len(LINK_CODES) or (raw.dtype.kind == "i" and raw.min() < 0)):
        raise ValueError(f"link codes must be in 0..{len(LINK_CODES) - 1} (LINK_CODES)")
    return offs, lens, np.ascontiguousarray(raw, dtype=np.uint8)


def first_outside(buflen: int, offs: np.ndarray, lens: np.ndarray) -> int:
    """Index of the first record outside [0, buflen), or -1."""
    if not offs.size:
        return -1
    bad = (offs < 0) | (offs > buflen) | (lens < 0) | (lens > buflen - offs)
    return int(np.argmax(bad)) if bad.any() else -1


def outside_error(i: int, off: int, length: int, buflen: int) -> ValueError:
    return ValueError(f"record {i}: offset {off} + length {length} outside the {buflen}-byte buffer")

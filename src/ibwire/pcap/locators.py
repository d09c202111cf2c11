"""Finding the frame in a stored record whose link type puts a header before it (Linux
SLL/SLL2, ERF), or none (the whole record is the frame): one locator per link type.

Linux cooked headers (big-endian)::

    SLL  (16 bytes): packet type 2, ARPHRD type 2, address length 2, address 8, protocol 2
    SLL2 (20 bytes): protocol 2, reserved 2, interface index 4, ARPHRD type 2, packet type 1,
                     address length 1, address 8
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache

from ibwire.errors import TruncatedError
from ibwire.pcap.erf import ERF_HEADER_LEN, FrameLocation, locate_erf_frame
from ibwire.pcap.linktypes import sll_link_code
from ibwire.pcap.records import LINK_CODES, LINK_OTHER, Buffer
from ibwire.tables import link_types

Locator = Callable[[Buffer, int, int, int, int], FrameLocation]
"""(view, start, end, record orig_len, base offset of view) -> FrameLocation."""

SLL_HEADER_LEN = 16
SLL2_HEADER_LEN = 20
LINK_HEADER_LEN = {"erf": ERF_HEADER_LEN, "sll": SLL_HEADER_LEN, "sll2": SLL2_HEADER_LEN}
"""Link types whose records start with a header before the frame: its fixed length."""
_U16 = struct.Struct(">H")


def _truncated(name: str, need: int, start: int, end: int, base: int) -> FrameLocation:
    error = TruncatedError(f"{name} header truncated: {end - start} of {need} bytes",
                           header=name, offset=base + start)
    return (LINK_OTHER, start, start, 0, None, None, None, None, error)


def locate_sll_frame(view: Buffer, start: int, end: int, orig_len: int, base: int
                     ) -> FrameLocation:
    if end - start < SLL_HEADER_LEN:
        return _truncated("SLL", SLL_HEADER_LEN, start, end, base)
    code = sll_link_code(_U16.unpack_from(view, start + 2)[0],
                         _U16.unpack_from(view, start + 14)[0])
    return (code, start + SLL_HEADER_LEN, end, max(orig_len - SLL_HEADER_LEN, 0),
            None, None, None, None, None)


def locate_sll2_frame(view: Buffer, start: int, end: int, orig_len: int, base: int
                      ) -> FrameLocation:
    if end - start < SLL2_HEADER_LEN:
        return _truncated("SLL2", SLL2_HEADER_LEN, start, end, base)
    code = sll_link_code(_U16.unpack_from(view, start + 8)[0],
                         _U16.unpack_from(view, start)[0])
    return (code, start + SLL2_HEADER_LEN, end, max(orig_len - SLL2_HEADER_LEN, 0),
            None, None, None, None, None)


def _locate_whole(code: int) -> Locator:
    def locate(view: Buffer, start: int, end: int, orig_len: int, base: int) -> FrameLocation:
        return (code, start, end, orig_len, None, None, None, None, None)
    return locate


_HEADER_LOCATORS: dict[str, Locator] = {
    "sll": locate_sll_frame,
    "sll2": locate_sll2_frame,
    "erf": locate_erf_frame,
}


@cache
def locator_for(linktype: int) -> Locator:
    """The function that finds the frame in a record of ``linktype`` (unknown: whole record,
    link 'other')."""
    entry = link_types().get(("pcap", linktype))
    starts_at = entry[1] if entry else "other"
    if starts_at in _HEADER_LOCATORS:
        return _HEADER_LOCATORS[starts_at]
    return _locate_whole(LINK_CODES.get(starts_at, LINK_OTHER))

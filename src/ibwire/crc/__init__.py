"""ICRC and VCRC of InfiniBand and RoCE frames: compute, verify, fix, one packet or a batch.

Two twins with the same names: the C engine (``_engine``, Cython over ``kernel.c``) and the
pure-Python ``_python``. The engine is used when it is built, unless ``IBWIRE_NO_EXTENSIONS=1``;
``implementation`` says which one is active ("c" or "python").

``link`` says where a frame starts: "ethernet", "infiniband" (at the LRH), "ip" (at the
IPv4/IPv6 header) or "grh" (RoCEv1 without Ethernet, e.g. Linux SLL protocol 0x8915).
The algorithm, its masks and sources are in ``shared/reference/crc.md``.
"""

from __future__ import annotations

from ibwire._twins import load_twin
from ibwire.crc import _python
from ibwire.crc._common import (
    ERROR_NAMES,
    KIND_NAMES,
    LINK_CODES,
    BatchVerdict,
    Buffer,
    CrcVerdict,
    IcrcSpan,
)

_impl, implementation = load_twin("ibwire.crc._engine", _python)

crc32 = _impl.crc32
crc16 = _impl.crc16
locate = _impl.locate
icrc = _impl.icrc
vcrc = _impl.vcrc
verify = _impl.verify
fix = _impl.fix
fix_batch = _impl.fix_batch
verify_batch = _impl.verify_batch

__all__ = [
    "ERROR_NAMES",
    "KIND_NAMES",
    "LINK_CODES",
    "BatchVerdict",
    "Buffer",
    "CrcVerdict",
    "IcrcSpan",
    "crc16",
    "crc32",
    "fix",
    "fix_batch",
    "icrc",
    "implementation",
    "locate",
    "vcrc",
    "verify",
    "verify_batch",
]

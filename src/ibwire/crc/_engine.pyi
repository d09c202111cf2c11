"""Type stub of the C engine (``_engine.pyx``): the same API as ``ibwire.crc._python``."""

import numpy as np

from ibwire.crc._common import (
    ERROR_NAMES,
    KIND_NAMES,
    LINK_CODES,
    BatchVerdict,
    Buffer,
    CrcVerdict,
    IcrcSpan,
)

__all__ = [
    "ERROR_NAMES", "KIND_NAMES", "LINK_CODES", "BatchVerdict", "CrcVerdict", "IcrcSpan",
    "crc16", "crc32", "fix", "fix_batch", "icrc", "locate", "vcrc", "verify", "verify_batch",
]

SITES: tuple[tuple[str, str], ...]

def crc32_backend() -> str: ...
def set_crc32_backend(name: str) -> bool: ...
def crc32(data: Buffer, value: int = 0) -> int: ...
def crc16(data: Buffer) -> int: ...
def locate(frame: Buffer, link: str = "ethernet") -> IcrcSpan: ...
def icrc(frame: Buffer, link: str = "ethernet") -> int: ...
def vcrc(frame: Buffer, link: str = "infiniband") -> int: ...
def verify(frame: Buffer, link: str = "ethernet", *, lenient: bool = False) -> CrcVerdict: ...
def fix(buf: Buffer, link: str = "ethernet", *, lenient: bool = False) -> None: ...
def verify_batch(
    buf: Buffer,
    offsets: np.ndarray | list[int],
    lengths: np.ndarray | list[int],
    links: str | np.ndarray = "ethernet",
) -> BatchVerdict: ...
def fix_batch(
    buf: Buffer,
    offsets: np.ndarray | list[int],
    lengths: np.ndarray | list[int],
    links: str | np.ndarray = "ethernet",
) -> np.ndarray: ...

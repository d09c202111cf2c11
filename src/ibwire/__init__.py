"""ibwire: the InfiniBand and RoCE wire protocols, dissected, validated, crafted.

The names below are loaded on first use, so that ``import ibwire.<module>`` costs only what
that module needs (``ibwire check`` starts without the Construct declarations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ibwire._lazy import lazy_exports
from ibwire.errors import (
    BuildError,
    CaptureError,
    IbwireError,
    MalformedError,
    NotInfinibandError,
    TruncatedError,
    UnknownAttributeError,
    UnknownOpcodeError,
    UnsupportedError,
)

if TYPE_CHECKING:
    from ibwire.builder import build
    from ibwire.dissect import parse
    from ibwire.packet import HeaderValue, Packet

_LAZY = {"build": "ibwire.builder", "parse": "ibwire.dissect", "HeaderValue": "ibwire.packet",
         "Packet": "ibwire.packet"}

__all__ = [
    "HeaderValue",
    "Packet",
    "build",
    "parse",
    "BuildError",
    "CaptureError",
    "IbwireError",
    "MalformedError",
    "NotInfinibandError",
    "TruncatedError",
    "UnknownAttributeError",
    "UnknownOpcodeError",
    "UnsupportedError",
]
__version__ = "0.1.0"

__getattr__ = lazy_exports(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

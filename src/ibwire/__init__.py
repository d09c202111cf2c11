"""ibwire: the InfiniBand and RoCE wire protocols, dissected, validated, crafted."""

from __future__ import annotations

from ibwire.build import build
from ibwire.dissect import parse
from ibwire.errors import (
    BuildError,
    CaptureError,
    IbwireError,
    MalformedError,
    NotInfinibandError,
    TruncatedError,
    UnknownOpcodeError,
    UnsupportedError,
)
from ibwire.packet import HeaderValue, Packet

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
    "UnknownOpcodeError",
    "UnsupportedError",
]
__version__ = "0.1.0"

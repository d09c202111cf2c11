"""ibwire: the InfiniBand and RoCE wire protocols, dissected, validated, crafted."""

from __future__ import annotations

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

__all__ = [
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

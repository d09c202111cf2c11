"""Choosing between a C engine and its pure-Python twin (the CRC engine, the scanner)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load_twin(engine: str, twin: ModuleType | str) -> tuple[ModuleType, str]:
    """(module, "c") when the compiled ``engine`` imports and IBWIRE_NO_EXTENSIONS is not 1,
    else (``twin``, "python"); a twin given by name is imported only then."""
    if os.environ.get("IBWIRE_NO_EXTENSIONS") != "1":
        try:
            return importlib.import_module(engine), "c"
        except ImportError:
            pass
    return (importlib.import_module(twin) if isinstance(twin, str) else twin), "python"

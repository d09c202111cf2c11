"""The forwarder's compiled fast path, when it is built (``ibwire.impair._fast``: recvmmsg(2)
and sendmmsg(2) over one buffer per batch, pcap records laid out in C), else None and the
ports read and write one frame per system call (:mod:`ibwire.impair.ports`).
IBWIRE_NO_EXTENSIONS=1 forces the latter, as for every ibwire engine."""

from __future__ import annotations

import importlib
import os
from typing import Any

fast: Any = None
if os.environ.get("IBWIRE_NO_EXTENSIONS") != "1":
    try:
        fast = importlib.import_module("ibwire.impair._fast")
    except ImportError:
        fast = None
implementation = "c" if fast is not None else "python"
pack_records: Any = getattr(fast, "pack_records", None)

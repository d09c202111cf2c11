"""The batch scanner: every frame of a capture into numpy columns, in one pass.

Two twins with the same names, as for the CRC engine: the C engine (``_engine``, Cython over
``scan.c`` and the CRC kernel) and the pure-Python ``_python``; ``implementation`` says which
is active ("c" or "python"), ``IBWIRE_NO_EXTENSIONS=1`` forces the twin.

* :func:`scan_capture` scans a capture file window by window and yields
  :class:`ScanBatch` es (memory does not grow with the file);
* :func:`scan_index` scans an ``ibwire.pcap.CaptureIndex``;
* :func:`scan_frames` scans frames of any buffer given their offsets, lengths and links;
* :func:`ibwire.scan.verdicts.check_pcap_file` only counts, for ``ibwire check``.

The columns, their types and what they hold are listed in :mod:`ibwire.scan.program`. The
names are loaded on first use: ``ibwire.scan.verdicts`` needs neither numpy nor Construct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ibwire._lazy import lazy_exports
from ibwire._twins import load_twin

if TYPE_CHECKING:
    from ibwire.scan._python import pcap_records, scan_frames, scan_pcap
    from ibwire.scan.batch import ScanBatch, scan_index
    from ibwire.scan.capture import scan_capture

    implementation: str

_ENGINE = ("scan_frames", "pcap_records", "scan_pcap")
_MODULES = {"ScanBatch": "ibwire.scan.batch", "scan_index": "ibwire.scan.batch",
            "scan_capture": "ibwire.scan.capture"}

__all__ = ["ScanBatch", "implementation", "pcap_records", "scan_capture", "scan_frames",
           "scan_index", "scan_pcap"]


_exports = lazy_exports(__name__, globals(), _MODULES)


def __getattr__(name: str) -> Any:
    if name in _ENGINE or name == "implementation":
        impl, kind = load_twin("ibwire.scan._engine", "ibwire.scan._python")
        globals().update({n: getattr(impl, n) for n in _ENGINE}, implementation=kind)
        return globals()[name]
    return _exports(name)

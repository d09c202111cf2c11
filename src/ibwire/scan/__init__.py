"""The batch scanner: every frame of a capture into numpy columns, in one pass.

Two twins with the same names, as for the CRC engine: the C engine (``_engine``, Cython over
``scan.c`` and the CRC kernel) and the pure-Python ``_python``; ``implementation`` says which
is active ("c" or "python"), ``IBWIRE_NO_EXTENSIONS=1`` forces the twin.

* :func:`scan_capture` scans a capture file window by window and yields
  :class:`ScanBatch` es (memory does not grow with the file);
* :func:`scan_index` scans an ``ibwire.pcap.CaptureIndex``;
* :func:`scan_frames` scans frames of any buffer given their offsets, lengths and links.

The columns, their types and what they hold are listed in :mod:`ibwire.scan.program`.
"""

from __future__ import annotations

from ibwire._twins import load_twin
from ibwire.scan import _python

_impl, implementation = load_twin("ibwire.scan._engine", _python)
scan_frames = _impl.scan_frames
pcap_records = _impl.pcap_records
scan_pcap = _impl.scan_pcap

from ibwire.scan.batch import ScanBatch, scan_index  # noqa: E402 - needs scan_frames
from ibwire.scan.capture import scan_capture  # noqa: E402

__all__ = ["ScanBatch", "implementation", "pcap_records", "scan_capture", "scan_frames",
           "scan_index", "scan_pcap"]

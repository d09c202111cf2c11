"""Capture readers and writers: pcap (both byte orders, us/ns), pcapng, native ERF, gzip,
standard input; link types Ethernet, Linux SLL/SLL2, raw IP, ERF (InfiniBand, Ethernet),
LINKTYPE_INFINIBAND.

Reading::

    with open_capture("trace.pcapng.gz") as capture:
        for record in capture:
            if record.error is not None:   # a packet-level problem: counted, not raised
                continue
            record.link, record.frame       # where to dissect from, and the bytes

Error policy:

- File-level problems (cannot open, empty, bad magic, truncated pcap global header or first
  pcapng section header, unknown pcap/pcapng version) raise :class:`CaptureError` when the
  file is opened, with the file name and a byte offset in a one-line message.
- After that, iteration never raises. A problem becomes a record whose ``error`` is an
  IbwireError (TruncatedError: the data stops early; MalformedError: a field lies) carrying
  the record index and byte offset; its frame is empty and its index is used up.
- A lying length that leaves the stream unreadable ends the iteration with that one error
  record: pcap truncated record header or trailing bytes shorter than one, truncated record
  data, caplen over 256 MiB or past the end; pcapng block length not a multiple of 4, under
  12, over 256 MiB, past the end, or its trailing copy different; a bad later section header;
  native ERF rlen under 16 or past the end; corrupt or truncated gzip data.
- A problem confined to one record is an error record and reading goes on: a pcapng packet
  longer than its block or on an undeclared interface, a block too short for its fields,
  IDB options running past the block (the interface is kept); an ERF header cut short, an
  ERF rlen shorter than its headers; a Linux SLL/SLL2 header cut short.
- A record that is usable but inconsistent comes out whole with ``warning`` set: caplen
  over snaplen, caplen over orig_len, an ERF record cut by its pcap record inside the frame.

Per module: ``pcap``, ``pcapng``, ``erf`` (sans-IO walkers over buffers), ``linktypes`` (SLL,
SLL2, ERF -> link + frame), ``source`` (files, mmap, gzip, stdin), ``live`` (capturing on
an interface through dumpcap or tcpdump), ``index`` (numpy columns
for the batch scanner), ``writer`` (atomic pcap/pcapng writers), ``convert``. The names
below are loaded on first use.

The walk of runs of pcapng Enhanced Packet Blocks (``pcapng_epbs``, used by ``index`` and by
the scanner's windows) has twins, as the CRC engine and the scanner do: the C engine
(``_engine``, over ``pcapng_walk.c``) and the pure-Python ``_python``; ``implementation``
says which is active, ``IBWIRE_NO_EXTENSIONS=1`` forces the twin. This package imports
nothing above it (not ``ibwire.scan``): readers sit below the scanner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ibwire._lazy import lazy_exports
from ibwire._twins import load_twin

if TYPE_CHECKING:
    from ibwire.pcap._python import pcapng_epbs
    from ibwire.pcap.convert import (
        ConversionReport,
        erf_to_infiniband,
        infiniband_to_erf,
        pcap_to_pcapng,
        pcapng_to_pcap,
    )
    from ibwire.pcap.index import CaptureIndex, index_buffer, index_capture
    from ibwire.pcap.live import LiveCapture
    from ibwire.pcap.records import LINK_CODES, LINK_NAMES, CaptureRecord
    from ibwire.pcap.source import CaptureReader, iter_capture_bytes, open_capture, read_capture
    from ibwire.pcap.writer import PcapngWriter, PcapWriter

    implementation: str

_WHERE = {
    **dict.fromkeys(("ConversionReport", "erf_to_infiniband", "infiniband_to_erf",
                     "pcap_to_pcapng", "pcapng_to_pcap"), "ibwire.pcap.convert"),
    **dict.fromkeys(("CaptureIndex", "index_buffer", "index_capture"), "ibwire.pcap.index"),
    "LiveCapture": "ibwire.pcap.live",
    **dict.fromkeys(("LINK_CODES", "LINK_NAMES", "CaptureRecord"), "ibwire.pcap.records"),
    **dict.fromkeys(("CaptureReader", "iter_capture_bytes", "open_capture", "read_capture"),
                    "ibwire.pcap.source"),
    **dict.fromkeys(("PcapngWriter", "PcapWriter"), "ibwire.pcap.writer"),
}
_ENGINE = ("pcapng_epbs",)
_exports = lazy_exports(__name__, globals(), _WHERE)


def __getattr__(name: str) -> Any:
    if name in _ENGINE or name == "implementation":
        impl, kind = load_twin("ibwire.pcap._engine", "ibwire.pcap._python")
        globals().update({n: getattr(impl, n) for n in _ENGINE}, implementation=kind)
        return globals()[name]
    return _exports(name)


__all__ = [
    "LINK_CODES",
    "LINK_NAMES",
    "CaptureIndex",
    "CaptureReader",
    "CaptureRecord",
    "ConversionReport",
    "LiveCapture",
    "PcapWriter",
    "PcapngWriter",
    "erf_to_infiniband",
    "index_buffer",
    "index_capture",
    "implementation",
    "infiniband_to_erf",
    "iter_capture_bytes",
    "open_capture",
    "pcap_to_pcapng",
    "pcapng_epbs",
    "pcapng_to_pcap",
    "read_capture",
]

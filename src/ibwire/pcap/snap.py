"""Headers-only captures made from whole ones: every record cut to a snap length, as
``tcpdump -s N`` or ``editcap -s N`` leave them (the record keeps its original length, the
file or interface header says the snap length).

:func:`snap_capture` writes a classic pcap as a classic pcap (same link type, byte order
and timestamp resolution) and a pcapng as a pcapng (each interface with the snap length),
atomically; the input is never written. What ibwire then makes of such a capture: a packet
cut after its headers is whole but for its CRCs and payload bytes (``ibwire.scan``'s
``cut`` column).
"""

from __future__ import annotations

import os

from ibwire.errors import CaptureError
from ibwire.pcap.source import Source, open_capture
from ibwire.pcap.writer import PcapngWriter, PcapWriter


def snap_capture(source: Source, output: str | os.PathLike[str], snaplen: int) -> int:
    """Write ``source`` to ``output`` with every record cut to ``snaplen`` bytes (a record's
    link-layer header counts, as on the wire); returns how many records were cut. Error
    records of the input raise their error (nothing is written)."""
    if snaplen < 1:
        raise ValueError(f"a snap length must be at least 1 byte, not {snaplen}")
    cut = 0
    with open_capture(source) as reader:
        kind = reader.format
        if kind not in ("pcap", "pcapng"):
            raise CaptureError(f"{reader.name}: cutting to a snap length takes pcap or pcapng, "
                               f"not {kind}")
        if kind == "pcap":
            assert reader.header is not None
            writer: PcapWriter | PcapngWriter = PcapWriter(
                output, reader.header.linktype, nanoseconds=reader.header.nanoseconds,
                snaplen=snaplen, big_endian=reader.header.byte_order == ">")
        else:
            writer = PcapngWriter(output)
        with writer:
            for record in reader:
                if record.error is not None:
                    raise record.error
                data = bytes(record.record_data)
                orig = max(record.record_orig_len, len(data))
                cut += len(data) > snaplen
                if isinstance(writer, PcapWriter):
                    writer.write(data[:snaplen], record.timestamp_ns, orig)
                else:
                    writer.write(data[:snaplen], record.timestamp_ns, record.linktype, orig,
                                 snaplen)
    return cut

"""Capture conversions, the back ends of ``ibwire convert``.

- :func:`infiniband_to_erf`: LINKTYPE_INFINIBAND (247) records -> a LINKTYPE_ERF (197) pcap of
  ERF type 21 (InfiniBand) records, which Wireshark opens (it rejects 247).
- :func:`erf_to_infiniband`: ERF type 21 records -> a LINKTYPE_INFINIBAND pcap.
- :func:`pcapng_to_pcap`: a pcapng (or any capture) of one link type -> pcap.
- :func:`pcap_to_pcapng`: a pcap (or any capture) -> pcapng.

Each reads any capture ibwire reads (pcap, pcapng, native ERF, gzip, '-') and writes the
output atomically: on any failure the output path is left as it was. The input is never
written; an output path naming the input file is refused. Error records of the input are not
written: they are counted, and returned in the report (``strict=True`` stops at the first
one instead and raises its error, a TruncatedError or MalformedError carrying the record
index and byte offset). Frames go through byte-identical.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

from ibwire.errors import CaptureError, IbwireError
from ibwire.pcap.erf import LINKTYPE_ERF, build_erf_record
from ibwire.pcap.records import CaptureRecord
from ibwire.pcap.source import CaptureReader, Source, open_capture
from ibwire.pcap.writer import PcapngWriter, PcapWriter

LINKTYPE_INFINIBAND = 247
ERF_TYPE_INFINIBAND = 21


@dataclass
class ConversionReport:
    """What a conversion did."""

    records_written: int = 0
    records_skipped: int = 0
    """Records left out on purpose (other link types or ERF types, with ``others='skip'``)."""
    errors: list[IbwireError] = field(default_factory=list)
    """Error records of the input (not written)."""


def _refuse_same_file(source: Source, output: str | os.PathLike[str]) -> None:
    if isinstance(source, (str, os.PathLike)) and source != "-" and os.path.exists(output):
        try:
            same = os.path.samefile(source, output)
        except OSError:
            return
        if same:
            raise CaptureError(f"{os.fspath(output)}: output would overwrite the input")


def writer_like(reader: CaptureReader, output: str | os.PathLike[str]
                ) -> PcapWriter | PcapngWriter:
    """A writer of ``output`` in the format of the capture ``reader`` reads: a pcap with its
    link type, byte order and timestamp resolution; a pcapng (each record's link type and
    snaplen kept, nanosecond timestamps); a native ERF file as a pcap of its ERF records
    (LINKTYPE_ERF, which Wireshark and ibwire read)."""
    if reader.format == "pcapng":
        return PcapngWriter(output)
    if reader.format == "erf" or reader.header is None:
        return PcapWriter(output, LINKTYPE_ERF, nanoseconds=True)
    return PcapWriter(output, reader.header.linktype, nanoseconds=reader.header.nanoseconds,
                      big_endian=reader.header.byte_order == ">")


def _check_others(others: str) -> None:
    if others not in ("error", "skip"):
        raise ValueError(f"others must be 'error' or 'skip', not {others!r}")


def _usable(record: CaptureRecord, report: ConversionReport, strict: bool) -> bool:
    """Whether ``record`` was read; its error (numbered as the others, :func:`_number`) is
    raised when ``strict``, else kept in the report."""
    if record.error is None:
        return True
    error = copy.copy(record.error).at_record(_number(record))
    if strict:
        raise error
    report.errors.append(error)
    return False


def _number(record: CaptureRecord) -> int:
    """The record's number in messages: from 1, as tshark's frame.number and ``ibwire show``
    (``record.index`` counts from 0)."""
    return record.index + 1


def infiniband_to_erf(source: Source, output: str | os.PathLike[str], *,
                      nanoseconds: bool | None = None, others: str = "error",
                      strict: bool = False) -> ConversionReport:
    """Wrap each LINKTYPE_INFINIBAND frame in an ERF type 21 record (flags: varying length;
    rlen padded to 8 bytes; wlen = the record's original length) in a LINKTYPE_ERF pcap.

    ``nanoseconds``: precision of the pcap record headers (default: the input pcap's, else
    ns); the ERF header always carries the full timestamp. ``others``: what to do with records
    of another link type, 'error' (raise :class:`CaptureError`, write nothing) or 'skip'.
    """
    _check_others(others)
    _refuse_same_file(source, output)
    report = ConversionReport()
    with open_capture(source) as reader:
        if nanoseconds is None:
            nanoseconds = reader.header.nanoseconds if reader.header else True
        with PcapWriter(output, LINKTYPE_ERF, nanoseconds=nanoseconds) as writer:
            for record in reader:
                if not _usable(record, report, strict):
                    continue
                if record.linktype != LINKTYPE_INFINIBAND:
                    if others == "error":
                        raise CaptureError(f"record {_number(record)} has link type "
                                           f"{record.linktype}, not LINKTYPE_INFINIBAND (247)",
                                           record=_number(record), offset=record.offset)
                    report.records_skipped += 1
                    continue
                erf = build_erf_record(record.frame, record.timestamp_ns, ERF_TYPE_INFINIBAND,
                                       wire_len=max(record.orig_len, record.caplen))
                writer.write(erf, record.timestamp_ns)
            report.records_written = writer.records_written
    return report


def erf_to_infiniband(source: Source, output: str | os.PathLike[str], *,
                      nanoseconds: bool = True, others: str = "error",
                      strict: bool = False) -> ConversionReport:
    """Unwrap ERF type 21 records (LINKTYPE_ERF in pcap/pcapng, or a native ERF file) into a
    LINKTYPE_INFINIBAND pcap: frame from the LRH on, timestamp from the ERF header, original
    length = ERF wlen. ``others``: records that are not ERF InfiniBand, 'error' or 'skip'."""
    _check_others(others)
    _refuse_same_file(source, output)
    report = ConversionReport()
    with open_capture(source) as reader, \
            PcapWriter(output, LINKTYPE_INFINIBAND, nanoseconds=nanoseconds) as writer:
        for record in reader:
            if not _usable(record, report, strict):
                continue
            if record.linktype != LINKTYPE_ERF or record.erf_type != ERF_TYPE_INFINIBAND:
                if others == "error":
                    raise CaptureError(f"record {_number(record)} is not an ERF InfiniBand record "
                                       f"(link type {record.linktype}, ERF type "
                                       f"{record.erf_type})", record=_number(record),
                                       offset=record.offset)
                report.records_skipped += 1
                continue
            writer.write(record.frame, record.timestamp_ns, max(record.orig_len, record.caplen))
        report.records_written = writer.records_written
    return report


def pcapng_to_pcap(source: Source, output: str | os.PathLike[str], *,
                   linktype: int | None = None, nanoseconds: bool = True,
                   strict: bool = False) -> ConversionReport:
    """Copy the packets of a pcapng into a pcap, which has a single link type.

    ``linktype=None``: every packet must have the first packet's link type (else
    :class:`CaptureError` and nothing is written); a number keeps only that link type's
    packets (the others are counted as skipped). Simple Packet Blocks, which carry no time,
    get timestamp 0. The snaplen written is the largest of the interfaces' (262144 if none
    gives one), never less than the longest record.
    """
    _refuse_same_file(source, output)
    report = ConversionReport()
    pick_first = linktype is None
    writer: PcapWriter | None = None
    interface_snaplen = 0
    try:
        with open_capture(source) as reader:
            for record in reader:
                if not _usable(record, report, strict):
                    continue
                if linktype is None:
                    linktype = record.linktype
                if record.linktype != linktype:
                    if pick_first:
                        raise CaptureError(
                            f"interfaces have different link types ({linktype} and "
                            f"{record.linktype}); pick one with linktype=",
                            record=_number(record), offset=record.offset)
                    report.records_skipped += 1
                    continue
                if writer is None:
                    writer = PcapWriter(output, linktype, nanoseconds=nanoseconds)
                writer.write_record(record)
                interface_snaplen = max(interface_snaplen, record.snaplen)
        if writer is None:
            writer = PcapWriter(output, 1 if linktype is None else linktype,
                                nanoseconds=nanoseconds)
        if interface_snaplen:
            writer.snaplen = max(interface_snaplen, writer.longest_record)
        writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    report.records_written = writer.records_written
    return report


def pcap_to_pcapng(source: Source, output: str | os.PathLike[str], *,
                   nanoseconds: bool | None = None, strict: bool = False) -> ConversionReport:
    """Copy the records of a pcap (or any capture) into a pcapng: one section, an interface
    per (link type, snaplen) met, each record as stored in an Enhanced Packet Block.

    ``nanoseconds``: the interfaces' timestamp resolution (default: the input pcap's; ns for
    other inputs, whose ERF or pcapng timestamps may be finer than microseconds).
    """
    _refuse_same_file(source, output)
    report = ConversionReport()
    with open_capture(source) as reader:
        if nanoseconds is None:
            nanoseconds = reader.header.nanoseconds if reader.header else True
        with PcapngWriter(output, nanoseconds=nanoseconds) as writer:
            for record in reader:
                if _usable(record, report, strict):
                    writer.write_record(record)
            report.records_written = writer.records_written
    return report

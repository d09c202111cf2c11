"""One capture record, looked at: its dissection, its CRC verdict, or the reason it failed.

This is what the CLI verbs share: ``show``, ``check`` and ``stats`` each turn the records of a
capture into :class:`Inspection` objects and report on them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ibwire.dissect import parse
from ibwire.errors import IbwireError
from ibwire.packet import Packet
from ibwire.pcap.records import CaptureRecord


@dataclass(frozen=True)
class Inspection:
    """What ibwire found in one record."""

    record: CaptureRecord
    packet: Packet | None
    icrc_ok: bool | None
    vcrc_ok: bool | None
    error: IbwireError | None

    @property
    def is_ib(self) -> bool:
        return self.packet is not None and self.packet.is_ib

    @property
    def failed(self) -> bool:
        """An InfiniBand/RoCE packet (or a capture record) that did not verify; not a packet
        that the capture cut (:attr:`cut`)."""
        if self.error is not None and not self.cut:
            return True
        return self.icrc_ok is False or self.vcrc_ok is False

    @property
    def cut(self) -> bool:
        """An InfiniBand/RoCE packet that the capture cut (a snap length), after its headers
        or inside one: its CRCs cannot be verified, and that is not a failure."""
        return self.packet is not None and self.packet.cut and self.packet.is_ib

    @property
    def reason(self) -> str:
        """Why it failed, for a line that names the record first: the error, and what the
        CRCs it left placed say."""
        if self.error is not None:
            return self.error.in_record() + crc_note(self.icrc_ok, self.vcrc_ok)
        bad = []
        if self.icrc_ok is False:
            bad.append("ICRC mismatch")
        if self.vcrc_ok is False:
            bad.append("VCRC mismatch")
        return ", ".join(bad)

    def fields(self) -> dict[str, Any]:
        """Flat fields for --json and --where: the packet's, plus frame, time and verdicts."""
        out: dict[str, Any] = {"frame": self.record.index + 1,
                               "timestamp_ns": self.record.timestamp_ns,
                               "link": self.record.link}
        if self.packet is not None:
            out["encapsulation"] = self.packet.encapsulation
            out.update(self.packet.fields())
            if self.packet.opcode is not None:
                out["bth.opcode.name"] = self.packet.opcode.name
            out["payload.length"] = self.packet.payload_length
        out["icrc_ok"] = self.icrc_ok
        out["vcrc_ok"] = self.vcrc_ok
        if self.cut:
            assert self.packet is not None
            out["payload.captured"] = self.packet.captured_payload_length
            out["frame.len"] = len(self.packet.frame)
            out["frame.orig_len"] = self.packet.wire_length
            out["cut"] = True
        out["error"] = str(self.error) if self.error is not None else None
        return out


def crc_note(icrc_ok: bool | None, vcrc_ok: bool | None) -> str:
    """What the CRCs of a packet whose headers are broken say, after its error: a good CRC
    over the broken bytes means the sender built it so, a bad one that it was corrupted on
    the way (or in the capture). Empty when no CRC is placed."""
    verdicts = [(name, ok) for name, ok in (("ICRC", icrc_ok), ("VCRC", vcrc_ok))
                if ok is not None]
    if not verdicts:
        return ""
    said = ", ".join(f"{name} {'ok' if ok else 'bad'}" for name, ok in verdicts)
    if all(ok for _, ok in verdicts):
        return f"; {said}: the sender built it wrong"
    return f"; {said}: corrupted after the sender built it"


def wire_length(kept: int, record: CaptureRecord) -> int:
    """The length on the wire of a frame of ``kept`` bytes from ``record`` (which may count a
    cooked header before it): more than ``kept`` where a snap length cut the record."""
    return kept + max(0, record.orig_len - record.caplen)


def inspect(record: CaptureRecord) -> Inspection:
    """Dissect and verify one record; problems become the inspection's ``error``."""
    number = record.index + 1  # messages count records from 1, like frame numbers
    if record.error is not None:
        return Inspection(record, None, None, None, record.error.at_record(number))
    if record.link == "other":
        return Inspection(record, None, None, None, None)
    frame = bytes(record.frame)
    try:
        packet = parse(frame, record.link, wire=wire_length(len(frame), record))
    except IbwireError as exc:
        error = exc.at_record(number).cut_by_capture(record.caplen, record.orig_len)
        return Inspection(record, None, None, None, error)
    if packet.cut and packet.is_ib:
        error = None if packet.error is None else copy.copy(packet.error).at_record(number)
        return Inspection(record, packet, None, None, error)
    if packet.icrc is None and packet.vcrc is None:
        return Inspection(record, packet, None, None, None)
    try:
        verdict = packet.verify()
    except IbwireError as exc:
        return Inspection(record, packet, None, None, exc.at_record(number))
    error = None if packet.error is None else copy.copy(packet.error).at_record(number)
    return Inspection(record, packet, verdict.icrc_ok, verdict.vcrc_ok, error)

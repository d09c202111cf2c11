"""Captures for the verdict's tests: gen's frames in memory, edited as a broken endpoint (or
impair) would have made them, and written out; records are numbered from 1."""

from __future__ import annotations

import copy
import os
from typing import Any

import ibwire
from ibwire.gen import Scenario, generate
from ibwire.gen.frames import LINKTYPES
from ibwire.pcap.writer import PcapWriter

#: Fields the builder derives: dropped before a frame is rebuilt with changes.
DERIVED = ("icrc", "vcrc", "ip.checksum", "ip.len", "udp.length", "udp.checksum", "ipv6.plen",
           "lrh.pktlen", "aeth.syndrome.opcode", "aeth.syndrome.type",
           "aeth.syndrome.credit_count")
NAK_PSN_SEQUENCE = 0x60


class Capture:
    """A generated conversation as a list of (timestamp ns, frame), and its manifest."""

    def __init__(self, scenario: Scenario) -> None:
        frames, manifest = generate(scenario)
        self.frames = list(frames)
        self.manifest = copy.deepcopy(manifest)
        self.linktype = LINKTYPES[scenario.encapsulation]

    def fields(self, record: int) -> dict[str, Any]:
        return ibwire.parse(self.frames[record - 1][1]).fields()

    def find(self, **match: Any) -> list[int]:
        """Records whose fields have these values (``bth_psn=5`` for bth.psn)."""
        want = {k.replace("_", ".", 1): v for k, v in match.items()}
        return [i + 1 for i, (_, f) in enumerate(self.frames)
                if all(ibwire.parse(f).fields().get(k) == v for k, v in want.items())]

    def rebuilt(self, record: int, **changes: Any) -> bytes:
        """Record ``record``'s frame with ``changes`` (``aeth_msn=3``), CRCs made right."""
        packet = ibwire.parse(self.frames[record - 1][1])
        fields = {k: v for k, v in packet.fields().items() if k not in DERIVED}
        fields.update({k.replace("_", ".", 1): v for k, v in changes.items()})
        return ibwire.build(packet.encapsulation, fields, packet.payload)

    def insert(self, after: int, frame: bytes, dt: int = 1) -> int:
        """Put ``frame`` after record ``after``, ``dt`` ns later; returns its record. Faults
        of the manifest on later records move down by one."""
        self.frames.insert(after, (self.frames[after - 1][0] + dt, frame))
        for fault in self.manifest["faults"]:
            if fault.get("record") is not None and fault["record"] > after:
                fault["record"] += 1
        return after + 1

    def remove(self, record: int) -> None:
        del self.frames[record - 1]
        for fault in self.manifest["faults"]:
            if fault.get("record") is not None and fault["record"] > record:
                fault["record"] -= 1

    def write(self, folder: str, name: str = "edited.pcap") -> str:
        path = os.path.join(folder, name)
        with PcapWriter(path, self.linktype, nanoseconds=True) as writer:
            for when, frame in self.frames:   # in list order: records as listed
                writer.write(frame, when)
        return path

"""Findings: what a target got wrong, one line each in ``DIR/findings.jsonl``, with a
one-packet repro pcap beside it.

A finding's signature is what went wrong, whatever the packet: the kind and the signal,
status or report (``crash|SIGSEGV``, ``exit|status 3``), or for a diff the field and the kind
of difference (``diff|bth.destqp|low 16 bits``, :func:`ibwire.fuzz.compare.difference`).
Findings are kept once per signature, with one repro; the other packets that showed it are
counted (``count``, ``opcodes``). Every write replaces
``findings.jsonl`` and the repro atomically (a reader never sees half a line or half a pcap).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from dataclasses import field as default
from pathlib import Path
from typing import Any

from ibwire.fuzz.generate import Example
from ibwire.pcap.writer import AtomicFile, PcapWriter

KINDS = ("crash", "exit", "sanitizer", "timeout", "diff")


def signature(kind: str, name: str, how: str = "") -> str:
    """``kind|name`` (a failure) or ``diff|field|kind of difference``."""
    return f"{kind}|{name}|{how}" if how else f"{kind}|{name}"


@dataclass
class Finding:
    kind: str
    signature: str
    field: str | None
    """The field of a diff; the signal, status or report of the other kinds."""
    expected: Any
    got: Any
    mode: str
    encapsulation: str
    opcode: int
    what: str
    frame: str
    """The repro frame, hex."""
    original_length: int
    """Length of the frame as generated, before shrinking."""
    difference: str = ""
    """The kind of difference of a diff (``low 16 bits``); empty for the other kinds."""
    count: int = 1
    """Packets that showed this signature (the repro's among them; a diff as the batch run
    showed it)."""
    opcodes: list[int] = default(default_factory=list)
    """The opcodes of those packets, sorted."""
    message: str = ""
    """What the target said as it failed: a ``python:`` target's exception (type and
    message), the last lines of a command's stderr; empty for a diff."""
    repro: str = ""
    """Path of the one-packet pcap, relative to the output directory."""
    command: str = ""
    seed: int = 0
    target: str = ""
    target_version: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=False)


def finding_for(kind: str, name: str, how: str, expected: Any, got: Any, example: Example,
                original_length: int, message: str = "") -> Finding:
    return Finding(kind, signature(kind, name, how), name, expected, got,
                   example.mode, example.encapsulation, example.opcode, example.what,
                   example.frame.hex(), original_length, message=message, difference=how,
                   opcodes=[example.opcode])


class FindingsDir:
    """``DIR/findings.jsonl`` and ``DIR/repro/*.pcap``."""

    def __init__(self, directory: str | os.PathLike[str], linktype: int) -> None:
        self.directory = Path(directory)
        self.linktype = linktype
        self.findings: list[Finding] = []
        self.signatures: dict[str, Finding] = {}
        self.dirty = False
        (self.directory / "repro").mkdir(parents=True, exist_ok=True)
        self._write_jsonl()

    def __contains__(self, sig: str) -> bool:
        return sig in self.signatures

    def repro_path(self, sig: str) -> Path:
        digest = hashlib.sha1(sig.encode()).hexdigest()[:12]
        kind = sig.split("|", 1)[0]
        return self.directory / "repro" / f"{kind}-{digest}.pcap"

    def add(self, finding: Finding, frames: list[bytes]) -> Path:
        """Keep ``finding`` with ``frames`` as its repro; the repro's path."""
        path = self.repro_path(finding.signature)
        with PcapWriter(path, self.linktype) as writer:
            for i, frame in enumerate(frames):
                writer.write(frame, 1_700_000_000_000_000_000 + i * 1000)
        finding.repro = os.path.relpath(path, self.directory)
        self.findings.append(finding)
        self.signatures[finding.signature] = finding
        self._write_jsonl()
        return path

    def seen(self, sig: str, opcode: int) -> None:
        """One more packet showed the kept finding ``sig`` (written by :meth:`flush`)."""
        finding = self.signatures[sig]
        finding.count += 1
        if opcode not in finding.opcodes:
            finding.opcodes = sorted([*finding.opcodes, opcode])
        self.dirty = True

    def flush(self) -> None:
        if self.dirty:
            self._write_jsonl()

    def _write_jsonl(self) -> None:
        out = AtomicFile(self.directory / "findings.jsonl")
        try:
            out.file.write("".join(f.to_json() + "\n" for f in self.findings).encode())
        except BaseException:
            out.abort()
            raise
        out.commit()
        self.dirty = False


def read_findings(directory: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    with open(Path(directory) / "findings.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)

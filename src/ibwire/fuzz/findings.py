"""Findings: what a target got wrong, one line each in ``DIR/findings.jsonl``, with a
one-packet repro pcap beside it.

A finding's signature is (kind, field or signal, opcode): ``crash|SIGSEGV|0x04``,
``diff|bth.psn|0x0a``. Findings are kept once per signature. Every write replaces
``findings.jsonl`` and the repro atomically (a reader never sees half a line or half a pcap).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ibwire.fuzz.generate import Example
from ibwire.pcap.writer import AtomicFile, PcapWriter

KINDS = ("crash", "exit", "sanitizer", "timeout", "diff")


def signature(kind: str, name: str, opcode: int) -> str:
    return f"{kind}|{name}|0x{opcode:02x}"


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


def finding_for(kind: str, name: str, expected: Any, got: Any, example: Example,
                original_length: int, message: str = "") -> Finding:
    return Finding(kind, signature(kind, name, example.opcode), name, expected, got,
                   example.mode, example.encapsulation, example.opcode, example.what,
                   example.frame.hex(), original_length, message)


class FindingsDir:
    """``DIR/findings.jsonl`` and ``DIR/repro/*.pcap``."""

    def __init__(self, directory: str | os.PathLike[str], linktype: int) -> None:
        self.directory = Path(directory)
        self.linktype = linktype
        self.findings: list[Finding] = []
        self.signatures: set[str] = set()
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
        self.signatures.add(finding.signature)
        self._write_jsonl()
        return path

    def _write_jsonl(self) -> None:
        out = AtomicFile(self.directory / "findings.jsonl")
        try:
            out.file.write("".join(f.to_json() + "\n" for f in self.findings).encode())
        except BaseException:
            out.abort()
            raise
        out.commit()


def read_findings(directory: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    with open(Path(directory) / "findings.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)

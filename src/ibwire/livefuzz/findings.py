"""A live fuzzing run's findings, one directory each, and ``findings.jsonl`` listing them.

``OUT/<id>/`` holds ``batch.pcap`` and ``batch.json`` (every packet sent since the last
healthy probe: the frames as sent and the shots they were rendered from, with the connection
they aimed at), ``repro.pcap`` and ``repro.json`` (the shrunk packets), ``console.txt`` (the
excerpt of the guest's console), and ``finding.json`` (kind, signature, kernel version,
figures, and the command that replays the repro into a fresh guest pair). A finding's
kinds: ``console`` (the kernel said WARNING, BUG, Oops ...), ``probe`` (an endpoint stopped
answering), ``tool`` (the scenario's tool exited with an error), ``counter`` (an rxe counter
no injected packet should move, moved). Files are written whole (written aside, renamed).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ibwire.livefuzz.shots import Shot
from ibwire.livefuzz.state import QpState
from ibwire.pcap.writer import PcapWriter

KINDS = ("console", "probe", "tool", "counter")


@dataclass
class LiveFinding:
    kind: str
    signature: str
    detail: str
    kernel: str = ""
    guest: str = ""
    batch_packets: int = 0
    repro_packets: int | None = None
    """Packets of the shrunk repro; None until shrunk (or when it did not reproduce)."""
    reproduced: bool | None = None
    """Whether replaying the batch into a fresh guest pair showed it again."""
    replayed_alone: bool | None = None
    trials: int = 0
    command: str = ""
    directory: str = ""
    seen: int = 1
    when: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ident(self) -> str:
        return f"{self.kind}-{hashlib.sha1(self.signature.encode()).hexdigest()[:10]}"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_frames(path: Path, frames: list[bytes]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with PcapWriter(tmp, 1) as writer:
        for i, frame in enumerate(frames):
            writer.write(frame, 1_700_000_000_000_000_000 + i * 1_000_000)
    os.replace(tmp, path)


def conn_json(conn: tuple[QpState, QpState]) -> list[dict[str, Any]]:
    return [q.as_dict() for q in conn]


def conn_from_json(data: list[dict[str, Any]]) -> tuple[QpState, QpState]:
    def one(d: dict[str, Any]) -> QpState:
        d = dict(d)
        for key in ("peer",):
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        return QpState(**d)
    return one(data[0]), one(data[1])


def shots_json(shots: list[Shot], conn: tuple[QpState, QpState],
               scenario: str) -> bytes:
    return (json.dumps({"scenario": scenario, "connection": conn_json(conn),
                        "shots": [s.as_json() for s in shots]}, indent=1) + "\n").encode()


def read_shots(path: str | os.PathLike[str]) -> tuple[str, tuple[QpState, QpState],
                                                      list[Shot]]:
    data = json.loads(Path(path).read_text())
    return (data["scenario"], conn_from_json(data["connection"]),
            [Shot.from_json(s) for s in data["shots"]])


class FindingsDir:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.findings: dict[str, LiveFinding] = {}
        self._write_index()

    def __contains__(self, signature: str) -> bool:
        return any(f.signature == signature for f in self.findings.values())

    def get(self, signature: str) -> LiveFinding | None:
        return next((f for f in self.findings.values() if f.signature == signature), None)

    def add(self, finding: LiveFinding, batch: list[Shot], frames: list[bytes],
            conn: tuple[QpState, QpState], scenario: str, console: str) -> Path:
        where = self.directory / finding.ident
        where.mkdir(parents=True, exist_ok=True)
        finding.directory = str(where)
        finding.batch_packets = len(batch)
        write_frames(where / "batch.pcap", frames)
        _atomic_write(where / "batch.json", shots_json(batch, conn, scenario))
        _atomic_write(where / "console.txt", console.encode())
        self.findings[finding.ident] = finding
        self.update(finding)
        return where

    def set_repro(self, finding: LiveFinding, shots: list[Shot], frames: list[bytes],
                  conn: tuple[QpState, QpState], scenario: str, command: str) -> None:
        where = Path(finding.directory)
        write_frames(where / "repro.pcap", frames)
        _atomic_write(where / "repro.json", shots_json(shots, conn, scenario))
        finding.repro_packets = len(shots)
        finding.command = command
        self.update(finding)

    def update(self, finding: LiveFinding) -> None:
        _atomic_write(Path(finding.directory) / "finding.json",
                      (json.dumps(asdict(finding), indent=1) + "\n").encode())
        self._write_index()

    def _write_index(self) -> None:
        lines = "".join(json.dumps(asdict(f)) + "\n" for f in self.findings.values())
        _atomic_write(self.directory / "findings.jsonl", lines.encode())

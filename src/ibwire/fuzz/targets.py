"""The parsers ``ibwire fuzz`` runs: any command, a Python callable, Wireshark's dissector.

Every target takes a batch of frames written as one capture (:func:`write_batch`) and
returns a :class:`Run`: how the run ended (a :class:`Failure`, or None) and, per packet, what
the target claims (a dict of ibwire field keys for commands and callables, a tshark
dissection for Wireshark). Comparing the claims is :mod:`ibwire.fuzz.compare`'s work.

A command runs in its own session with resource limits set in the child before it starts
(``resource.setrlimit``: CPU seconds, address space, no core file) and is killed with its
whole process group past the timeout.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ibwire.errors import IbwireError
from ibwire.fuzz.compare import Allowed, Diff, allowed, diffs, reference
from ibwire.fuzz.generate import Example
from ibwire.pcap import PcapWriter

#: Lines of a failed command's stderr kept as its message.
MESSAGE_LINES = 5

#: Lines of stderr that are a sanitizer's report (ASan, UBSan, MSan, LSan, TSan).
SANITIZER = re.compile(rb"^(==\d+==ERROR: \w+Sanitizer|.*: runtime error: |"
                       rb"WARNING: \w+Sanitizer)", re.M)


class TargetError(IbwireError):
    """The target could not be run at all (exit status 2)."""


@dataclass(frozen=True)
class Failure:
    """How a run ended badly: ``kind`` crash (``detail`` the signal's name), exit (its
    status), sanitizer (the report's first line) or timeout."""

    kind: str
    detail: str


@dataclass
class Run:
    failure: Failure | None
    claims: list[Any] = field(default_factory=list)
    """Per packet, in order (shorter when the target stopped early)."""
    stderr: str = ""
    message: str = ""
    """The target's own words on its failure (:meth:`CommandTarget.message`)."""
    cause: str = ""
    """What kind of failure, where the target says it in a stable form: a ``python:``
    target's exception type (part of the finding's signature)."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Reason -> packets the comparison could not judge (filled in by ``diffs``)."""


@dataclass(frozen=True)
class Limits:
    timeout_ms: int = 10_000
    memory_mb: int = 2048
    """Address-space limit of the child (0: none)."""


def write_batch(examples: Sequence[Example], path: str | os.PathLike[str],
                linktype: int) -> None:
    """The frames as a pcap of ``linktype`` (one microsecond apart)."""
    with PcapWriter(path, linktype) as writer:
        for i, example in enumerate(examples):
            writer.write(example.frame, 1_700_000_000_000_000_000 + i * 1000)


def _limit(limits: Limits) -> Callable[[], None]:
    def preexec() -> None:  # runs in the child, before exec
        cpu = max(1, -(-limits.timeout_ms // 1000) + 1)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limits.memory_mb:
            size = limits.memory_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
    return preexec


def run_command(argv: Sequence[str], limits: Limits) -> tuple[Failure | None, bytes, bytes]:
    """Run ``argv`` under ``limits``; its failure (or None), stdout and stderr."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=_limit(limits))
    except OSError as exc:
        raise TargetError(f"cannot run {shlex.join(argv)}: {exc.strerror or exc}") from exc
    try:
        out, err = proc.communicate(timeout=limits.timeout_ms / 1000)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return Failure("timeout", f"{limits.timeout_ms} ms"), out, err
    status = proc.returncode
    if status < 0:
        sig = -status
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else \
            str(sig)
        if sig == signal.SIGXCPU:
            return Failure("timeout", f"CPU limit ({name})"), out, err
        return Failure("crash", name), out, err
    report = SANITIZER.search(err)
    if report is not None:
        line = err[report.start():].split(b"\n", 1)[0].decode(errors="replace")
        return Failure("sanitizer", line[:200]), out, err
    if status != 0:
        return Failure("exit", str(status)), out, err
    return None, out, err


def json_lines(out: bytes) -> list[dict[str, Any]]:
    """One dict per line that holds a JSON object (a line that is not one: ``{}``)."""
    claims: list[dict[str, Any]] = []
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            value = {}
        claims.append(value if isinstance(value, dict) else {})
    return claims


class CommandTarget:
    """``CMD ... {pcap} ...``: one run per batch; JSON objects on stdout, one per packet."""

    kind = "command"

    def __init__(self, command: str | Sequence[str], linktype: int, limits: Limits) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not any("{pcap}" in a for a in self.argv):
            raise TargetError(f"the command has no {{pcap}}: {shlex.join(self.argv)}")
        self.linktype = linktype
        self.limits = limits
        self.version: str | None = None

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def check(self) -> None:
        """Raise TargetError when the target cannot run at all."""
        exe = self.argv[0]
        if os.sep not in exe and not _which(exe):
            raise TargetError(f"{exe}: command not found")

    def argv_for(self, pcap: str) -> list[str]:
        return [a.replace("{pcap}", pcap) for a in self.argv]

    def repro_command(self, pcap: str) -> str:
        return shlex.join(self.argv_for(pcap))

    def diffs(self, examples: Sequence[Example], run: Run,
              allow: Sequence[Allowed]) -> list[list[Diff]]:
        """Per packet, the claims that disagree with ibwire and are not allowed."""
        out = []
        for example, claims in zip(examples, run.claims, strict=False):
            ref = reference(example)
            out.append([d for d in diffs(ref, claims)
                        if allowed(allow, "diff", d.field, example, ref) is None])
        return out

    def run(self, examples: Sequence[Example]) -> Run:
        with tempfile.TemporaryDirectory(prefix="ibwire-fuzz-") as work:
            path = os.path.join(work, "batch.pcap")
            write_batch(examples, path, self.linktype)
            failure, out, err = run_command(self.argv_for(path), self.limits)
        text = err.decode(errors="replace")[-4000:]
        said = self.message(text) if failure is not None else ""
        return Run(failure, json_lines(out), text, said, self.cause(said))

    def cause(self, message: str) -> str:
        return ""  # a command's stderr holds values that change from packet to packet

    def message(self, stderr: str) -> str:
        """What a failed run said: the last lines of its stderr."""
        return "\n".join(stderr.strip().splitlines()[-MESSAGE_LINES:])[-1000:]


def _which(exe: str) -> bool:
    import shutil

    return shutil.which(exe) is not None


class PythonTarget(CommandTarget):
    """``python:MODULE:FUNCTION``: the callable runs in a child Python
    (:mod:`ibwire.fuzz.child`), one per batch, so that a crash cannot take ibwire down."""

    kind = "python"

    def __init__(self, spec: str, linktype: int, limits: Limits) -> None:
        parts = spec.split(":")
        if len(parts) != 3 or parts[0] != "python" or not all(parts[1:]):
            raise TargetError(f"{spec!r}: expected python:MODULE:FUNCTION")
        self.spec = spec
        super().__init__([sys.executable, "-m", "ibwire.fuzz.child", f"{parts[1]}:{parts[2]}",
                          "{pcap}"], linktype, limits)

    def message(self, stderr: str) -> str:
        """The exception that ended the child: the last line of its traceback, the type and
        message (``IndexError: index out of range``)."""
        lines = [line for line in stderr.strip().splitlines() if line[:1] not in ("", " ")]
        return lines[-1][:1000] if lines else ""

    def cause(self, message: str) -> str:
        """The exception's type (``IndexError``, ``struct.error``)."""
        name = message.split(":", 1)[0]
        return name if name.replace(".", "").replace("_", "").isalnum() else ""

    def check(self) -> None:
        failure, _out, err = run_command([*self.argv[:-1], "--check"], self.limits)
        if failure is not None:  # the child's one line (the last, whatever came before)
            lines = err.decode(errors="replace").strip().splitlines() or [
                f"the check ended with {failure.kind} {failure.detail}"]
            raise TargetError(f"{self.spec}: {lines[-1]}")


def make_target(spec: str, linktype: int, limits: Limits) -> Any:
    """The target ``--target`` names: "wireshark", "python:MODULE:FUNCTION" or a command."""
    if spec == "wireshark":
        from ibwire.fuzz.wireshark.target import WiresharkTarget

        return WiresharkTarget(linktype, limits)
    if spec.startswith("python:"):
        return PythonTarget(spec, linktype, limits)
    return CommandTarget(spec, linktype, limits)

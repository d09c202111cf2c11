"""The fuzzing loop: draw a batch, run the target once on it, compare, then isolate and
shrink each new finding and write it out.

A diff is per packet already; it is kept only when it reproduces with the packet alone. A
failure of the whole run (crash, exit, sanitizer, timeout) is bisected to the packet that
fails alone, and the rest of the batch is run again (up to :data:`RERUNS` times) so that one
crashing packet does not hide the others.
"""

from __future__ import annotations

import os
import shlex
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ibwire.errors import MalformedError
from ibwire.fuzz.compare import Allowed, Diff, allowed, difference, reference
from ibwire.fuzz.findings import Finding, FindingsDir, finding_for, signature
from ibwire.fuzz.generate import Example, Shape, draw_examples, strategy
from ibwire.fuzz.minimise import Budget, bisect, shrink
from ibwire.fuzz.targets import Failure, Run

RERUNS = 2
UNCONFIRMED = 3
"""Packets tried alone for a diff signature before it counts as state across packets."""
CHUNK = 20
"""Examples drawn per hypothesis run (and seed); a packet already sent is not sent again."""


class Target(Protocol):
    kind: str
    version: str | None

    def check(self) -> None: ...
    def run(self, examples: Sequence[Example]) -> Run: ...
    def diffs(self, examples: Sequence[Example], run: Run,
              allow: Sequence[Allowed]) -> list[list[Diff]]: ...
    def repro_command(self, pcap: str) -> str: ...


@dataclass(frozen=True)
class Config:
    mode: str = "all"
    seed: int = 0
    max_examples: int = 1000
    time_limit: float | None = None
    batch: int = 100
    shrink_runs: int = 100
    """Target runs spent shrinking one finding (0: keep the packet the bisection found)."""
    allow: tuple[Allowed, ...] = ()
    shape: Shape = field(default_factory=Shape)


def failure_name(failure: Failure) -> str:
    if failure.kind == "exit":
        return f"status {failure.detail}"
    if failure.kind == "sanitizer":
        words = failure.detail.split("Sanitizer: ", 1)
        return words[1].split()[0] if len(words) == 2 and words[1] else "report"
    if failure.kind == "timeout":
        return "timeout"
    return failure.detail


def observe(target: Target, examples: Sequence[Example], allow: Sequence[Allowed]
            ) -> tuple[Run, list[list[Diff]]]:
    run = target.run(examples)
    return run, target.diffs(examples, run, allow)


def allowed_failure(run: Run, example: Example, allow: Sequence[Allowed]) -> Failure | None:
    """The run's failure, unless the allow-list names it."""
    f = run.failure
    if f is None or allowed(allow, f.kind, failure_name(f), example, reference(example)):
        return None
    return f


Shown = tuple[Any, Any, str]
"""What a signature showed: (expected, got, the target's message)."""


def findings_alone(target: Target, example: Example, allow: Sequence[Allowed]
                   ) -> dict[str, Shown]:
    """Signature -> (expected, got, message) of what ``example`` shows when run alone."""
    run, per = observe(target, [example], allow)
    found: dict[str, Shown] = {}
    failure = allowed_failure(run, example, allow)
    if failure is not None:
        found[signature(failure.kind, failure_name(failure), run.cause)] = \
            (None, failure.detail, run.message)
    for d in per[0] if per else []:
        found[diff_signature(d)] = (d.expected, d.got, "")
    return found


def diff_signature(d: Diff) -> str:
    return signature("diff", d.field, difference(d.expected, d.got))


def replay(target: Target, repro: str | os.PathLike[str], finding: Mapping[str, Any],
           allow: Sequence[Allowed] = ()) -> dict[str, Shown]:
    """What the one-packet ``repro`` of ``finding`` (a findings.jsonl line) shows alone."""
    from ibwire.pcap import read_capture

    records = list(read_capture(repro))
    if len(records) != 1:
        raise MalformedError(f"{os.fspath(repro)}: {len(records)} packets, expected 1")
    example = Example(bytes(records[0].frame), records[0].link, finding["mode"],
                      finding["encapsulation"], finding["opcode"], finding["what"])
    return findings_alone(target, example, allow)


def repro_command(target: Target, repro: str | os.PathLike[str]) -> str:
    """The shell command that replays ``repro`` from any directory: the repro's absolute
    path, run in the directory the fuzzing ran in (``cd DIR && ...``), where the target's own
    relative paths and a ``python:`` target's module resolve."""
    return f"cd {shlex.quote(os.getcwd())} && " + \
        target.repro_command(os.path.abspath(repro))


@dataclass
class Summary:
    examples: int = 0
    runs: int = 0
    seconds: float = 0.0
    unconfirmed: int = 0
    """Diffs that did not reproduce with the packet alone (state across packets)."""
    findings: list[Finding] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    """Reason -> packets the target's comparison could not judge (not compared)."""


class Fuzzer:
    def __init__(self, target: Target, config: Config, out: FindingsDir,
                 progress: Callable[[Summary], None] | None = None) -> None:
        self.target = target
        self.config = config
        self.out = out
        self.progress = progress
        self.summary = Summary()
        self.start = time.monotonic()
        self.deadline = self.start + (config.time_limit if config.time_limit is not None
                                      else float("inf"))
        self.failed_alone: Counter[str] = Counter()
        """Signature -> packets on which it did not reproduce alone (tried up to UNCONFIRMED
        times: one signature groups packets of every opcode)."""
        self.alone: dict[bytes, dict[str, Shown]] = {}

    # -- running the target ------------------------------------------------------------
    def _run(self, examples: Sequence[Example]) -> tuple[Run, list[list[Diff]]]:
        self.summary.runs += 1
        return observe(self.target, examples, self.config.allow)

    def _failure(self, run: Run, example: Example) -> Failure | None:
        return allowed_failure(run, example, self.config.allow)

    def signatures(self, example: Example) -> tuple[set[str], dict[str, Any]]:
        """What ``example`` alone shows: signatures, and per signature (expected, got)."""
        found = self.alone.get(example.frame)
        if found is None:  # one run per packet, however many signatures it shows
            self.summary.runs += 1
            found = self.alone[example.frame] = findings_alone(self.target, example,
                                                               self.config.allow)
        return set(found), found

    # -- the loop ----------------------------------------------------------------------
    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def run(self) -> Summary:
        c = self.config
        found = strategy(c.mode, c.shape)
        number = 0
        seen: set[bytes] = set()
        while self.summary.examples < c.max_examples and not self.expired():
            count = min(c.batch, c.max_examples - self.summary.examples)
            batch: list[Example] = []
            for _ in range(3 + 3 * count // CHUNK):  # hypothesis mutates its last examples:
                chunk = draw_examples(found, min(CHUNK, count - len(batch)),  # a new seed
                                      c.seed * 1_000_003 + number)  # every CHUNK keeps variety
                number += 1
                batch += [e for e in chunk if e.frame not in seen]
                seen.update(e.frame for e in chunk)
                if len(batch) >= count:
                    break
            if not batch:
                break
            self.check_batch(batch)
            self.out.flush()
            self.summary.examples += len(batch)
            self.summary.seconds = time.monotonic() - self.start
            if self.progress is not None:
                self.progress(self.summary)
        self.summary.seconds = time.monotonic() - self.start
        return self.summary

    def check_batch(self, batch: list[Example], reruns: int = RERUNS) -> None:
        run, per = self._run(batch)
        self.summary.skipped.update(run.skipped)
        for example, ds in zip(batch, per, strict=False):
            for d in ds:
                sig = diff_signature(d)
                if sig in self.out:
                    self.out.seen(sig, example.opcode)
                elif self.failed_alone[sig] < UNCONFIRMED and not self.expired():
                    self.keep(example, sig)
        failure = run.failure
        if failure is None or self._failure(run, batch[0]) is None:
            return
        culprit = bisect(batch, lambda sub: self._fails(sub, failure.kind),
                         first_guess=len(run.claims))
        if culprit is None:
            sig = signature(failure.kind, failure_name(failure), run.cause)
            if sig in self.out:
                self.out.seen(sig, batch[0].opcode)
            else:
                self.record(finding_for(failure.kind, failure_name(failure), run.cause, None,
                                        failure.detail, batch[0], len(batch[0].frame),
                                        run.message),
                            [e.frame for e in batch])
            return
        sigs, _ = self.signatures(culprit)
        for sig in sigs:
            if sig.startswith("diff|"):
                continue
            if sig in self.out:
                self.out.seen(sig, culprit.opcode)
            elif not self.expired():
                self.keep(culprit, sig)
        rest = [e for e in batch if e is not culprit]
        if reruns and rest and not self.expired():
            self.check_batch(rest, reruns - 1)

    def _fails(self, examples: Sequence[Example], kind: str) -> bool:
        if self.expired():
            return False
        run, _ = self._run(examples)
        return run.failure is not None and run.failure.kind == kind

    def keep(self, example: Example, sig: str) -> None:
        """Confirm ``sig`` on ``example`` alone, shrink it, write the finding."""
        sigs, _ = self.signatures(example)
        if sig not in sigs:
            self.failed_alone[sig] += 1
            self.summary.unconfirmed += 1
            return
        budget = Budget(self.config.shrink_runs, self.deadline)
        small = shrink(example, lambda e: sig in self.signatures(e)[0], self.config.shape,
                       budget, self.config.seed) if self.config.shrink_runs else example
        sigs, values = self.signatures(small)
        if sig not in sigs:  # flaky: keep what was confirmed
            small = example
            sigs, values = self.signatures(small)
            values.setdefault(sig, (None, None, ""))
        kind, name, how = (sig.split("|") + [""])[:3]
        expected, got, message = values[sig]
        self.record(finding_for(kind, name, how, expected, got, small, len(example.frame),
                                message),
                    [small.frame])

    def record(self, finding: Finding, frames: list[bytes]) -> None:
        finding.seed = self.config.seed
        finding.target = getattr(self.target, "command", self.target.kind)
        finding.target_version = self.target.version
        path = self.out.repro_path(finding.signature)
        finding.command = repro_command(self.target, path)
        self.out.add(finding, frames)
        self.summary.findings.append(finding)

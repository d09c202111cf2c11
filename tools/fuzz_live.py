"""Fuzz Linux's soft-RoCE (rxe) and CM in the rig's QEMU guests from the wire (issue #34).

    sudo python tools/fuzz_live.py run --minutes 50 -o live-out       a campaign
    sudo python tools/fuzz_live.py replay live-out/ID/repro.json     a finding, into a fresh
                                                                     guest pair
    sudo python tools/fuzz_live.py shrink live-out/ID/batch.json \
         --signature 'bug|rxe_mr_copy' -o again                     shrink a batch again

``run`` boots two guests (tools/rxe_rig), keeps an rping connection running between them,
learns it from the bridge (QPNs, PSNs, MSNs, CM communication IDs) and injects batches of
packets drawn from :mod:`ibwire.livefuzz.shots` into its live QPs and into both guests' QP1
(CM MADs), CRCs right. After each batch: the consoles are scanned (WARNING, BUG, Oops,
refcount_t, general protection, soft lockup, hung task ...), a probe rping on a connection
of its own must succeed, the fuzzed rping must still run, and rxe's ``send_err`` and
``link_downed`` must not have moved. A problem is a finding: the batch is written, then
bisected and its packet shrunk by replaying into freshly booted guest pairs (``--trials``
bounds them; a one-packet repro has then been replayed alone, in a trial of its own); then
the campaign goes on in a fresh pair.
``summary.json`` has the figures (packets, kinds of lie, opcodes and CM attributes covered,
findings). ``--plant`` arms a guest-side trap (a packet-socket reader that writes a WARNING
to /dev/kmsg when a frame carrying ``IBWIRE-TRAP`` arrives) and hides one such packet in
the first batch: the plumbing's own test.

``--inflight RATE`` joins the guests through ``ibwire impair``'s forwarder instead of the
bridge and mutates that share of their RoCE frames in flight (:mod:`ibwire.livefuzz.hook`),
besides the injected batches (``--batch 0``: in flight only). Each mutation is kept as a
shot against the connection as it stood (:mod:`ibwire.livefuzz.retarget`), so a finding's
batch holds the packets injected *and* mutated since the last healthy probe, and shrinks
and replays the same way; ``summary.json`` counts them under ``inflight``.

A guest that dies under a batch (a panic) is a ``probe`` finding, and what its console
printed before it died is a ``console`` finding of its own (``bug|rxe_mr_copy``, say); a
report of another signature met while shrinking a finding is written as a finding too.
``shrink`` bisects and shrinks a finding's batch again, for its own or another signature
(more trials, a report the campaign saw only with the batch), into a new directory.
``IBWIRE_RIG_KERNEL=linux-image-...`` boots another Debian kernel package (a finding
checked against a newer kernel).

``replay`` boots a fresh pair, sets up the same scenario, renders the repro's packets
against the new connection (its QPNs, PSNs and CM IDs), writes them to a pcap and sends it
with ``ibwire replay -i br0 -`` (started beforehand, fed the pcap on its stdin the moment
it is rendered) inside the rig's namespace; exit status 1 when the finding
shows again, 0 when it does not.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ibwire.livefuzz.drawer import Drawer
from ibwire.livefuzz.findings import (
    FindingsDir,
    LiveFinding,
    read_shots,
    write_frames,
)
from ibwire.livefuzz.shots import ROLES, Coverage, Shot, render, shots
from ibwire.livefuzz.shrink import Trials, bisect_batch, shrink_shot
from ibwire.livefuzz.state import QpState
from rxe_rig.guest import GuestError
from rxe_rig.image import Image, build
from rxe_rig.live import (
    INJECT_MAC,
    TRAP_MARK,
    Consoles,
    ForwarderTap,
    LiveScenario,
    WireTap,
    planted_trap,
    silent_counters_moved,
)
from rxe_rig.rig import Rig

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = LiveScenario.name
T = TypeVar("T")
#: Seconds to wait for the fuzzed connection after its rping pair starts, and the starts
#: tried before the pair is given up for a fresh one.
CONNECT_WAIT, CONNECT_ATTEMPTS = 30.0, 3


@dataclass
class Problem:
    kind: str
    signature: str
    detail: str
    guest: str = ""
    console: str = ""


class Session:
    """A freshly booted guest pair with the live scenario running and the bridge tapped."""

    def __init__(self, image: Image, workdir: Path, plant: bool = False,
                 log: bool = False, inflight: float | None = None, seed: int = 0) -> None:
        self.rig = Rig(workdir=workdir, image=image, log=log,
                       join="bridge" if inflight is None else "impair")
        self.plant, self.log = plant, log
        self.inflight, self.seed = inflight, seed
        self.reconnects = 0
        self.tap: WireTap | None = None
        self.scenario: LiveScenario | None = None
        self.consoles: Consoles | None = None
        self.kernel = ""
        self.counters: dict[str, dict[str, int]] = {}
        self.first_counters: dict[str, dict[str, int]] = {}
        self._traffic = -1

    def __enter__(self) -> Session:
        self.rig.__enter__()
        try:
            self.tap = WireTap(self.rig.namespace) if self.inflight is None else \
                ForwarderTap(self.rig.namespace, self.inflight, self.seed)
            self.scenario = LiveScenario(self.rig)
            self.scenario.start()
            if self.plant:
                planted_trap(self.rig.guests[0])
            self._connect()
            self.kernel = self.scenario.kernel()
            self.consoles = Consoles(self.rig.guests)
            self.counters = self.scenario.counters()
            self.first_counters = self.counters
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.tap is not None:
            self.tap.close()
        self.rig.__exit__(None, None, None)

    def connection(self) -> tuple[QpState, QpState]:
        assert self.tap is not None and self.scenario is not None
        conn = self.tap.connection()
        if conn is None:
            self.restart_client()
            conn = self.tap.connection()
            assert conn is not None
        return conn

    def restart_client(self) -> None:
        """A new fuzzed rping client, and its connection learnt (the old one forgotten:
        it may have died without a DREQ on the wire)."""
        assert self.tap is not None and self.scenario is not None
        self._forget()
        self.scenario.restart_client()
        self._connect()

    def _forget(self) -> None:
        assert self.tap is not None
        with self.tap.lock:
            for qp in self.tap.state.qps.values():
                qp.closed = True

    def _connect(self) -> None:
        """Wait for the fuzzed connection, and start its rping pair anew when it does not
        come within :data:`CONNECT_WAIT` seconds. In flight, nothing is mutated until it is
        up: a connection whose first frames are lied to often dies before it is seen (the
        probes' connections are still set up through the mutator)."""
        assert self.tap is not None and self.scenario is not None
        self.tap.disarm()
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            try:
                self.tap.wait_connection(timeout=CONNECT_WAIT)
                self.tap.arm()
                return
            except GuestError as exc:
                if attempt == CONNECT_ATTEMPTS:
                    raise
                if self.log:
                    print(f"fuzz_live: {exc}; starting its rping pair again", file=sys.stderr)
            self.reconnects += 1
            self._forget()
            self.scenario.restart_client()

    def traffic(self) -> int:
        """Packets the fuzzed connection carried so far (both ways, as sniffed)."""
        assert self.tap is not None
        conn = self.tap.connection()
        return sum(q.packets_in for q in conn) if conn else -1

    def mark(self) -> None:
        """Remember the fuzzed connection's traffic (before a batch)."""
        self._traffic = self.traffic()

    def check(self, settle: float = 1.0) -> list[Problem]:
        """The oracles, after ``settle`` seconds: consoles, the fuzzed tool (ended, or its
        connection silent since :meth:`mark`), a probe, the counters no packet should
        move. A guest that dies or stops answering on the way is a ``probe`` problem, and
        its console is read once more: a panic's report is a ``console`` problem too."""
        assert self.scenario is not None and self.consoles is not None
        time.sleep(settle)
        found = self.console_problems()
        try:
            found += self._health(settle)
        except GuestError as exc:
            found.append(Problem("probe", "probe|control channel", str(exc)))
        time.sleep(0.3)  # the probe's own console lines, if any
        return found + self.console_problems()

    def _health(self, settle: float) -> list[Problem]:
        assert self.scenario is not None
        found = []
        ended = self.scenario.client_ended()
        if ended is not None and ended[0] == 0:  # a forged DREQ ended it cleanly: no error
            self.restart_client()
        elif ended is not None:
            status, said = ended
            last = said.splitlines()[-1] if said else ""
            found.append(Problem("tool", f"tool|rping|exit {status}|{_shape(last)}",
                                 f"rping client exited {status}: {said}",
                                 self.scenario.client.name))
        elif self.traffic() == self._traffic:
            # alive but silent: rping waits for a completion that never comes
            found.append(Problem("tool", "tool|rping|stalled",
                                 f"the fuzzed connection carried nothing for {settle:.1f} s "
                                 "while rping ran", self.scenario.client.name))
        ok, why = self.scenario.probe()
        if not ok:
            found.append(Problem("probe", "probe|" + _shape(why.split(":")[0]), why))
        after = self.scenario.counters()
        moved = silent_counters_moved(self.counters, after)
        if moved:
            found.append(Problem("counter", "counter|" + ",".join(
                sorted({m.split()[0].split(":")[1] for m in moved})), "; ".join(moved)))
        self.counters = after
        return found

    def console_problems(self) -> list[Problem]:
        """A ``console`` problem for each report the consoles printed since the last look."""
        if self.consoles is None:
            return []
        return [Problem("console", sign.signature, sign.line, guest, sign.excerpt)
                for guest, sign, _ in self.consoles.signs()]

    def shoot(self, send: Callable[[], T], settle: float = 1.0) -> tuple[list[Problem], T | None]:
        """``send()`` (packets going out), then the oracles (:meth:`check`): the problems,
        and what ``send`` returned. A GuestError on the way gives the problems behind it
        (:meth:`after_error`) and None, and goes on up where there are none (both guests
        alive and silent: the connection was lost)."""
        try:
            result = send()
            return self.check(settle), result
        except GuestError as exc:
            problems = self.after_error(exc)
            if not problems:
                raise
            return problems, None

    def after_error(self, exc: GuestError) -> list[Problem]:
        """The problems behind a GuestError met while sending a batch: what the consoles
        reported, and a ``probe`` problem when a guest is dead ([] when both live and
        said nothing: the connection was lost, which is no finding)."""
        time.sleep(0.5)  # a dying guest's last console lines
        found = self.console_problems()
        if any(not g.alive() for g in self.rig.guests):
            found.append(Problem("probe", "probe|control channel", str(exc)))
        return found


def _shape(text: str) -> str:
    """``text`` with its numbers blanked (a signature must not change with a PSN)."""
    import re
    return re.sub(r"0x[0-9a-fA-F]+|\d+", "N", text)[:80]


def aim(session: Session, shot: Shot) -> tuple[QpState, QpState]:
    """The connection to render ``shot`` against: for a response, once its end has a
    request outstanding."""
    assert session.tap is not None
    if shot.role == "response":
        found = session.tap.when_outstanding(shot.to)
        if found is not None:
            return found
    return session.connection()


def segments(batch: Sequence[Shot]) -> list[list[Shot]]:
    """``batch`` cut before each response: a response is rendered and sent at its own
    moment, when its end has a request outstanding."""
    out: list[list[Shot]] = []
    for shot in batch:
        if not out or shot.role == "response":
            out.append([])
        out[-1].append(shot)
    return out


class _Sender:
    """``ibwire replay -i br0 -`` in the rig's namespace, started ahead of need: it reads
    the capture from its stdin, so that packets leave the moment they are rendered (a
    response must meet an outstanding request, a window of milliseconds, far shorter than
    a Python start)."""

    def __init__(self, session: Session, pps: float) -> None:
        command = session.rig.namespace.command(
            [sys.executable, "-m", "ibwire.cli.main", "replay", "-i", "br0", "--pps",
             str(pps), "-"])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env=env)

    def send(self, pcap: bytes, warm: float) -> None:
        time.sleep(max(0.0, self.started + warm - time.monotonic()))
        _, err = self.process.communicate(pcap, timeout=60)
        if self.process.returncode != 0:
            raise GuestError(f"ibwire replay failed ({self.process.returncode}): "
                             f"{err.decode().strip()}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def replay_into(session: Session, batch: Sequence[Shot], out: Path, pps: float = 200.0,
                warm: float = 2.0) -> list[bytes]:
    """Render ``batch`` against the session's connection and send it with ``ibwire replay
    -i br0 -`` inside the rig's namespace, one replay per :func:`segments` part (each
    started while the one before is sent); every frame sent is also written to ``out``."""
    assert session.tap is not None
    parts = segments(batch)
    senders = [_Sender(session, pps)]
    frames: list[bytes] = []
    try:
        for i, part in enumerate(parts):
            if i + 1 < len(parts):
                senders.append(_Sender(session, pps))
            time.sleep(max(0.0, senders[i].started + warm - time.monotonic()))
            conn = aim(session, part[0])
            rendered = [render(s, conn, session.tap.mac) for s in part]
            one = out.with_name(f".{out.name}.{i}")
            write_frames(one, rendered)
            senders[i].send(one.read_bytes(), warm)
            one.unlink()
            frames += rendered
    finally:
        for sender in senders:
            sender.kill()
    write_frames(out, frames)
    return frames


def inject(session: Session, batch: Sequence[Shot], gap: float,
           frames: list[bytes] | None = None) -> list[bytes]:
    """Send ``batch`` through the session's tap, each shot rendered when it goes (as the
    campaign sends them); the frames sent, appended to ``frames`` when given (so that a
    batch cut short by a dying guest still says what went out)."""
    assert session.tap is not None
    frames = [] if frames is None else frames
    for shot in batch:
        frames.append(render(shot, aim(session, shot), session.tap.mac))
        session.tap.send(frames[-1:], gap)
    return frames


def same(problem: Problem, signature: str) -> bool:
    if signature.startswith("probe|"):
        return problem.kind == "probe"
    return problem.signature == signature


class Trial:
    """Replaying shots into fresh guest pairs, each a trial: the shots are sent as the
    campaign sent them (through the tap, each rendered as it goes, 5 ms apart), up to
    ``repeats`` times into the pair (a finding that needs the connection in one state, a
    request outstanding, may miss it once)."""

    def __init__(self, image: Image, workdir: Path, plant: bool, signature: str,
                 log: bool = False, repeats: int = 3) -> None:
        self.image, self.workdir, self.plant = image, workdir, plant
        self.signature = signature
        self.repeats = repeats
        self.log = log
        self.count = 0
        self.others: dict[str, tuple[Problem, list[Shot], list[bytes], str]] = {}
        """Console reports of another signature met in a trial (a trial's packets can
        crash a guest the campaign only saw warn): signature -> (problem, the trial's
        packets, the frames sent, the guests' consoles)."""

    def __call__(self, batch: Sequence[Shot]) -> bool:
        self.count += 1
        where = self.workdir / f"trial{self.count}"
        where.mkdir(parents=True, exist_ok=True)
        hit = False
        try:
            with Session(self.image, where / "guests", self.plant) as session:
                for attempt in range(self.repeats):  # a race may need another go
                    session.mark()
                    sent: list[bytes] = []
                    try:
                        problems, _ = session.shoot(partial(inject, session, batch, 1 / 200,
                                                            sent))
                    finally:
                        write_frames(where / f"sent{attempt + 1}.pcap", sent)
                    hit = any(same(p, self.signature) for p in problems)
                    self._keep_others(problems, batch, sent, session)
                    if hit or any(p.kind == "probe" for p in problems):
                        break
        except GuestError as exc:
            print(f"  trial {self.count}: {exc}", file=sys.stderr)
            return False
        if self.log:
            print(f"  trial {self.count}: {len(batch)} packets -> "
                  f"{'reproduced' if hit else 'not reproduced'}", flush=True)
        return hit

    def _keep_others(self, problems: list[Problem], batch: Sequence[Shot],
                     sent: list[bytes], session: Session) -> None:
        for p in problems:
            if p.kind == "console" and not same(p, self.signature) and \
                    p.signature not in self.others:
                consoles = "\n".join(f"==> {g.name} <==\n{g.console.read_text(errors='replace')}"
                                      for g in session.rig.guests if g.console.exists())
                self.others[p.signature] = (p, list(batch)[:len(sent)], list(sent), consoles)
                if self.log:
                    print(f"  trial {self.count}: also {p.signature}", flush=True)


@dataclass
class Figures:
    coverage: Coverage = field(default_factory=Coverage)
    batches: int = 0
    sessions: int = 0
    tool_restarts: int = 0
    reconnects: int = 0
    """rping pairs started again because their connection did not come up in time."""
    trials: int = 0
    frames_sent: int = 0
    frames_refused: int = 0
    inflight_frames: int = 0
    """RoCE frames the in-flight mutator saw (--inflight)."""
    inflight_mutated: int = 0
    inflight_unkept: int = 0
    """Mutations that could not be kept as a shot (no connection known yet: the CM
    exchange that sets it up; not RoCEv2 over untagged IPv4)."""
    counters: dict[str, int] = field(default_factory=dict)
    """rxe hw_counters moved over all sessions, both guests together."""
    seconds: float = 0.0
    problems: dict[str, int] = field(default_factory=dict)


def shrink_finding(finding: LiveFinding, batch: list[Shot], conn: tuple[QpState, QpState],
                   mac: str, image: Image, out: FindingsDir, plant: bool, trials: int,
                   deadline: float, log: bool, repeats: int = 3) -> Trial:
    """Bisect and shrink ``finding``'s batch by trials in fresh pairs; the trials made (their
    count, and the other reports they met)."""
    work = Path(tempfile.mkdtemp(prefix="ibwire-live-trials-"))
    trial = Trial(image, work, plant, finding.signature, log, repeats)
    bound = Trials(trials)

    alone: set[str] = set()  # the shots that showed it sent alone into a fresh pair

    def reproduces(part: Sequence[Shot]) -> bool:
        if time.monotonic() > deadline:
            return False
        hit = trial(part)
        if hit and len(part) == 1:
            alone.add(part[0].dumps())
        return hit

    part = bisect_batch(batch, reproduces, bound)
    if part is not None:
        finding.reproduced = True
    elif bound.left > 0 and len(batch) > 1:  # several packets together, or not at all?
        bound.spend()
        finding.reproduced = reproduces(batch)
    repro = part or batch
    if part is not None and len(part) == 1:
        repro = [shrink_shot(part[0], reproduces, bound)]
        # the packet found showed it alone in a trial of its own (bisect's or the shrink's
        # last): no boot spent to see that again
        finding.replayed_alone = repro[0].dumps() in alone or (
            time.monotonic() < deadline and trial(repro))
    finding.trials = trial.count
    repro_path = Path(finding.directory) / "repro.json"
    command = (f"sudo python tools/fuzz_live.py replay {shlex.quote(str(repro_path))}"
               + (" --plant" if plant else ""))
    out.set_repro(finding, list(repro), [render(s, conn, mac) for s in repro], conn,
                  SCENARIO, command)
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return trial


def marked_shot() -> Shot:
    """The planted fault's packet: a SEND ONLY into guest 1's QP carrying the trap's mark."""
    from ibwire.livefuzz.shots import Ref
    return Shot("request", 0, "planted", {"bth.opcode": 0x04, "bth.psn": Ref("recv_psn", 7),
                                          "bth.se": 1},
                b"\x00" * 8 + TRAP_MARK + b"\x00" * 13)


def campaign(args: argparse.Namespace) -> dict:
    out = FindingsDir(args.out)
    image = build(log=args.verbose)
    figures = Figures()
    start = time.monotonic()
    deadline = start + args.minutes * 60
    roles = tuple(args.roles.split(",")) if args.roles else ROLES
    drawer = Drawer(args.seed)
    planted = args.plant
    kernel = ""
    gap = 1.0 / args.rate if args.rate else 0.0
    work = Path(tempfile.mkdtemp(prefix="ibwire-live-"))
    try:
        while time.monotonic() < deadline - 60:
            figures.sessions += 1
            try:
                session_cm = Session(image, work / f"session{figures.sessions}", args.plant,
                                     log=args.verbose, inflight=args.inflight,
                                     seed=args.seed + figures.sessions)
                session = session_cm.__enter__()
            except GuestError as exc:
                print(f"fuzz_live: session failed to start: {exc}", file=sys.stderr)
                time.sleep(5)
                continue
            kernel = kernel or session.kernel
            restart = False
            flight = 0  # in-flight mutations already in a batch
            try:
                while not restart and time.monotonic() < deadline - 30:
                    if args.max_batches and figures.batches >= args.max_batches:
                        break
                    assert session.tap is not None and session.scenario is not None
                    try:
                        conn = session.connection()
                    except GuestError as exc:  # the scenario cannot connect again
                        print(f"fuzz_live: {exc}; booting a fresh pair", file=sys.stderr)
                        figures.problems["lost"] = figures.problems.get("lost", 0) + 1
                        break
                    batch = [drawer.draw(shots(conn, session.tap.mac, roles))
                             for _ in range(args.batch)]
                    if planted:
                        batch.insert(len(batch) // 2, marked_shot())
                        planted = False
                    session.mark()
                    frames: list[bytes] = []
                    try:
                        problems, _ = session.shoot(partial(inject, session, batch, gap,
                                                            frames), args.settle)
                    except GuestError as exc:  # a shot's lie ended the connection for good
                        print(f"fuzz_live: {exc} (mid-batch); booting a fresh pair",
                              file=sys.stderr)
                        figures.problems["lost"] = figures.problems.get("lost", 0) + 1
                        break
                    batch = batch[:len(frames)]  # what went out (all, unless a guest died)
                    figures.batches += 1
                    if isinstance(session.tap, ForwarderTap):  # and what was mutated
                        upto = session.tap.mutated
                        for shot, sent in session.tap.hook.since(flight, upto):
                            batch.append(shot)
                            frames.append(sent)
                        flight = upto
                    for shot in batch:
                        figures.coverage.add(shot)
                    for problem in problems:
                        figures.problems[problem.kind] = figures.problems.get(
                            problem.kind, 0) + 1
                    restart = _handle(problems, batch, frames, conn, session, out, figures,
                                      image, args, deadline, kernel)
                    # the figures so far (of the sessions ended), whatever ends the run
                    write_summary(args, figures, out, kernel, start)
                    if args.verbose:
                        print(f"fuzz_live: batch {figures.batches}: {len(batch)} packets "
                              f"({figures.coverage.packets} in all), "
                              f"{len(problems)} problems, {len(out.findings)} findings",
                              flush=True)
                if args.max_batches and figures.batches >= args.max_batches:
                    break
            finally:
                if session.tap is not None:
                    figures.frames_sent += session.tap.sent
                    figures.reconnects += session.reconnects
                    figures.frames_refused += session.tap.refused
                if isinstance(session.tap, ForwarderTap):
                    figures.inflight_frames += session.tap.mutator.frames
                    figures.inflight_mutated += session.tap.mutated
                    figures.inflight_unkept += session.tap.hook.shots.count(None)
                for guest, values in session.counters.items():
                    for name, value in values.items():
                        moved = value - session.first_counters.get(guest, {}).get(name, value)
                        figures.counters[name] = figures.counters.get(name, 0) + moved
                session_cm.__exit__(None, None, None)
    finally:
        drawer.close()
        subprocess.run(["rm", "-rf", str(work)], check=False)
        if sys.exc_info()[0] is not None:  # the figures so far, whatever ended the run
            write_summary(args, figures, out, kernel, start)
    return write_summary(args, figures, out, kernel, start)


def write_summary(args: argparse.Namespace, figures: Figures, out: FindingsDir,
                  kernel: str, start: float) -> dict:
    """``OUT/summary.json``: the campaign's figures and findings; the summary."""
    figures.seconds = time.monotonic() - start
    summary = {"seconds": round(figures.seconds, 1), "kernel": kernel,
               "batches": figures.batches, "sessions": figures.sessions,
               "tool_restarts": figures.tool_restarts, "reconnects": figures.reconnects,
               "trials": figures.trials,
               "frames_sent": figures.frames_sent, "frames_refused": figures.frames_refused,
               "inflight": None if args.inflight is None else {
                   "rate": args.inflight, "frames": figures.inflight_frames,
                   "mutated": figures.inflight_mutated, "unkept": figures.inflight_unkept},
               "rxe_counters_moved": dict(sorted(figures.counters.items())),
               "problems": figures.problems, **figures.coverage.as_dict(),
               "findings": [{"id": f.ident, "kind": f.kind, "signature": f.signature,
                             "seen": f.seen, "batch_packets": f.batch_packets,
                             "repro_packets": f.repro_packets,
                             "replayed_alone": f.replayed_alone, "command": f.command}
                            for f in out.findings.values()]}
    (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _handle(problems: list[Problem], batch: list[Shot], frames: list[bytes],
            conn: tuple[QpState, QpState], session: Session, out: FindingsDir,
            figures: Figures, image: Image, args: argparse.Namespace, deadline: float,
            kernel: str) -> bool:
    """Record the problems; True when the session must be replaced by a fresh one."""
    if not problems:
        return False
    assert session.tap is not None and session.scenario is not None
    # a dead endpoint needs fresh guests; a known warning (WARN_ON_ONCE fires once a boot)
    # does not stop the fuzzing of the live pair
    restart = any(p.kind == "probe" for p in problems)
    new: list[tuple[LiveFinding, Problem]] = []
    for problem in problems:
        known = out.get(problem.signature)
        if known is not None:
            known.seen += 1
            out.update(known)
            continue
        finding = LiveFinding(problem.kind, problem.signature, problem.detail, kernel,
                              problem.guest, when=time.time())
        where = out.add(finding, batch, frames, conn, SCENARIO,
                        problem.console or problem.detail)
        for guest in session.rig.guests:  # the whole consoles, for what led up to it
            if guest.console.exists():
                (where / f"{guest.name}-console.log").write_bytes(guest.console.read_bytes())
        new.append((finding, problem))
    if not restart and any(p.kind == "tool" for p in problems):
        try:
            session.restart_client()
        except GuestError:
            restart = True
        figures.tool_restarts += 1
    for finding, problem in new:
        if problem.kind == "tool" and not args.shrink_tools:
            continue
        if args.trials <= 0 or (args.shrink_match and args.shrink_match not in
                                finding.signature):
            continue
        session.__exit__(None, None, None)  # the trials boot pairs of their own
        restart = True
        trial = shrink_finding(finding, batch, conn, session.tap.mac, image, out,
                               args.plant, args.trials, deadline - 20, args.verbose,
                               args.repeats)
        figures.trials += trial.count
        record_others(trial, finding, conn, out, kernel)
    return restart


def record_others(trial: Trial, finding: LiveFinding, conn: tuple[QpState, QpState],
                  out: FindingsDir, kernel: str) -> None:
    """A finding for each report of another signature that ``trial``'s pairs printed while
    shrinking ``finding`` (unless it is known already): its trial's packets as its batch."""
    for other, shots_sent, sent, consoles in trial.others.values():
        if out.get(other.signature) is None:
            met = LiveFinding(other.kind, other.signature,
                              f"{other.detail} (met while shrinking {finding.ident})",
                              kernel, other.guest, when=time.time())
            where = out.add(met, shots_sent, sent, conn, SCENARIO, other.console)
            (where / "trial-consoles.log").write_text(consoles)


def shrink(args: argparse.Namespace) -> int:
    """Shrink a finding's batch again (more trials, another signature) into a findings
    directory of its own; the batch's own directory is left as it is."""
    scenario, conn, batch = read_shots(args.batch)
    if scenario != SCENARIO:
        print(f"fuzz_live: {args.batch} was made with scenario {scenario!r}, not {SCENARIO!r}",
              file=sys.stderr)
        return 2
    told = Path(args.batch).with_name("finding.json")
    before = json.loads(told.read_text()) if told.exists() else {}
    signature = args.signature or before.get("signature")
    if not signature:
        print(f"fuzz_live: no finding.json beside {args.batch}: say --signature",
              file=sys.stderr)
        return 2
    kind = signature.split("|")[0]
    kind = kind if kind in ("probe", "tool", "counter") else "console"
    out = FindingsDir(args.out)
    finding = LiveFinding(kind, signature, before.get("detail", signature),
                          before.get("kernel", ""), before.get("guest", ""), when=time.time())
    out.add(finding, batch, [render(s, conn, INJECT_MAC) for s in batch], conn, SCENARIO,
            before.get("detail", ""))
    trial = shrink_finding(finding, batch, conn, INJECT_MAC, build(log=args.verbose), out,
                           args.plant, args.trials, time.monotonic() + args.minutes * 60,
                           args.verbose, args.repeats)
    record_others(trial, finding, conn, out, finding.kernel)
    print(json.dumps({k: v for k, v in asdict(finding).items() if k != "extra"}, indent=1))
    return 1 if finding.reproduced else 0


def replay(args: argparse.Namespace) -> int:
    scenario, conn, batch = read_shots(args.repro)
    if scenario != SCENARIO:
        print(f"fuzz_live: {args.repro} was made with scenario {scenario!r}, not {SCENARIO!r}",
              file=sys.stderr)
        return 2
    image = build()
    work = Path(args.keep or tempfile.mkdtemp(prefix="ibwire-live-replay-"))
    with Session(image, work / "guests", args.plant) as session:
        for attempt in range(1, args.repeats + 1):
            sent = work / f"replayed{attempt}.pcap"
            session.mark()
            problems, frames = session.shoot(partial(replay_into, session, batch, sent))
            frames = frames or []  # none said sent when a guest died under them
            print(f"sent {len(frames)} packets (rendered against the fresh connection: "
                  f"{sent}); kernel {session.kernel}")
            if problems:
                break
    for p in problems:
        print(f"{p.kind}: {p.signature}: {p.detail}")
        if p.console:
            print("  " + p.console.replace("\n", "\n  "))
    if not problems:
        print("no finding: the guests stayed healthy")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/fuzz_live.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="a campaign")
    p.add_argument("--minutes", type=float, default=2.0)
    p.add_argument("-o", "--out", default="live-out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=40, help="packets between two probes")
    p.add_argument("--rate", type=float, default=200.0, help="packets per second")
    p.add_argument("--settle", type=float, default=1.0,
                   help="seconds between a batch and the checks")
    p.add_argument("--roles", help=f"comma-separated subset of {','.join(ROLES)}")
    p.add_argument("--trials", type=int, default=8,
                   help="fresh guest pairs spent shrinking each finding (0: none)")
    p.add_argument("--repeats", type=int, default=3,
                   help="times a trial sends its packets into its pair while nothing shows")
    p.add_argument("--shrink-match", metavar="TEXT",
                   help="shrink only the findings whose signature contains TEXT")
    p.add_argument("--shrink-tools", action="store_true",
                   help="also shrink findings where only the fuzzed rping exited")
    p.add_argument("--max-batches", type=int, default=0)
    p.add_argument("--inflight", type=float, metavar="RATE",
                   help="join the guests through ibwire impair's forwarder and mutate this "
                        "share of the RoCE frames in flight, besides the injected batches "
                        "(--batch 0: in flight only)")
    p.add_argument("--plant", action="store_true",
                   help="arm the planted fault and hide its packet in the first batch")
    p.add_argument("-v", "--verbose", action="store_true")
    p = sub.add_parser("shrink", help="shrink a finding's batch again, into a directory "
                                      "of its own")
    p.add_argument("batch", help="a finding's batch.json (its finding.json beside it gives "
                                 "the signature)")
    p.add_argument("-o", "--out", default="shrink-out")
    p.add_argument("--signature", help="the report to shrink for (e.g. bug|rxe_mr_copy)")
    p.add_argument("--trials", type=int, default=12)
    p.add_argument("--minutes", type=float, default=30.0, help="at most this long")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--plant", action="store_true", help="arm the planted fault first")
    p.add_argument("-v", "--verbose", action="store_true")
    p = sub.add_parser("replay", help="a repro into a fresh guest pair")
    p.add_argument("repro", help="a finding's repro.json (or batch.json)")
    p.add_argument("--plant", action="store_true", help="arm the planted fault first")
    p.add_argument("--keep", help="keep the consoles and the pcap sent here")
    p.add_argument("--repeats", type=int, default=3,
                   help="send the packets up to this many times while nothing shows")
    args = parser.parse_args(argv)
    try:
        if args.command == "replay":
            return replay(args)
        if args.command == "shrink":
            return shrink(args)
        summary = campaign(args)
    except GuestError as exc:
        print(f"fuzz_live: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    print(json.dumps({k: v for k, v in summary.items()}, indent=1))
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())

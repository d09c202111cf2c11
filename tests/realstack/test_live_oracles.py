"""The live campaign's oracles when a guest dies (tools/fuzz_live.py), without QEMU: a fake
pair whose console files the test writes. A guest that panics under a batch must give the
report its console printed as a ``console`` finding, besides the ``probe`` problem of the
dead guest; a lost connection between two live, silent guests is no finding."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import fuzz_live
from rxe_rig.guest import GuestError
from rxe_rig.live import Consoles

CRASH = """[   16.0755] BUG: kernel NULL pointer dereference, address: 0000000000000104
[   16.0759] #PF: supervisor read access in kernel mode
[   16.0764] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   16.0768] RIP: 0010:rxe_mr_copy+0x49/0x1a0 [rdma_rxe]
[   16.0787] Call Trace:
[   16.0795]  rxe_responder+0x1692/0x1cf0 [rdma_rxe]
[   16.0860] Kernel panic - not syncing: Fatal exception in interrupt
"""


class FakeGuest:
    def __init__(self, name: str, console: Path) -> None:
        self.name, self.console, self.dead = name, console, False
        console.write_text("[    1.0] rdma_rxe: loaded\n")

    def alive(self) -> bool:
        return not self.dead

    def panic(self) -> None:
        with open(self.console, "a") as f:
            f.write(CRASH)
        self.dead = True


class FakeScenario:
    """As LiveScenario answers with guest 2 dead: asking after its rping raises, the probe
    fails on the control channel."""

    def __init__(self, guests: list[FakeGuest]) -> None:
        self.client, self.guests = guests[1], guests

    def client_ended(self) -> None:
        if self.client.dead:
            raise GuestError("guest2: QEMU exited (no message)")
        return None

    def probe(self) -> tuple[bool, str]:
        if self.client.dead:
            return False, "control channel: guest2: QEMU exited (no message)"
        return True, ""

    def counters(self) -> dict[str, dict[str, int]]:
        return {}


def _session(tmp_path: Path) -> tuple[fuzz_live.Session, list[FakeGuest]]:
    guests = [FakeGuest(f"guest{i}", tmp_path / f"guest{i}.log") for i in (1, 2)]
    session = fuzz_live.Session.__new__(fuzz_live.Session)
    session.rig = SimpleNamespace(guests=guests)
    session.scenario = FakeScenario(guests)
    session.consoles = Consoles(guests)  # type: ignore[arg-type]
    session.tap = SimpleNamespace(connection=lambda: None)
    session.counters, session._traffic = {}, -2  # traffic moved since the mark
    return session, guests


def test_a_guest_dead_after_a_batch_gives_its_console_report_and_a_dead_probe(
        tmp_path: Path):
    session, guests = _session(tmp_path)
    guests[1].panic()
    problems = session.check(settle=0)
    assert {(p.kind, p.signature) for p in problems} == {
        ("probe", "probe|control channel"), ("console", "bug|rxe_mr_copy")}
    console = next(p for p in problems if p.kind == "console")
    assert console.guest == "guest2" and "rxe_responder" in console.console


def test_healthy_checks_find_nothing(tmp_path: Path):
    session, _ = _session(tmp_path)
    assert session.check(settle=0) == []


def test_an_error_mid_batch_is_a_finding_only_when_a_guest_died_or_reported(tmp_path: Path):
    session, guests = _session(tmp_path)
    lost = GuestError("no live connection on port 7174 seen on the bridge in 30 s")
    assert session.after_error(lost) == []  # both alive, nothing said: the connection
    guests[1].panic()
    problems = session.after_error(GuestError("guest2: QEMU exited"))
    assert [(p.kind, p.signature) for p in problems] == [
        ("console", "bug|rxe_mr_copy"), ("probe", "probe|control channel")]

"""The rig, once per session: the guest image built (or taken from the cache), two guests
booted, every scenario of ``tools/rxe_rig`` run once; the tests then read the outputs.

Skipped in one line where QEMU cannot run at all (no qemu-system-x86_64, not root, no
/dev/net/tun), unless ``IBWIRE_REQUIRE_RIG=1`` (CI), which makes that a failure. Set
``IBWIRE_RIG_OUT=DIR`` to keep the captures, counters and tool outputs in DIR, and
``IBWIRE_RIG_REUSE=DIR`` to test such a kept run again without booting (the live test, which
needs the rig up, is then skipped).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.corpus import ROOT

sys.path.insert(0, str(ROOT / "tools"))

from rxe_rig.rig import Rig, qemu_present
from rxe_rig.runner import Outcome, run
from rxe_rig.scenarios import SCENARIOS

#: The scenario during which `ibwire show -i` and `ibwire check -i` run on the bridge.
LIVE_SCENARIO = "rping"


@dataclass
class Live:
    """What the live commands printed, and their exit statuses."""

    show: subprocess.CompletedProcess
    check: subprocess.CompletedProcess


@dataclass
class Runs:
    outcomes: dict[str, Outcome]
    live: Live | None
    directory: Path
    timings: dict[str, float] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Outcome:
        return self.outcomes[name]


def ibwire_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ibwire.cli.main", *args]


def _reuse(directory: Path) -> Runs:
    outcomes = {}
    for name, scenario in SCENARIOS.items():
        record = json.loads((directory / name / "scenario.json").read_text())
        outcomes[name] = Outcome(scenario, directory / name, record["ok"], record)
    return Runs(outcomes, None, directory)


@pytest.fixture(scope="session")
def rig_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    if os.environ.get("IBWIRE_RIG_REUSE"):
        return _reuse(Path(os.environ["IBWIRE_RIG_REUSE"]))
    why = qemu_present()
    if why is not None:
        if os.environ.get("IBWIRE_REQUIRE_RIG") == "1":
            pytest.fail(f"the rxe rig cannot run ({why}) and IBWIRE_REQUIRE_RIG=1")
        pytest.skip(f"the rxe rig cannot run: {why} (IBWIRE_REQUIRE_RIG=1 makes this fail)")
    out = Path(os.environ.get("IBWIRE_RIG_OUT") or tmp_path_factory.mktemp("rig"))
    outcomes: dict[str, Outcome] = {}
    with Rig(workdir=out / "guests") as rig:
        timings = dict(rig.timings)
        for name, scenario in SCENARIOS.items():
            start = time.monotonic()
            if name == LIVE_SCENARIO:
                live, outcomes[name] = _live(rig, out)
            else:
                outcomes[name] = run(rig, scenario, out)
            timings[name] = time.monotonic() - start
    return Runs(outcomes, live, out, timings)


def _live(rig: Rig, out: Path) -> tuple[Live, Outcome]:
    """Run the live scenario with `ibwire show -i br0` and `ibwire check -i br0` capturing
    on the bridge inside the namespace; stop them with SIGINT (Ctrl-C) afterwards."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    procs = {verb: subprocess.Popen(rig.namespace.command(ibwire_command(verb, "-i", "br0")),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=env, start_new_session=True)
             for verb in ("show", "check")}
    time.sleep(3.0)  # both capturing before the traffic starts
    try:
        outcome = run(rig, SCENARIOS[LIVE_SCENARIO], out)
    finally:
        time.sleep(1.0)  # the last frames read behind the spool
        done = {}
        for verb, proc in procs.items():
            proc.send_signal(signal.SIGINT)
            try:
                stdout, stderr = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            done[verb] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return Live(done["show"], done["check"]), outcome

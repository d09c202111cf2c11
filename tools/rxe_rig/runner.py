"""Running one scenario on a booted rig, into ``OUT/<name>/``:

- ``full.pcap``: every frame on the bridge, whole (dropped ones included: see :mod:`faults`);
- ``to-guest1.pcap``, ``to-guest2.pcap``: what was delivered to each guest (its tap's
  outgoing side), in the order it arrived;
- ``headers.pcap``: the same cut at :data:`capture.SNAPLEN` bytes;
- ``server.txt``, ``client.txt``: the tools' output;
- ``counters.json``: both guests' rxe ``hw_counters`` before, after, and the difference;
- ``scenario.json``: what was asked (commands, faults, MTU, GIDs), who is who, and what
  happened (exit statuses, attempts, frames dropped by the rules, capture figures, seconds).

The capture starts before the counters are read and stops after they are read again, so
every packet the counters saw is in it. A scenario whose tool fails is run once more (rxe's
timers can misfire on a busy emulated machine); both attempts are recorded.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from . import faults as bridge
from .capture import SNAPLEN, Capture, cut, start_all, stop_all
from .guest import Guest, Result
from .rig import Rig
from .scenarios import Scenario

PERFTEST_PORT = 18515


@dataclass
class Outcome:
    scenario: Scenario
    directory: Path
    ok: bool
    record: dict

    @property
    def full(self) -> Path:
        return self.directory / "full.pcap"

    @property
    def headers(self) -> Path:
        return self.directory / "headers.pcap"

    def counters(self) -> dict:
        return json.loads((self.directory / "counters.json").read_text())


def run(rig: Rig, scenario: Scenario, out: Path, attempts: int = 2) -> Outcome:
    directory = out / scenario.name
    tries = []
    for attempt in range(1, attempts + 1):
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        record = _once(rig, scenario, directory)
        record["attempt"] = attempt
        tries.append({k: record[k] for k in ("status", "seconds")})
        if record["ok"] or record["unsupported"]:
            break
    record["attempts"] = tries
    (directory / "scenario.json").write_text(json.dumps(record, indent=1) + "\n")
    return Outcome(scenario, directory, record["ok"], record)


def _once(rig: Rig, scenario: Scenario, directory: Path) -> dict:
    server, client = rig.guests[0], rig.guests[1]
    started = time.monotonic()
    mtu = scenario.mtu or 1500
    for guest in (server, client):
        on, _ = bridge.netem_commands(scenario.faults, guest.index)
        setup = ([f"ip link set eth0 mtu {mtu}"] if scenario.mtu else []) + on
        if setup:
            guest.check("; ".join(setup))
    if scenario.mtu:
        time.sleep(0.5)  # rxe follows the netdev's MTU change through its notifier
    gids = [rig.gid_index(g, scenario.ipv6) for g in (server, client)]
    # rdma_cm resolves the address to the GID to use; perftest's own exchange (TCP) may stay
    # on IPv4 while -x picks the IPv6 GID
    address = server.addr6 if scenario.ipv6 and scenario.ready == "cm" else server.addr
    commands = scenario.commands(gids[0], gids[1], address)
    bridge.apply_bridge(rig.namespace, scenario.faults)
    capture = Capture(rig.namespace, directory / "full.pcap")
    delivered = [Capture(rig.namespace, directory / f"to-{g.name}.pcap", g.tap, True)
                 for g in (server, client)]
    start_all([capture, *delivered])
    try:
        before = rig.on_each(rig.counters)
        results = exchange(scenario, server, client, commands)
        after = rig.on_each(rig.counters)
    finally:
        figures, *to_guests = stop_all([capture, *delivered])
        figures["delivered"] = dict(zip((server.name, client.name), to_guests, strict=True))
        dropped = bridge.dropped(rig.namespace)
        bridge.remove_bridge(rig.namespace)
        for guest in (server, client):
            _, off = bridge.netem_commands(scenario.faults, guest.index)
            undo = off + (["ip link set eth0 mtu 1500"] if scenario.mtu else [])
            if undo:
                guest.run("; ".join(undo))
    cut_frames = cut(directory / "full.pcap", directory / "headers.pcap", SNAPLEN)
    (directory / "server.txt").write_text(results[0].output)
    (directory / "client.txt").write_text(results[1].output)
    counters = {g.name: {"before": b, "after": a, "delta": {k: a[k] - b.get(k, 0) for k in a}}
                for g, b, a in zip((server, client), before, after, strict=True)}
    (directory / "counters.json").write_text(json.dumps(counters, indent=1) + "\n")
    ok = all(r.ok for r in results)
    unsupported = bool(not ok and scenario.unsupported
                       and all(scenario.unsupported in r.output for r in results))
    return {
        "name": scenario.name, "summary": scenario.summary, "ok": ok,
        "unsupported": unsupported,
        "asked": {"server": commands[0], "client": commands[1],
                  "faults": scenario.faults.as_dict(), "mtu": mtu, "ipv6": scenario.ipv6,
                  "gid_index": {server.name: gids[0], client.name: gids[1]},
                  "nft_ruleset": scenario.faults.ruleset() if scenario.faults.on_bridge
                  else None},
        "guests": [{"name": g.name, "role": role, "ipv4": g.addr, "ipv6": g.addr6,
                    "mac": g.mac} for g, role in ((server, "server"), (client, "client"))],
        "status": {"server": results[0].status, "client": results[1].status},
        "nft_dropped": dropped, "capture": {**figures, "snaplen": SNAPLEN,
                                            "frames_cut": cut_frames},
        "accel": rig.accel, "seconds": round(time.monotonic() - started, 2),
    }


def exchange(scenario: Scenario, server: Guest, client: Guest,
             commands: tuple[str, str]) -> tuple[Result, Result]:
    """One run of ``scenario``'s tools: the server command started (and waited ready), then
    the client's; both results, server's first (when either fails, the scenario's tools
    still running in either guest are killed before the results are taken)."""
    ready = {"tcp": f"ss -Hltn 'sport = :{PERFTEST_PORT}' | grep -q {PERFTEST_PORT}",
             "cm": "rdma resource show cm_id | grep -q LISTEN", "wait": "sleep 2"}
    job = server.spawn(commands[0], ready=ready[scenario.ready])
    client_job = client.spawn(commands[1])
    client_result = client.wait(client_job, timeout=scenario.timeout)
    server_result = server.wait(job, timeout=30 if client_result.ok else 5)
    if not (client_result.ok and server_result.ok):
        for guest in (server, client):
            guest.kill_all(scenario.tools)
        if client_result.status == -1:
            client_result = client.wait(client_job, timeout=5)
        if server_result.status == -1:
            server_result = server.wait(job, timeout=5)
    return server_result, client_result


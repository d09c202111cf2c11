"""Faults: drops on the bridge (nftables, bridge family, forward chain) and netem in a guest.

Frames are captured on the bridge before the forward chain (a promiscuous bridge passes every
frame up to its own device as it enters, ``br_handle_frame_finish`` in Linux's
``net/bridge/br_input.c``), so a dropped frame is in the capture all the same; the rules'
counters say exactly how many were dropped.

- random loss: ``udp dport 4791 numgen random mod 10000 < N counter drop``, both directions;
- targeted drops: the k-th RoCE frame (0-based, in bridge order) among those matching an
  optional source address and BTH opcodes (``@th,64,8``: the byte after the 8-byte UDP
  header), counted by ``numgen inc``, which advances only for frames reaching it;
- netem: ``tc qdisc add dev eth0 root netem ...`` inside a guest (``sch_netem`` is in the
  image), removed after the run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from .netns import Namespace

TABLE = "ibrig"
ROCE_PORT = 4791


@dataclass(frozen=True)
class Drop:
    """Drop the ``nth`` (0-based) RoCE frames among those from ``source`` (an IPv4 address;
    any when None) with one of ``opcodes`` (any when empty)."""

    nth: tuple[int, ...]
    opcodes: tuple[int, ...] = ()
    source: str | None = None

    def rule(self) -> str:
        parts = [f"udp dport {ROCE_PORT}"]
        if self.source:
            parts.append(f"ip saddr {self.source}")
        if self.opcodes:
            parts.append("@th,64,8 { " + ", ".join(str(o) for o in self.opcodes) + " }")
        parts.append("numgen inc mod 16777216 { " + ", ".join(str(n) for n in self.nth) + " }")
        return " ".join(parts) + " counter drop"


@dataclass(frozen=True)
class Faults:
    loss_percent: float = 0.0
    drops: tuple[Drop, ...] = ()
    netem: tuple[tuple[int, str], ...] = field(default=())
    """(guest index, netem arguments), e.g. ``(2, "delay 2ms reorder 25% 50%")``."""

    @property
    def on_bridge(self) -> bool:
        return bool(self.loss_percent or self.drops)

    def ruleset(self) -> str:
        rules = [d.rule() for d in self.drops]
        if self.loss_percent:
            per_10k = round(self.loss_percent * 100)
            rules.append(f"udp dport {ROCE_PORT} numgen random mod 10000 < {per_10k} "
                         "counter drop")
        body = "\n".join(f"    {r}" for r in rules)
        return (f"table bridge {TABLE} {{\n  chain forward {{\n"
                f"    type filter hook forward priority 0; policy accept;\n{body}\n  }}\n}}\n")

    def as_dict(self) -> dict:
        return asdict(self)


def apply_bridge(namespace: Namespace, faults: Faults) -> None:
    remove_bridge(namespace)
    if faults.on_bridge:
        namespace.run(["nft", "-f", "-"], stdin=faults.ruleset())


def dropped(namespace: Namespace) -> list[int]:
    """Frames dropped by each rule, in the order of :meth:`Faults.ruleset`."""
    done = namespace.run(["nft", "-j", "list", "table", "bridge", TABLE], check=False)
    if done.returncode != 0:
        return []
    counts = []
    for item in json.loads(done.stdout)["nftables"]:
        rule = item.get("rule")
        if rule is None:
            continue
        for expr in rule["expr"]:
            if "counter" in expr:
                counts.append(int(expr["counter"]["packets"]))
    return counts


def remove_bridge(namespace: Namespace) -> None:
    namespace.run(["nft", "delete", "table", "bridge", TABLE], check=False)


def netem_commands(faults: Faults, guest: int) -> tuple[list[str], list[str]]:
    """The commands that set and unset this guest's netem."""
    on = [f"tc qdisc add dev eth0 root netem {args}" for g, args in faults.netem if g == guest]
    off = ["tc qdisc del dev eth0 root 2>/dev/null; true"] if on else []
    return on, off

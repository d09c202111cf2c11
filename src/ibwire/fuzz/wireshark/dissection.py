"""Running tshark on a capture file and flattening its JSON into comparable fields.

tshark runs once per file (``-r FILE -n -T json``, default preferences: what a user gets).
Its JSON nests each field under the subtree of the item it belongs to and repeats keys (two
``infiniband.reserved`` in one subtree, one ``vlan`` layer per tag), so it is read with an
``object_pairs_hook`` that keeps every pair, and flattened to *qualified keys*
``"<parent>/<field>"``: the parent is the enclosing subtree without its ``_tree`` suffix, or
the layer. ``infiniband.bth/infiniband.reserved`` (BTH byte 4) and
``infiniband.deth/infiniband.reserved`` are then different keys. Each key maps to the list of
its values in frame order (several VLAN tags give several values).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The layers of the IB transport packet and what carries it; later layers are what tshark
#: found inside the IB payload (IPoIB, RPC-over-RDMA ...).
IB_LAYER = "infiniband"
#: tshark's preferences are left at their defaults; only name resolution is off, so that
#: addresses come out as numbers.
TSHARK_ARGS = ("-n", "-T", "json")

Pairs = list[tuple[str, Any]]


def tshark_path() -> str | None:
    return shutil.which("tshark")


@dataclass
class Dissection:
    """What tshark shows for one frame."""

    number: int
    layers: tuple[str, ...]
    fields: dict[str, list[str]] = field(default_factory=dict)
    """Qualified key -> values, for the layers up to the IB layer and a ``data`` layer right
    after it (the IB payload handed to the raw-data dissector)."""
    inner: dict[str, list[str]] = field(default_factory=dict)
    """The same for protocols tshark found inside the IB payload, keys prefixed 'inner:'."""
    experts: list[str] = field(default_factory=list)
    """Names of the expert items tshark attached (``_ws.malformed.expert``,
    ``ip.ttl.too_small`` ...)."""

    @property
    def has_ib(self) -> bool:
        return IB_LAYER in self.layers

    @property
    def malformed(self) -> bool:
        return "_ws.malformed" in self.layers


def _flatten(pairs: Pairs, parent: str, out: dict[str, list[str]]) -> None:
    for key, value in pairs:
        if isinstance(value, list) and all(isinstance(v, tuple) for v in value) and value:
            child = key[:-len("_tree")] if key.endswith("_tree") else key
            _flatten(value, child, out)
        elif isinstance(value, list) and not value:
            out.setdefault(f"{parent}/{key}", []).append("")
        elif isinstance(value, list):  # a JSON array of plain values
            out.setdefault(f"{parent}/{key}", []).extend(str(v) for v in value)
        else:
            out.setdefault(f"{parent}/{key}", []).append(str(value))


def dissection_of(packet: Pairs) -> Dissection:
    source = dict(packet)["_source"]
    layers: Pairs = dict(source)["layers"]
    names = tuple(name for name, _ in layers)
    frame = dict(dict(layers).get("frame", []))
    result = Dissection(int(frame.get("frame.number", 0)), names)
    seen_ib = False
    previous = ""
    for name, value in layers:
        pairs = value if isinstance(value, list) else [(name, value)]
        flat: dict[str, list[str]] = {}
        _flatten(pairs, name, flat)
        if name == "frame":
            pass
        elif name.startswith("_ws."):
            result.experts.extend(_experts(flat) or [name])
        elif not seen_ib or (name == "data" and previous == IB_LAYER):
            _merge(flat, result.fields)
        else:
            _merge({f"inner:{k}": v for k, v in flat.items()}, result.inner)
        seen_ib = seen_ib or name == IB_LAYER
        previous = name
    # expert items sit inside a protocol's tree too (ip.ttl.too_small ...)
    result.experts.extend(_experts(result.fields))
    for key in [k for k in result.fields if k.startswith("_ws.")]:
        del result.fields[key]
    return result


_EXPERT_META = ("_ws.expert.message", "_ws.expert.group", "_ws.expert.severity")


def _experts(flat: dict[str, list[str]]) -> list[str]:
    """Names of the expert items in flattened fields (``ip.ttl.too_small`` ...)."""
    return [key.split("/", 1)[1] for key in flat
            if key.startswith("_ws.") and key.split("/", 1)[1] not in _EXPERT_META]


def _merge(flat: dict[str, list[str]], into: dict[str, list[str]]) -> None:
    for key, values in flat.items():
        into.setdefault(key, []).extend(values)


def _pairs(items: Pairs) -> Pairs:
    return items


def run_tshark(path: Path | str, extra: Sequence[str] = ()) -> list[Dissection]:
    """Every frame of ``path`` as tshark dissects it (one tshark process)."""
    exe = tshark_path()
    if exe is None:
        raise FileNotFoundError("tshark is not installed")
    proc = subprocess.run([exe, "-r", os.fspath(path), *TSHARK_ARGS, *extra],
                          capture_output=True, check=False)
    if proc.returncode != 0:
        raise TsharkError(os.fspath(path), proc.returncode, proc.stderr.decode(errors="replace"))
    return dissections_of(proc.stdout)


def dissections_of(output: bytes) -> list[Dissection]:
    """The frames of tshark's ``-T json`` output."""
    packets = json.loads(output or b"[]", object_pairs_hook=_pairs)
    return [dissection_of(p) for p in packets]


def run_many(paths: Iterable[Path | str], extra: Sequence[str] = (),
             workers: int = 2) -> dict[str, list[Dissection]]:
    """``run_tshark`` over several files, ``workers`` tshark processes at a time."""
    paths = [os.fspath(p) for p in paths]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(paths, pool.map(lambda p: run_tshark(p, extra), paths), strict=True))


class TsharkError(RuntimeError):
    """tshark refused a file (its exit status and message are kept)."""

    def __init__(self, path: str, status: int, stderr: str) -> None:
        lines = [line for line in stderr.splitlines() if "Running as user" not in line]
        super().__init__(f"tshark -r {path}: exit {status}: {' / '.join(lines)}")
        self.status = status
        self.stderr = "\n".join(lines)

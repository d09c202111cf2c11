"""The fault manifest the verdict reads: what was done to which frame of which queue pair.

It is the manifest ``ibwire gen --manifest`` writes (:mod:`ibwire.gen.run`), and the one
``ibwire impair`` writes in the same format with more fault kinds. Only these keys are read
(the rest, gen's counters included, is ignored):

- ``version`` 1; ``tap``: where the capture was taken, ``requester``, ``responder`` or
  ``switch`` (impair: ``switch``, every frame as it arrived, before any fault); default
  ``switch``.
- ``qps``: a list, one object per queue pair, numbered from 0 by its position:
  ``requester`` and ``responder`` each ``{"address": IP, GID or LID, "qpn": N}`` (the
  address may be null: any), ``transport`` (RC, UC, UD, XRC; default RC), ``mtu`` (the
  path MTU, which sizes a READ's response PSNs; default: learnt from the capture),
  ``start_psn`` (the first PSN the responder expects; default: the first request's).
- ``faults``: a list of objects: ``kind`` (:data:`KINDS`), ``qp`` (position in ``qps``),
  ``psn`` (the absolute PSN of the packet touched), ``record`` (the touched frame's record
  number in the capture, from 1; null when the capture does not hold it), and per kind
  ``timer`` (rnr: the RNR timer code), ``direction`` (``request`` or ``answer``: which way
  the frame touched went, for the kinds that go both ways; each kind has a default),
  ``original`` (dup: the record of the frame copied), ``with`` (reorder: the record of the
  frame it changed places with), ``delay_ns`` (delay), ``transmission`` (which sending of
  the PSN was touched, from 1; default 1).
- impair's spelling is read too: ``direction`` ``a2b``/``b2a`` (the queue pair's own
  ``direction`` is its requests'), ``tx`` for ``transmission``, a dup's ``records`` (the
  original, then the copies), a delay's ``us``, a reorder's ``by`` (frames that overtook it).
- ``cnp_interval_us``: the CNP pacing interval the notification points may apply (a CE
  mark within it of a CNP to the same host draws none); default 4.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ibwire.errors import IbwireError
from ibwire.transport.psn import PSN_MASK

#: Fault kinds and the way the frame touched went by default: gen's (drop, corrupt,
#: lose_ack, rnr, ecn, ecn_resp) and impair's (dup, reorder, delay; forged nak, cnp).
KINDS: dict[str, str] = {
    "drop": "request", "corrupt": "request", "lose_ack": "answer", "rnr": "answer",
    "ecn": "request", "ecn_resp": "answer", "dup": "request", "reorder": "request",
    "delay": "request", "nak": "answer", "cnp": "answer",
}
DIRECTIONS = ("request", "answer")
TAPS = ("requester", "responder", "switch")
MANIFEST_VERSION = 1


class ManifestError(IbwireError):
    """A manifest the verdict cannot read: not JSON, a key missing or of the wrong type."""


@dataclass(frozen=True)
class End:
    """One end of a queue pair: its address as ``ibwire qp`` reports it (None: any), QPN."""

    address: str | int | None
    qpn: int


@dataclass(frozen=True)
class Qp:
    index: int
    requester: End
    responder: End
    transport: str
    mtu: int | None = None
    start_psn: int | None = None


@dataclass(frozen=True)
class Fault:
    """One fault of the manifest; ``number`` is its position in it, from 1."""

    number: int
    kind: str
    qp: int
    psn: int
    record: int | None
    direction: str
    timer: int | None = None
    original: int | None = None
    swapped_with: int | None = None
    held_by: int | None = None
    delay_ns: int | None = None
    transmission: int = 1


@dataclass(frozen=True)
class Manifest:
    tap: str
    qps: tuple[Qp, ...]
    faults: tuple[Fault, ...]
    #: The CNP pacing the notification points may apply (``cnp_interval_us``, default 4).
    cnp_interval_ns: int = 4_000


def _int(entry: dict[str, Any], key: str, where: str, *, optional: bool = False,
         top: int | None = None) -> int | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (
            top is not None and value > top):
        bound = f" (0..{top})" if top is not None else ""
        raise ManifestError(f"{where}: {key} must be a whole number{bound}, not {value!r}")
    return value


def _end(entry: Any, where: str) -> End:
    if not isinstance(entry, dict):
        raise ManifestError(f"{where} must be an object with address and qpn")
    address = entry.get("address")
    if address is not None and (isinstance(address, bool)
                                or not isinstance(address, (str, int))):
        raise ManifestError(f"{where}.address must be an IP, a GID or a LID, not {address!r}")
    return End(address, _int(entry, "qpn", where, top=PSN_MASK) or 0)


def parse_manifest(data: Any) -> Manifest:
    """The manifest in ``data`` (the decoded JSON), checked; ManifestError says what is wrong."""
    if not isinstance(data, dict):
        raise ManifestError("a manifest is a JSON object with qps and faults")
    version = data.get("version", MANIFEST_VERSION)
    if version != MANIFEST_VERSION:
        raise ManifestError(f"manifest version {version!r}: this ibwire reads version "
                            f"{MANIFEST_VERSION}")
    tap = data.get("tap", "switch")
    if tap not in TAPS:
        raise ManifestError(f"tap {tap!r} is not one of {', '.join(TAPS)}")
    raw_qps, raw_faults = data.get("qps"), data.get("faults")
    if not isinstance(raw_qps, list) or not isinstance(raw_faults, list):
        raise ManifestError("a manifest needs a qps list and a faults list")
    qps = []
    for k, entry in enumerate(raw_qps):
        where = f"qps[{k}]"
        if not isinstance(entry, dict):
            raise ManifestError(f"{where} must be an object")
        transport = entry.get("transport", "RC")
        if transport not in ("RC", "UC", "UD", "XRC"):
            raise ManifestError(f"{where}.transport {transport!r} is not RC, UC, UD or XRC")
        mtu = _int(entry, "mtu", where, optional=True)
        if mtu is not None and mtu not in (256, 512, 1024, 2048, 4096):
            raise ManifestError(f"{where}.mtu {mtu} is not a path MTU (256 .. 4096)")
        qps.append(Qp(k, _end(entry.get("requester"), f"{where}.requester"),
                      _end(entry.get("responder"), f"{where}.responder"), transport, mtu,
                      _int(entry, "start_psn", where, optional=True, top=PSN_MASK)))
    faults = [_fault(n, entry, qps, raw_qps) for n, entry in enumerate(raw_faults, 1)]
    interval = data.get("cnp_interval_us", 4.0)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not (
            0 <= interval < 1e9):
        raise ManifestError(f"cnp_interval_us must be a time in microseconds, not {interval!r}")
    return Manifest(tap, tuple(qps), tuple(faults), round(interval * 1000))


def _direction(entry: dict[str, Any], kind: str, qp: dict[str, Any], where: str) -> str:
    """``request`` or ``answer``; impair names the way a frame went by its interfaces
    (``a2b``, ``b2a``): the queue pair's own ``direction`` is its requests'. A forged NAK,
    RNR NAK or CNP always goes to the requester, whatever frame triggered it."""
    direction = entry.get("direction", KINDS[kind])
    if direction in DIRECTIONS:
        return direction
    if not isinstance(direction, str):
        raise ManifestError(f"{where}: direction {direction!r} is not request or answer")
    if kind in ("nak", "rnr", "cnp"):
        return "answer"
    if isinstance(qp, dict) and qp.get("direction") is not None:
        return "request" if direction == qp["direction"] else "answer"
    raise ManifestError(f"{where}: direction {direction!r} is not request or answer (and "
                        "its queue pair says no direction of its requests)")


def _fault(n: int, entry: Any, qps: list[Qp], raw_qps: list[Any]) -> Fault:
    where = f"faults[{n - 1}]"
    if not isinstance(entry, dict):
        raise ManifestError(f"{where} must be an object")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise ManifestError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    qp = _int(entry, "qp", where)
    if qp is None or qp >= len(qps):
        raise ManifestError(f"{where}: qp {qp} names no queue pair (the manifest has "
                            f"{len(qps)})")
    record = _int(entry, "record", where, optional=True)
    original = _int(entry, "original", where, optional=True)
    copies = entry.get("records")     # impair's dup: the original, then its copies
    if kind == "dup" and isinstance(copies, list) and len(copies) > 1 and original is None:
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in copies):
            raise ManifestError(f"{where}: records must be record numbers, not {copies!r}")
        original, record = copies[0], copies[-1]
    delay_ns = _int(entry, "delay_ns", where, optional=True)
    if delay_ns is None and entry.get("us") is not None:     # impair's delay, in us
        delay_ns = (_int(entry, "us", where) or 0) * 1000
    transmission = _int(entry, "transmission", where, optional=True)
    if transmission is None:
        transmission = _int(entry, "tx", where, optional=True)
    return Fault(
        n, kind, qp, _int(entry, "psn", where, top=PSN_MASK) or 0, record,
        _direction(entry, kind, raw_qps[qp], where),
        timer=_int(entry, "timer", where, optional=True, top=31), original=original,
        swapped_with=_int(entry, "with", where, optional=True),
        held_by=_int(entry, "by", where, optional=True), delay_ns=delay_ns,
        transmission=transmission or 1)


def read_manifest(path: str | Path) -> Manifest:
    """The manifest in the JSON file at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"cannot read the manifest {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ManifestError(f"the manifest {path} is not JSON: {exc}") from exc
    return parse_manifest(data)

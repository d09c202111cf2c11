"""What the scanner must say about one frame, from ``ibwire.parse`` (the Construct layer)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np

from ibwire.dissect import parse
from ibwire.errors import IbwireError, NotInfinibandError
from ibwire.headers import ALL
from ibwire.headers.layout import _unshow
from ibwire.pcap.records import LINK_CODES
from ibwire.scan import program

#: parse()'s encapsulation names -> the scanner's (KIND_NAMES).
KINDS = {"rocev2_ipv4": "rocev2_ipv4", "rocev2_ipv6": "rocev2_ipv6", "rocev1": "rocev1",
         "ib_local": "ib_lrh", "ib_global": "ib_grh"}


def scan_one(scanner: Any, frame: bytes, link: str) -> dict[str, Any]:
    """The scanner's row for one frame, as Python values."""
    cols = scanner.scan_frames(frame, [0], [len(frame)], [LINK_CODES[link]])
    return {k: (v[0].tobytes() if v.ndim == 2 else v[0].item()) for k, v in cols.items()}


def column_value(row: dict[str, Any], key: str) -> int:
    value = row[key]
    return int.from_bytes(value, "big") if isinstance(value, bytes) else value


def header_mismatches(row: dict[str, Any], packet: Any) -> list[str]:
    """Fields of every header parse found (the outermost VLAN tag) that the row disagrees on,
    and the ``headers`` bits."""
    bad: list[str] = []
    seen: set[str] = set()
    for h in packet.headers:
        if h.name in seen or h.full_keys:  # inner VLAN tags: the columns hold the outermost;
            continue  # a MAD body (ibwire.mads) has no columns: the scanner stops before it
        seen.add(h.name)
        header = ALL[h.name]
        for name, value in h.values.items():
            key = header.key(name)
            want = _unshow(value, header.by_name[name], header.name)
            if column_value(row, key) != want:
                bad.append(f"{key}: scanner {column_value(row, key)} parse {want}")
    present = {program.SLOTS[i].name for i in range(len(program.SLOTS))
               if row["headers"] >> i & 1 and i not in program.VIEW_SLOTS}  # test_scan_views
    if present != seen:
        bad.append(f"headers: scanner {sorted(present)} parse {sorted(seen)}")
    return bad


def _mad_body_error(frame: bytes, link: str) -> bool:
    """True when the frame parses once MAD bodies are left undecoded: its error is in a MAD
    body, which the scanner does not read."""
    from ibwire import dissect
    from ibwire.mads import Body

    def skip(frame: bytes, offset: int, *args: Any) -> Body:
        return Body([], {}, [], offset)

    with mock.patch.object(dissect, "parse_body", skip):
        try:
            return parse(frame, link).error is None
        except IbwireError:
            return False


def compare(scanner: Any, frame: bytes, link: str) -> list[str]:
    """Every disagreement between the scanner's row and ``parse`` + ``crc.verify``."""
    row = scan_one(scanner, frame, link)
    try:
        packet = parse(frame, link)
    except NotInfinibandError:
        return [] if row["error"] == 1 else [f"parse: not IB; scanner error {row['error']}"]
    except IbwireError as exc:
        if row["error"] == 0 and _mad_body_error(frame, link):
            return []  # the scanner stops at the MAD and RMPP headers (docs/reference/mads.md)
        if row["error"] in (0, 1):
            return [f"parse raised {exc!r}; scanner error {row['error']}"]
        return []
    bad = header_mismatches(row, packet)
    if packet.encapsulation == "other":
        if row["error"] != 1:
            bad.append(f"parse: other traffic ({packet.unknown}); scanner error {row['error']} "
                       f"at {program.site_name(row['error.site'])}")
        return bad
    if packet.error is not None:  # broken, CRCs placed: the scanner says so, same verdicts
        if row["error"] == 0 and _mad_body_error(frame, link):
            pass  # the scanner stops at the MAD and RMPP headers (docs/reference/mads.md)
        elif row["error"] in (0, 1):
            bad.append(f"parse: {packet.error!r}; scanner error {row['error']}")
        return bad + _crc_mismatches(row, packet)
    if row["error"] != 0:
        bad.append(f"parse: {packet.encapsulation}; scanner error {row['error']} at "
                   f"{program.site_name(row['error.site'])} byte {row['error.offset']}")
        return bad
    want_kind = _kind(packet)
    kind = program.SCAN_KIND_NAMES[row["encapsulation"]]
    body = sum(h.length for h in packet.headers if h.full_keys)  # a MAD body: not scanned
    checks = {
        "encapsulation": (kind, want_kind),
        "offset.payload": (row["offset.payload"], packet.payload_offset - body),
        "payload.length": (row["payload.length"], packet.payload_length),
    }
    bad += [f"{k}: scanner {got} parse {want}" for k, (got, want) in checks.items() if got != want]
    return bad + _crc_mismatches(row, packet)


def _crc_mismatches(row: dict[str, Any], packet: Any) -> list[str]:
    """Where the CRCs are, their wire values and verdicts: the row against the packet."""
    checks = {
        "encapsulation": (program.SCAN_KIND_NAMES[row["encapsulation"]],
                          _kind(packet)),
        "offset.icrc": (row["offset.icrc"], -1 if packet.icrc_offset is None
                        else packet.icrc_offset),
        "offset.vcrc": (row["offset.vcrc"], -1 if packet.vcrc_offset is None
                        else packet.vcrc_offset),
    }
    if packet.icrc is not None:
        checks["icrc"] = (row["icrc"], int.from_bytes(packet.icrc, "little"))
    if packet.vcrc is not None:
        checks["vcrc"] = (row["vcrc"], int.from_bytes(packet.vcrc, "little"))
    verdict = packet.verify()
    checks["icrc_ok"] = (row["icrc_ok"], -1 if verdict.icrc_ok is None else int(verdict.icrc_ok))
    checks["vcrc_ok"] = (row["vcrc_ok"], -1 if verdict.vcrc_ok is None else int(verdict.vcrc_ok))
    return [f"{k}: scanner {got} parse {want}" for k, (got, want) in checks.items() if got != want]


def _kind(packet: Any) -> str:
    """The scanner's encapsulation name of a parsed packet."""
    if packet.encapsulation == "ib_raw":
        return "ib_raw" if packet.headers[0].values["lnh"] == 0 else "ib_ip"
    return KINDS[packet.encapsulation]


def rows_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[str]:
    """Columns on which two scans differ."""
    return [k for k in a if not np.array_equal(a[k], b[k])] + sorted(set(a) ^ set(b))

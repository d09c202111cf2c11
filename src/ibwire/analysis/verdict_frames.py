"""The frames of the manifest's queue pairs, read from the capture for the verdict.

One scan of the capture (:func:`ibwire.scan.scan_capture`) keeps, for each queue pair the
manifest names, its requests (to the responder's QPN, from the requester's address), its
answers (ACK, NAK, READ response, atomic ACK to the requester's QPN, from the responder's
address) and the CNPs to either QPN; and every CNP of the capture, to any QP (an endpoint
that never sends one does not implement congestion notification; one paced per IP pair or
port suppresses the CNPs of other QPs). Records are numbered from 1, as ``ibwire show``
and the manifest number them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ibwire.analysis.addresses import FIELDS as ADDRESS_FIELDS
from ibwire.analysis.addresses import LID_TAG, MAPPED, row_addresses
from ibwire.analysis.verdict_manifest import End, Manifest, ManifestError
from ibwire.crc._common import KIND_NAMES
from ibwire.pcap.source import Source
from ibwire.transport.opkinds import ACK, ATOMIC_ACK, CNP, KIND, READ_RESP, REQUEST

if TYPE_CHECKING:
    from ibwire.scan import ScanBatch

FIELDS = ("bth.opcode", "bth.destqp", "bth.psn", "bth.a", "aeth.syndrome", "aeth.msn",
          "atomicacketh.origremdt", "reth.dmalen", *ADDRESS_FIELDS)
#: The columns each kind of frame keeps, in this order.
COLUMNS = ("record", "t", "opcode", "psn", "ackreq", "syndrome", "msn", "original", "dmalen",
           "ecn", "icrc_ok", "rocev2")
#: The scanner's encapsulation codes of RoCEv2 (``ibwire.crc.KIND_NAMES``): ECN and CNPs
#: are RoCEv2's (IBA Annex A17).
ROCEV2 = tuple(KIND_NAMES.index(name) for name in ("rocev2_ipv4", "rocev2_ipv6"))
PSN_HALF = 1 << 23


def psn_delta(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray | int:
    """``a - b`` in 24-bit PSN space, from -2^23 to 2^23 - 1 (IBA 9.7.5.1.1's halves)."""
    return ((np.asarray(a, np.int64) - b + PSN_HALF) & 0xFFFFFF) - PSN_HALF


def address_words(address: str | int | None) -> tuple[int, int] | None:
    """``address`` as the two 64-bit words of :mod:`ibwire.analysis.addresses`."""
    if address is None:
        return None
    if isinstance(address, int):
        return int(LID_TAG), address
    try:
        ip = ipaddress.ip_address(address)
    except ValueError as exc:
        raise ManifestError(f"address {address!r} is not an IP address, a GID or a LID") from exc
    if ip.version == 4:
        return 0, MAPPED | int(ip)
    return int(ip) >> 64, int(ip) & ((1 << 64) - 1)


@dataclass
class Rows:
    """Frames of one kind, in capture order: a numpy array per name of :data:`COLUMNS`."""

    cols: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["record"]) if self.cols else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def after(self, record: int) -> int:
        """Index of the first row after record ``record``."""
        return int(np.searchsorted(self.cols["record"], record, side="right"))

    def at(self, record: int) -> int | None:
        """Index of the row of record ``record``, or None."""
        i = int(np.searchsorted(self.cols["record"], record))
        return i if i < len(self) and int(self.cols["record"][i]) == record else None


@dataclass
class QpFrames:
    requests: Rows
    answers: Rows
    cnps_to_requester: Rows
    cnps_to_responder: Rows


@dataclass
class CaptureFrames:
    qps: list[QpFrames]
    records: int
    #: Every CNP of the capture, to any QP: record, time, source and destination words.
    cnps: dict[str, np.ndarray]

    def sends_cnps(self, end: End) -> bool:
        """Whether any CNP of the capture comes from ``end``'s address (any address: any)."""
        return bool(self.cnps_between(end, None).any())

    def cnps_between(self, src: End, dst: End | None) -> np.ndarray:
        """Mask of the CNPs from ``src``'s address to ``dst``'s (None, or no address: any)."""
        ok = np.ones(len(self.cnps["record"]), bool)
        for end, hi, lo in ((src, "src_hi", "src_lo"), (dst, "dst_hi", "dst_lo")):
            words = address_words(end.address) if end is not None else None
            if words is not None:
                ok &= (self.cnps[hi] == np.uint64(words[0])) & (self.cnps[lo] == np.uint64(words[1]))
        return ok


def _matcher(src: End, dst: End) -> Callable[[tuple[np.ndarray, ...]], np.ndarray]:
    """Rows going from ``src`` to ``dst`` (an end without an address: any)."""
    a, b = address_words(src.address), address_words(dst.address)

    def match(words: tuple[np.ndarray, ...]) -> np.ndarray:
        ok = np.ones(len(words[0]), bool)
        if a is not None:
            ok &= (words[0] == np.uint64(a[0])) & (words[1] == np.uint64(a[1]))
        if b is not None:
            ok &= (words[2] == np.uint64(b[0])) & (words[3] == np.uint64(b[1]))
        return ok
    return match


def read_frames(source: Source, manifest: Manifest, count: int | None = None
                ) -> CaptureFrames:
    """The frames of ``manifest``'s queue pairs in the capture ``source`` (its first
    ``count`` records when given)."""
    parts: list[list[list[dict[str, np.ndarray]]]] = [[[] for _ in range(4)]
                                                      for _ in manifest.qps]
    forward = [_matcher(q.requester, q.responder) for q in manifest.qps]
    backward = [_matcher(q.responder, q.requester) for q in manifest.qps]
    cnps: list[dict[str, np.ndarray]] = []
    records = 0
    for batch in _scan(source, count):
        cols = batch.columns
        n = len(cols["record"])
        records += n
        ib = (cols["error"] == 0) & (cols["offset.bth"] >= 0)
        rows = np.flatnonzero(ib)
        if not len(rows):
            continue
        kind = KIND[cols["bth.opcode"][rows]]
        destqp = cols["bth.destqp"][rows].astype(np.int64)
        words = row_addresses(cols, rows)
        cnp = kind == CNP
        if cnp.any():
            cnps.append({"record": cols["record"][rows[cnp]].astype(np.int64) + 1,
                         "t": cols["timestamp_ns"][rows[cnp]].astype(np.int64),
                         **{name: w[cnp] for name, w in zip(
                             ("src_hi", "src_lo", "dst_hi", "dst_lo"), words, strict=True)}})
        answer = (kind == ACK) | (kind == READ_RESP) | (kind == ATOMIC_ACK)
        for q, qp in enumerate(manifest.qps):
            fwd, back = forward[q](words), backward[q](words)
            to_resp = destqp == qp.responder.qpn
            to_req = destqp == qp.requester.qpn
            for slot, sel in enumerate((fwd & to_resp & (kind == REQUEST),
                                        back & to_req & answer, back & to_req & cnp,
                                        fwd & to_resp & cnp)):
                if sel.any():
                    parts[q][slot].append(_columns(cols, rows[sel]))
    names = ("record", "t", "src_hi", "src_lo", "dst_hi", "dst_lo")
    every = {name: np.concatenate([c[name] for c in cnps]) if cnps else
             np.zeros(0, np.int64 if name in ("record", "t") else np.uint64) for name in names}
    return CaptureFrames([QpFrames(*(_join(p) for p in qp_parts)) for qp_parts in parts],
                         records, every)


def _scan(source: Source, count: int | None) -> Iterator[ScanBatch]:
    """The scanner's batches of ``source``, its first ``count`` records when given."""
    from ibwire.analysis import batches

    yield from batches(source, count, threads=1, fields=FIELDS)


def _columns(cols: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    return {"record": cols["record"][rows].astype(np.int64) + 1,
            "t": cols["timestamp_ns"][rows].astype(np.int64),
            "opcode": cols["bth.opcode"][rows].astype(np.int64),
            "psn": cols["bth.psn"][rows].astype(np.int64),
            "ackreq": cols["bth.a"][rows].astype(np.int64),
            "syndrome": cols["aeth.syndrome"][rows].astype(np.int64),
            "msn": cols["aeth.msn"][rows].astype(np.int64),
            "original": cols["atomicacketh.origremdt"][rows].astype(np.uint64),
            "dmalen": cols["reth.dmalen"][rows].astype(np.int64),
            "ecn": cols["ecn"][rows].astype(np.int64),
            "icrc_ok": cols["icrc_ok"][rows].astype(np.int64),
            "rocev2": np.isin(cols["encapsulation"][rows], ROCEV2).astype(np.int64)}


def _join(parts: list[dict[str, np.ndarray]]) -> Rows:
    if not parts:
        return Rows({name: np.zeros(0, np.uint64 if name == "original" else np.int64)
                     for name in COLUMNS})
    return Rows({name: np.concatenate([p[name] for p in parts]) for name in COLUMNS})

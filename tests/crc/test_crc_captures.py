"""The shared real captures (``tests/corpus.py``): every RoCE and IB frame verifies, the rest
is not_ib.

The expected counts come from the corpus's PROVENANCE.tsv (ib_roce_packets), which an
independent checker produced. Frames are read with scapy's raw readers; the ERF records of the
native IB capture are unwrapped here (16-byte ERF header plus extension headers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scapy.utils import RawPcapNgReader, RawPcapReader

from ibwire.crc._common import ERROR_NAMES
from tests import corpus

ROWS = corpus.provenance_rows()


def _erf_payload(record: bytes) -> bytes:
    """ERF record -> the InfiniBand frame: skip the 16-byte header and extension headers."""
    at, more = 16, record[8] & 0x80
    while more:
        more = record[at] & 0x80
        at += 8
    return record[at:]


def _frames(path: Path) -> tuple[list[bytes], str]:
    reader = RawPcapNgReader(str(path)) if path.suffix == ".pcapng" else RawPcapReader(str(path))
    with reader:
        records = [data for data, _ in reader]
    if getattr(reader, "linktype", 1) == 197:
        return [_erf_payload(r) for r in records], "infiniband"
    return records, "ethernet"


@pytest.mark.parametrize("row", corpus.params(list(ROWS)),
                         ids=lambda r: r["local_name"][:48] if r else "none")
def test_capture_verifies(crc, row):
    frames, link = _frames(corpus.capture(row["local_name"]))
    assert len(frames) == int(row["packets_total"])
    buf = b"".join(frames)
    lens = np.array([len(f) for f in frames], np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    got = crc.verify_batch(buf, offs, lens, link)
    roce = int(row["ib_roce_packets"])
    assert int((got.icrc_ok == 1).sum()) == roce
    assert not (got.icrc_ok == 0).any() and not (got.vcrc_ok == 0).any()
    assert {ERROR_NAMES[e] for e in got.error} <= {"ok", "not_ib"}
    if link == "infiniband":
        assert int((got.vcrc_ok == 1).sum()) == roce
    ok = np.flatnonzero(got.error == 0)
    for i in ok[:: max(1, len(ok) // 20)]:  # and per packet, on a sample
        assert crc.verify(frames[i], link).icrc_ok is True

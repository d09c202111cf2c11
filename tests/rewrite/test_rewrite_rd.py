"""``--qpmap`` maps DETH's source QP of Reliable Datagram packets (RDETH, then DETH: IBA 1.4
§9.3; specs/opcodes.tsv) as of UD ones, in every edit path: the per-packet editor
(``edit.edit_frame``, which native IB takes), the numpy window editor (``vector``) and its C
twin (``_kernel``); the ICRC (and, on native IB, the VCRC) stays right."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ibwire import crc
from ibwire.builder import build
from ibwire.pcap.writer import PcapWriter
from ibwire.rewrite import edit, vector
from ibwire.scan import scan_capture
from ibwire.tables import opcodes_by_name
from tests.crc.conftest import built_or_skip
from tests.rewrite.frames import frames
from tests.rewrite.test_rewrite_batch import options
from tests.rewrite.test_rewrite_roce import rewrite

try:
    from ibwire.rewrite import _kernel
except ImportError:
    _kernel = None

SOURCE, DEST = 0x44, 0x22
QPMAP = ["--qpmap", "0x44:0x144,0x22:0x122"]
#: (opcode name, bytes from the BTH to the source QP, or None: no DETH)
PACKETS = [("RD_SEND_ONLY", 21), ("RD_RDMA_WRITE_FIRST", 21), ("RD_RDMA_READ_REQUEST", 21),
           ("RD_FETCH_ADD", 21), ("RD_SEND_ONLY_WITH_IMMEDIATE", 21), ("UD_SEND_ONLY", 17),
           ("RD_ACKNOWLEDGE", None), ("RC_SEND_ONLY", None)]
LINKTYPES = {"ethernet": 1, "infiniband": 247}


def packets(encapsulation: str) -> list[bytes]:
    out = []
    for name, _ in PACKETS:
        op = opcodes_by_name()[name]
        fields = {"bth.opcode": op.value, "bth.destqp": DEST}
        if "RDETH" in op.headers:
            fields["rdeth.eecnxt"] = 7
        if "DETH" in op.headers:
            fields.update({"deth.srcqp": SOURCE, "deth.q_key": 0x11111111})
        out.append(build(encapsulation, fields, bytes(range(32)) if op.payload else b""))
    return out


def capture(path: Path, encapsulation: str, link: str) -> Path:
    with PcapWriter(str(path), LINKTYPES[link]) as writer:
        for k, frame in enumerate(packets(encapsulation)):
            writer.write(frame, 1000 * k)
    return path


def check(link: str, before: list[bytes], after: list[bytes]) -> None:
    """Source QP mapped where a DETH has one, destination QP everywhere, CRCs right."""
    assert len(before) == len(after) == len(PACKETS)
    for (name, at), a, b in zip(PACKETS, before, after, strict=True):
        bth = crc.locate(b, link).bth
        assert int.from_bytes(b[bth + 5:bth + 8], "big") == 0x122, name
        if at is not None:
            assert int.from_bytes(a[bth + at:bth + at + 3], "big") == SOURCE, name
            assert int.from_bytes(b[bth + at:bth + at + 3], "big") == 0x144, name
        verdict = crc.verify(b, link)
        assert verdict.icrc_ok and verdict.vcrc_ok is not False, name


@pytest.mark.parametrize(("encapsulation", "link"), [
    ("rocev2_ipv4", "ethernet"), ("rocev2_ipv6", "ethernet"), ("rocev1", "ethernet"),
    ("ib_local", "infiniband"), ("ib_global", "infiniband")])
def test_rewrite_maps_the_source_qp_of_rd(tmp_path: Path, encapsulation: str, link: str
                                          ) -> None:
    src = capture(tmp_path / "rd.pcap", encapsulation, link)
    out = tmp_path / "out.pcap"
    report = rewrite(src, out, *QPMAP)
    check(link, [f for _, f in frames(src)], [f for _, f in frames(out)])
    assert [("deth.srcqp" in r["changed"]) for r in report] == [
        at is not None for _, at in PACKETS]
    # the names and numbers of show --json and check: BTH's destqp, records from 1
    assert all("bth.destqp" in r["changed"] for r in report)
    assert [r["record"] for r in report] == list(range(1, len(PACKETS) + 1))


def test_the_per_packet_editor_maps_it(twin) -> None:
    o = options(QPMAP)
    before = packets("rocev2_ipv4")
    after = []
    for frame in before:
        b = bytearray(frame)
        edit.edit_frame(b, "ethernet", o, edit.PsnPairs(o))
        after.append(bytes(b))
    check("ethernet", before, after)


@pytest.mark.parametrize("editor", ["numpy", "c"])
def test_the_window_editors_map_it(tmp_path: Path, editor: str) -> None:
    twin = vector if editor == "numpy" else built_or_skip(_kernel, "ibwire.rewrite._kernel")
    src = capture(tmp_path / "rd.pcap", "rocev2_ipv4", "ethernet")
    o = options(QPMAP)
    (batch,) = scan_capture(str(src), fields=())
    c = batch.columns
    offs, lens = c["frame.offset"].astype(np.int64), c["frame.len"].astype(np.int64)
    buf = np.zeros(len(batch.buffer) + vector.PAD, np.uint8)
    buf[:len(batch.buffer)] = np.frombuffer(batch.buffer, np.uint8)
    result = twin.edit_frames(buf, offs, lens, c["link"], c["error"], c["icrc_ok"],
                              c["offset.bth"], c["offset.icrc"], o)
    assert not result.fallback.any()
    after = [bytes(buf[a:a + n]) for a, n in zip(offs.tolist(), lens.tolist(), strict=True)]
    check("ethernet", packets("rocev2_ipv4"), after)
    bit = vector.BIT["deth.srcqp"]
    assert [bool(x & bit) for x in result.changed] == [at is not None for _, at in PACKETS]

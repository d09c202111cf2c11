"""Random and mutated inputs straight into every C extension, for ``tools/asan.sh`` to run
with ASan/UBSan preloaded (each buffer exactly sized, so a read past it is a report).

    python -m tools.fuzzing.asan_loop CASES [MODULE...]

MODULE is any of crc_scan (the CRC engine, the scanner, the counting scan and the pcapng EPB
walk, through lying record and block lengths), text (the text filler: valid templates
against its twin, and garbage templates it must refuse), streams (the row grouping), rewrite
(the window editor against its numpy twin), erf (the ERF block locator), filemap (maps of
files that are shorter than asked or shrink under the map) and impair (the forwarder's frame
classifier and checksum completion against their twins, VLAN tags added). Each runs CASES
cases (fewer for the costly ones, as said); a twin disagreement or an exception other than
the expected refusals stops it with a traceback.
"""

from __future__ import annotations

import os
import random
import struct
import sys
import tempfile
from collections.abc import Callable

import numpy as np
from tests.crc.crc_frames import bth, native_ib, rocev1, rocev2

from ibwire.errors import IbwireError

LINKS = ["ethernet", "infiniband", "ip", "grh"]


def exact(data: bytes) -> np.ndarray:
    """``data`` in a heap buffer of exactly its size."""
    return np.frombuffer(bytes(data), np.uint8).copy()


def seed_frames(rng: random.Random, count: int) -> list[tuple[bytes, str]]:
    """Valid frames of every encapsulation, IPv4 options and IPv6 included."""
    seeds = []
    for i in range(count):
        body = bth(rng.randrange(256)) + rng.randbytes(rng.choice([0, 8, 100, 300, 2000]))
        seeds += [(native_ib(body[: len(body) // 4 * 4]).frame, "infiniband"),
                  (rocev1(body).frame, "ethernet"),
                  (rocev2(body, v6=i % 2 == 1).frame, "ethernet"),
                  (rocev2(body, ip={"options": bytes(4 * (i % 11))}).frame[14:], "ip")]
    return seeds


def damaged(rng: random.Random, seeds: list[tuple[bytes, str]]) -> tuple[bytearray, str]:
    """A seed with up to 3 bytes changed, maybe cut; or random bytes (one case in four)."""
    if rng.random() < 0.25:
        return bytearray(rng.randbytes(rng.randrange(120))), rng.choice(LINKS)
    frame, link = rng.choice(seeds)
    frame = bytearray(frame)
    for _ in range(rng.randrange(4)):
        frame[rng.randrange(len(frame))] = rng.randrange(256)
    if rng.random() < 0.3:
        frame = frame[: rng.randrange(len(frame) + 1)]
    if rng.random() < 0.1:
        link = rng.choice(LINKS)
    return frame, link


# ------------------------------------------------------------------ crc, scan, tally, pcapng
def crc_scan(cases: int, rng: random.Random) -> str:
    from ibwire.crc import _engine as crc
    from ibwire.scan import _engine as scan
    from ibwire.scan import _tally as tally

    seeds = seed_frames(rng, 200)
    errors = 0
    for i in range(cases):
        frame, link = damaged(rng, seeds)
        arr = exact(frame)
        lenient = {"lenient": True}
        for fn, kw in ((crc.icrc, {}), (crc.vcrc, {}), (crc.verify, {}), (crc.locate, {}),
                       (crc.fix, {}), (crc.verify, lenient), (crc.fix, lenient)):
            try:
                fn(arr, link, **kw)
            except IbwireError:
                errors += 1
        scan.scan_frames(arr, [0], [len(arr)], [LINKS.index(link)])
        # the counting scan: the frame as a pcap record (its caplen sometimes lying), then raw
        caplen = len(frame) + rng.choice([0, 0, 0, 1, -1, 1000])
        record = struct.pack("<IIII", 1, 0, max(caplen, 0), len(frame)) + bytes(frame)
        rec = exact(record)
        swapped = rng.random() < 0.2
        header = rng.choice([0, 0, 1, 2])  # the frame, or behind a Linux SLL/SLL2 header
        tally.check_pcap(rec, 0, len(rec), swapped, 1 << 18, 64, LINKS.index(link), header, 2)
        at = rng.randrange(len(arr) + 1)
        tally.check_pcap(arr, at, len(arr), swapped, 1 << 18, 0, 255 if i % 5 == 0 else 0,
                         rng.choice([0, 1, 2]), 1)
        tally.pcap_sync(arr, at, len(arr), swapped, 1 << 18, 10**6, rng.randrange(1, 9), 300)
        errors += _pcapng(rng, frame, caplen, link, swapped, arr, at)
        if i % 64 == 0:
            crc.verify_batch(arr, [0, 0], [len(arr), len(arr) // 2], np.array([0, 1], np.uint8))
    return f"{cases} cases, {errors} ibwire errors"


def _pcapng(rng: random.Random, frame: bytes, caplen: int, link: str, swapped: bool,
            arr: np.ndarray, at: int) -> int:
    """The pcapng EPB walks over the frame as an EPB (lengths sometimes lying), and raw."""
    from ibwire.pcap import _engine as walk
    from ibwire.scan import _tally as tally

    faces = [(rng.randrange(3), rng.choice([0, 1, 1000, 10**19, 93, 127]),
              rng.choice([0, -1, 1 << 62, -(1 << 63)]), rng.choice([0, 64]), 1)]
    body = struct.pack("<IIIII", 0, 7, 9, max(caplen, 0), len(frame)) + bytes(frame)
    body += bytes(-len(body) % 4)
    size = 12 + len(body) + rng.choice([0, 0, 0, 4, -4, 1000])
    block = exact(struct.pack("<II", 6, max(size, 0)) + body + struct.pack("<I", max(size, 0)))
    counting = [(rng.choice([0, 64]), LINKS.index(link), rng.choice([-1, 0, 1, 2]))]
    errors = 0
    for buf, start in ((block, 0), (arr, at)):
        try:
            walk.pcapng_epbs(buf, start, len(buf), swapped, 1 << 18, faces, 4)
        except ValueError:  # a clock the walker never makes (kind 1 with param 0 ...)
            errors += 1
        tally.check_pcapng(buf, start, len(buf), swapped, 1 << 18, counting, 2)
        tally.pcapng_sync(buf, start, len(buf), swapped, 1 << 18, rng.randrange(1, 4), 300)
    return errors


# ------------------------------------------------------------------ text filler
def text(cases: int, rng: random.Random) -> str:
    from ibwire.scan import _text, _text_python
    from ibwire.scan.text import HEX, LITERAL, NUMBER, PREFIX, SECONDS, SMALL, TEXT, Templates

    kinds = [(NUMBER, 6, 0), (NUMBER, 0, 0), (HEX, 0, 0), (HEX, 8, PREFIX), (SMALL, 0, 0),
             (SECONDS, 11, 0), (SECONDS, 0, 0)]
    refused = 0
    for i in range(cases):
        templates = Templates()
        for _ in range(rng.randrange(1, 5)):
            ops: list = []
            for _ in range(rng.randrange(0, 8)):
                pick = rng.randrange(3)
                if pick == 0:
                    ops.append((LITERAL, rng.choice(["a", " → ", "", "é%s", "x" * 300]), 0, 0))
                elif pick == 1:
                    ops.append((TEXT, f"s{rng.randrange(2)}", 0, 0))
                else:
                    kind, width, flags = rng.choice(kinds)
                    ops.append((kind, f"i{rng.randrange(2)}", width, flags))
            templates.add(ops)
        rows = rng.randrange(0, 20)
        starts, ops_flat, pool = templates.flat()
        ints = [exact(np.array([rng.getrandbits(64) for _ in range(rows)], np.uint64).tobytes())
                .view(np.uint64) for _ in templates.ints]
        strs = [[rng.choice(["", "10.0.0.1", "fe80::1", "→é", "z" * 500]) for _ in range(rows)]
                for _ in templates.strs]
        template = np.array([rng.randrange(len(starts) - 1) for _ in range(rows)], np.int32)
        if i % 3 == 0:  # garbage: the C filler must refuse it, never read outside
            template, starts, ops_flat, ints, strs = _garbage(rng, template, starts, ops_flat,
                                                                ints, strs)
        try:
            ours = _text.fill(template, starts, ops_flat, pool, ints, strs, "\n")
        except (ValueError, TypeError, IndexError, OverflowError):
            refused += 1
            continue
        if i % 3:
            theirs = _text_python.fill(template, starts, ops_flat, pool, ints, strs, "\n")
            assert ours == theirs, (ours, theirs)
    return f"{cases} cases, {refused} refused"


def _garbage(rng: random.Random, template: np.ndarray, starts: np.ndarray, ops: np.ndarray,
             ints: list, strs: list) -> tuple:
    """One of the filler's inputs made wrong: an index, an op, a column too short."""
    template, starts, ops = template.copy(), starts.copy(), ops.copy()
    pick = rng.randrange(5)
    big = rng.choice([-1, -(1 << 31), (1 << 31) - 1, 1 << 20, 7])
    if pick == 0 and template.size:
        template[rng.randrange(template.size)] = big
    elif pick == 1 and starts.size:
        starts[rng.randrange(starts.size)] = big
    elif pick == 2 and ops.size:
        ops.flat[rng.randrange(ops.size)] = big
    elif pick == 3 and ints:
        ints = [c[: rng.randrange(len(c) + 1)] for c in ints]
    elif strs:
        strs = [s[: rng.randrange(len(s) + 1)] for s in strs]
    return template, starts, ops, ints, strs


# ------------------------------------------------------------------ row grouping
def streams(cases: int, rng: random.Random) -> str:
    from ibwire.analysis import _streams, _streams_python

    for _ in range(cases):
        n = rng.randrange(0, 300)
        spread = rng.choice([1, 2, 5, 1000, 1 << 64])
        columns = tuple(exact(np.array([rng.randrange(spread) for _ in range(n)], np.uint64)
                              .tobytes()).view(np.uint64) for _ in range(rng.randrange(1, 5)))
        ours, theirs = _streams.group_rows(columns), _streams_python.group_rows(columns)
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))
    return f"{cases} cases"


# ------------------------------------------------------------------ rewrite kernel
def rewrite(cases: int, rng: random.Random) -> str:
    from tests.rewrite.test_rewrite_batch import ALL_OPTIONS, options

    from ibwire.rewrite import _kernel, vector
    from ibwire.scan import _engine as scan

    seeds = [(f, link) for f, link in seed_frames(rng, 60) if link != "infiniband"]
    sets = [options(argv) for argv in ALL_OPTIONS.values()]
    compared = 0
    for _ in range(cases):
        frames = [damaged(rng, seeds) for _ in range(rng.randrange(1, 9))]
        lens = np.array([len(f) for f, _ in frames], np.int64)
        # a pcap record header before the first frame, as the batch path's windows have
        offs = 16 + np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        data = bytes(16) + b"".join(bytes(f) for f, _ in frames)
        codes = np.array([LINKS.index(link) for _, link in frames], np.uint8)
        c = scan.scan_frames(exact(data), offs, lens, codes)
        o = rng.choice(sets)
        results, bufs = [], []
        for twin in (vector, _kernel):
            buf = exact(data + bytes(vector.PAD))  # the editors' contract: PAD bytes after
            results.append(twin.edit_frames(buf, offs, lens, c["link"], c["error"],
                                            c["icrc_ok"], c["offset.bth"], c["offset.icrc"], o))
            bufs.append(buf)
        ours, theirs = results
        assert np.array_equal(ours.fallback, theirs.fallback)
        for row in np.flatnonzero(~ours.fallback).tolist():
            at, n = int(offs[row]), int(lens[row])
            assert bytes(bufs[0][at:at + n]) == bytes(bufs[1][at:at + n]), row
            compared += 1
    return f"{cases} cases, {compared} frames compared"


# ------------------------------------------------------------------ ERF block locator
def erf(cases: int, rng: random.Random) -> str:
    from ibwire.pcap import _engine, _python
    from ibwire.pcap.index_links import erf_tables

    for _ in range(cases):
        chunks, offsets, lengths, wire, at = [], [], [], [], 0
        for _ in range(rng.randrange(1, 12)):
            body = rng.randrange(80)
            kind = rng.choice([21, 2, 16, 22, 25, 0x80 | 21, 99, 48])
            rlen = rng.choice([16 + body + (2 if kind in (2, 16) else 0), rng.randrange(200)])
            record = rng.randbytes(8) + bytes([kind, 4]) + rlen.to_bytes(2, "big") + bytes(2) \
                + rng.randrange(300).to_bytes(2, "big") + rng.randbytes(body + 2)
            chunks.append(record)
            offsets.append(rng.choice([at, at, rng.randrange(at + 1)]))
            lengths.append(rng.choice([len(record), rng.randrange(len(record) + 40)]))
            wire.append(rng.randrange(2000))
            at += len(record)
        octets = exact(b"".join(chunks))
        n = len(offsets)
        # as the index has them: each row inside the buffer (the ERF header may run past it)
        lengths = [min(length, at - off) for off, length in zip(offsets, lengths, strict=True)]
        columns = (np.array(offsets, np.int64), np.array(lengths, np.uint32),
                   np.zeros(n, np.int64), np.full(n, 7, np.uint8), np.array(wire, np.uint32))
        ours = tuple(x.copy() for x in columns)
        theirs = tuple(x.copy() for x in columns)
        left = _engine.erf_block(octets, *ours, *erf_tables())
        assert left.tolist() == _python.erf_block(octets, *theirs, *erf_tables()).tolist()
        assert all(a.tolist() == b.tolist() for a, b in zip(ours, theirs, strict=True))
    return f"{cases} cases"


# ------------------------------------------------------------------ impair's classifier
def impair(cases: int, rng: random.Random) -> str:
    from ibwire.impair import _fast, forge
    from ibwire.impair.classify import COLUMNS, classify

    seeds = [(f, link) for f, link in seed_frames(rng, 100) if link == "ethernet"]
    tags = [bytes.fromhex(t) for t in ("81000007", "88a80007", "91000007")]
    ib = 0
    for _ in range(cases):
        frame, _link = damaged(rng, seeds)
        if len(frame) >= 14 and rng.random() < 0.3:  # VLAN tags in front of the EtherType
            frame[12:12] = b"".join(rng.choice(tags) for _ in range(rng.randrange(1, 4)))
        arr = exact(frame)
        offsets, lengths = np.zeros(1, np.int64), np.array([len(arr)], np.int64)
        ours, theirs = (classify(arr, offsets, lengths, fast=fast) for fast in (True, False))
        assert ours["ib"][0] == theirs["ib"][0], bytes(frame).hex()
        if ours["ib"][0]:
            ib += 1
            for name in COLUMNS[:6]:  # the AETH words: C reads them whatever the opcode
                assert ours[name][0] == theirs[name][0], (name, bytes(frame).hex())
        twin = bytearray(frame)
        assert _fast.complete_checksum(arr) == forge.complete_checksum(twin)
        assert bytes(arr) == bytes(twin), bytes(frame).hex()
    return f"{cases} cases, {ib} IB frames compared"


# ------------------------------------------------------------------ file map
def filemap(cases: int, rng: random.Random) -> str:
    from ibwire.pcap import _filemap

    faults = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "capture")
        for _ in range(cases):
            size = rng.choice([0, 1, 4095, 4096, 4097, 10000, 70000])
            with open(path, "wb") as out:
                out.write(rng.randbytes(size))
            fd = os.open(path, os.O_RDWR)
            try:
                offset = rng.choice([0, 0, 4096, 8192])
                length = rng.choice([1, size, size + 1, 65536, 3 * 4096])
                try:
                    window = _filemap.CaptureMap(fd, offset, length, path)
                except (IbwireError, OSError, ValueError):
                    continue
                view = memoryview(window)
                os.ftruncate(fd, rng.choice([size, size // 2, 0]))  # shrinks under the map
                try:
                    total = sum(view[i] for i in range(0, len(view), 997))
                    total += view[len(view) - 1] if len(view) else 0
                except IbwireError:
                    faults += 1
                faults += bool(window.faulted)
                view.release()
                window.close()
            finally:
                os.close(fd)
    return f"{cases} cases, {faults} shrinks seen"


MODULES: dict[str, tuple[Callable[[int, random.Random], str], int]] = {
    # name: (loop, the share of CASES it runs: the costly ones fewer)
    "crc_scan": (crc_scan, 1), "text": (text, 10), "streams": (streams, 20),
    "rewrite": (rewrite, 20), "erf": (erf, 10), "filemap": (filemap, 100),
    "impair": (impair, 10)}


def main(argv: list[str]) -> None:
    cases = int(argv[1])
    for name in argv[2:] or list(MODULES):
        loop, share = MODULES[name]
        print(f"{name}: {loop(max(cases // share, 1), random.Random(name))}", flush=True)


if __name__ == "__main__":
    main(sys.argv)

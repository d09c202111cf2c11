#!/usr/bin/env python3
"""Seed inputs for the libFuzzer harnesses of tools/fuzzing/c/, in each harness's input layout.

Random bytes rarely make a frame whose IP length, UDP port 4791 and BTH hold together, so each
harness starts from real packets: frames drawn from ibwire's hypothesis strategies (valid,
broken, cut by a snap length, good and bad MADs: ``tools.fuzzing.images.frames``, from a
fixed seed) and the frames of the sample captures of captures/. libFuzzer then mutates them.

Usage: python tools/fuzzing/c_seeds.py DIR [COUNT]   (writes DIR/<harness>/seed-*)
"""

from __future__ import annotations

import hashlib
import random
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK_CODES = {"ethernet": 0, "infiniband": 1, "ip": 2, "grh": 3}
PCAP_LINKS = {1: "ethernet", 247: "infiniband", 101: "ip"}


def capture_frames() -> Iterator[tuple[bytes, str]]:
    """The frames of the classic pcap files of captures/ (little-endian, us or ns)."""
    for path in sorted(REPO.glob("captures/**/*.pcap")):
        data = path.read_bytes()
        link = PCAP_LINKS.get(struct.unpack_from("<I", data, 20)[0])
        if link is None:
            continue
        at = 24
        while at + 16 <= len(data):
            caplen = struct.unpack_from("<I", data, at + 8)[0]
            yield data[at + 16:at + 16 + caplen], link
            at += 16 + caplen


def drawn_frames(count: int) -> Iterator[tuple[bytes, str]]:
    """``count`` frames from the strategies of tools.fuzzing.images, reproducibly."""
    sys.path.insert(0, str(REPO))
    from tools.fuzzing.images import frame_input

    rng = random.Random(31)
    made = 0
    while made < count:
        drawn = frame_input(b"\x01" + rng.randbytes(4096))
        if drawn is not None and drawn[1] in LINK_CODES:
            made += 1
            yield drawn


def crc_seed(frame: bytes, link: str) -> bytes:
    return bytes([LINK_CODES[link]]) + b"\0\0" + b"\0\0\0\0" + frame


def scan_seed(batch: list[tuple[bytes, str]]) -> bytes:
    out = bytearray([1])  # verdicts, every column
    for frame, link in batch:
        out += struct.pack("<BH", LINK_CODES[link], len(frame)) + frame
    return bytes(out)


def records_seed(batch: list[tuple[bytes, str]]) -> bytes:
    link = LINK_CODES[batch[0][1]]
    # options: little-endian, us, frames at the record, verdicts; the whole buffer walked
    out = bytearray(struct.pack("<BBHHBBH", 0x90, link, 0, 63, 0, 1, 0))
    for i, (frame, _link) in enumerate(batch):
        out += struct.pack("<IIII", 1_700_000_000 + i, i, len(frame), len(frame)) + frame
    return bytes(out)


def pcapng_seed(batch: list[tuple[bytes, str]]) -> bytes:
    link = LINK_CODES[batch[0][1]]
    # one direct interface counted from the record (kind 0, x1000: microseconds), MAX_LEN
    out = bytearray(struct.pack("<BHHB", 0x0C, 0, 0, 1))
    out += struct.pack("<BIqHB", 0x18, 1000, 0, 0, link)
    for i, (frame, _link) in enumerate(batch):
        body = struct.pack("<IIIII", 0, 0, i, len(frame), len(frame)) + frame
        body += bytes(-len(body) % 4)
        size = 12 + len(body)
        out += struct.pack("<II", 6, size) + body + struct.pack("<I", size)
    return bytes(out)


def relay_seed(batch: list[tuple[bytes, str]]) -> bytes:
    return b"".join(struct.pack("<H", len(frame)) + frame for frame, _link in batch)


def write(folder: Path, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed-{hashlib.sha1(data).hexdigest()[:16]}").write_bytes(data)


def main() -> None:
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[-1])
    out = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) == 3 else 300
    frames = list(capture_frames()) + list(drawn_frames(count))
    for frame, link in frames:
        write(out / "crc", crc_seed(frame, link))
    for i in range(0, len(frames), 4):
        batch = frames[i:i + 4]
        write(out / "scan", scan_seed(batch))
        same = [f for f in batch if f[1] == batch[0][1]]
        write(out / "records", records_seed(same))
        write(out / "pcapng", pcapng_seed(same))
        ether = [f for f in batch if f[1] == "ethernet"]
        if ether:
            write(out / "relay", relay_seed(ether))
    for path in sorted(REPO.glob("captures/*.pcap")):  # a capture file, cut while read
        image = path.read_bytes()
        write(out / "filemap", struct.pack("<BHHH", 0x0D, 8192, len(image) // 2, 300) + image)
        write(out / "filemap", struct.pack("<BHHH", 0x05, 100, 0, 0) + image)
    print(f"{len(frames)} frames -> seeds in {out}")


if __name__ == "__main__":
    main()

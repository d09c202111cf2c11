"""``ibwire check``, ``show`` and ``stats`` on malformed captures: a clear error, never a crash.

The contract (issue "malformed captures", ``ibwire/cli/check.py``, ``ibwire/pcap/__init__.py``):

- File-level (nothing can be read: empty, bad magic, truncated global/section header, a
  directory, a missing file): exit status 2 and exactly one line on stderr that names the file
  and the problem; no traceback.
- Packet-level (anything else): ``check`` exits 1 and prints the failing record's number
  (1-based, like frame numbers) with a reason naming the header/field at fault (or the ICRC
  when a lying length still leaves the ICRC where a reader looks for it); ``show`` prints
  one line per record, the bad one with its reason; ``stats`` counts it. The records before
  the bad one are reported, and so are the ones after it where the format lets the reader
  go on (a pcapng block or ERF-in-pcap record whose contents lie, any frame-level lie). A
  lying length that desynchronises the stream ends the file with that one error (a pcap
  record header, a pcapng block length, a native ERF rlen, gzip data).
- Frames of other protocols are counted as other traffic, not failures.

``check`` and ``stats`` run on the batch scanner, or on the per-packet dissector with
``--where``: the tests of ``check`` and ``stats`` run both ways. A case that shows a bug in
ibwire is a strict xfail whose reason says what is wrong.

Inputs are built byte by byte (``tests/pcap/capture_synth.py``) from frames that
``ibwire.build`` makes with correct CRCs; the lies are then poked into specific bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import re
import signal
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.builder import build, ipv4_checksum
from ibwire.cli.main import main
from ibwire.dissect import parse
from tests.pcap.capture_synth import (
    T0,
    block,
    epb,
    erf_record,
    pcap_file,
    pcap_header,
    pcap_record,
    pcapng_file,
    shb,
)

CLI_TIMEOUT_S = 20.0
"""A single in-process ``ibwire`` run longer than this is a hang."""


# ----------------------------------------------------------------------------- running
@dataclass(frozen=True)
class Result:
    status: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()


class CliHang(Exception):
    """The CLI did not return within CLI_TIMEOUT_S."""


@contextlib.contextmanager
def hang_guard(seconds: float = CLI_TIMEOUT_S) -> Iterator[None]:
    """Turn a hang into a test failure (SIGALRM; only possible in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, _frame: object) -> None:
        raise CliHang(f"ibwire did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def cli(*argv: str | Path, stdin: bytes | None = None) -> Result:
    """Run ``ibwire argv...`` in-process; stdout/stderr captured, ``stdin`` fed to '-'.

    Exceptions escaping ``main`` are not caught here: a crash fails the test with its traceback.
    """
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    fake_stdin = io.TextIOWrapper(io.BytesIO(stdin if stdin is not None else b""))
    with mock.patch.object(sys, "stdin", fake_stdin), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err), hang_guard():
        status = main([str(a) for a in argv])
    texts = []
    for stream in (out, err):
        stream.flush()
        texts.append(stream.buffer.getvalue().decode("utf-8"))  # type: ignore[attr-defined]
    return Result(status, texts[0], texts[1])


RECORD_NUMBER = re.compile(r"\brecord (\d+)\b")


def record_numbers(text: str) -> set[int]:
    """Every 'record N' mentioned (not 'N records')."""
    return {int(n) for n in RECORD_NUMBER.findall(text)}


def check_reason(result: Result, number: int) -> str:
    """The reason ``check`` prints for record ``number`` (the text after 'record N')."""
    found = [line for line in result.lines if re.search(rf"\brecord {number}\b", line)]
    assert found, f"record {number} not reported:\n{result.out}"
    return " ".join(line.split(f"record {number}", 1)[1] for line in found)


def show_reason(line: str) -> str:
    """What a ``show`` summary line says went wrong: its [error], or its CRC verdicts."""
    bracketed = re.findall(r"\[(.*)\]", line)
    if bracketed:
        return bracketed[-1]
    return " ".join(re.findall(r"[IV]CRC BAD", line))


def names_one_of(reason: str, words: tuple[str, ...]) -> bool:
    return any(word.lower() in reason.lower() for word in words)


def json_lines(result: Result) -> list[dict[str, Any]]:
    """Each file's part of ``check --json``'s one document."""
    return check_summary(result)["files"]


def check_summary(result: Result) -> dict[str, Any]:
    """``check --json``'s one JSON document (all of its output): the totals at its top."""
    assert len(result.lines) == 1, result.out
    return json.loads(result.out)


# ----------------------------------------------------------------------------- frames
def roce(psn: int, **fields: Any) -> bytes:
    """A RoCEv2/IPv4 RC SEND of 6 bytes (66 bytes, all CRCs right)."""
    return build("rocev2_ipv4", {"bth.destqp": 0x12, "bth.psn": psn, **fields}, b"hello!",
                        opcode="RC_SEND_ONLY")


def roce_write(psn: int) -> bytes:
    """A RoCEv2/IPv4 RDMA WRITE ONLY (BTH at 42, RETH at 54, 82 bytes)."""
    return build("rocev2_ipv4", {"bth.destqp": 0x12, "bth.psn": psn, "reth.va": 0x1000,
                                        "reth.r_key": 5, "reth.dmalen": 6}, b"hello!",
                        opcode="RC_RDMA_WRITE_ONLY")


def roce_v6(psn: int) -> bytes:
    return build("rocev2_ipv6", {"bth.destqp": 0x12, "bth.psn": psn}, b"hello!",
                        opcode="RC_SEND_ONLY")


def roce_v1(psn: int) -> bytes:
    return build("rocev1", {"bth.destqp": 0x12, "bth.psn": psn}, b"hello!",
                        opcode="RC_SEND_ONLY")


def ib(psn: int) -> bytes:
    """A native InfiniBand (LRH, no GRH) RC SEND; PktLen 8, VCRC at 32."""
    return build("ib_local", {"lrh.dlid": 2, "lrh.slid": 1, "bth.destqp": 0x12,
                                     "bth.psn": psn}, b"hello!", opcode="RC_SEND_ONLY")


def ib_global(psn: int) -> bytes:
    """Native InfiniBand with a GRH (GRH at 8, BTH at 48, 74 bytes)."""
    return build("ib_global", {"lrh.dlid": 2, "lrh.slid": 1, "grh.sgid": "fe80::1",
                                      "grh.dgid": "fe80::2", "bth.destqp": 0x12, "bth.psn": psn},
                        b"hello!", opcode="RC_SEND_ONLY")


def ack_without_payload(psn: int) -> bytes:
    return build("rocev2_ipv4", {"bth.destqp": 0x12, "bth.psn": psn}, b"",
                        opcode="RC_SEND_ONLY")


# Byte offsets of the fields the lies go into (checked by test_the_pokes_hit_their_fields).
IPV4_TOTAL_LENGTH = 14 + 2
UDP_LENGTH = 34 + 4
BTH_ROCE = 42
IPV6_PAYLOAD_LENGTH = 14 + 4
GRH_PAYLEN_ROCE_V1 = 14 + 4
LRH_PKTLEN = 4
BTH_IB = 8
GRH_PAYLEN_IB = 8 + 4


def u16(frame: bytes, at: int) -> int:
    return int.from_bytes(frame[at:at + 2], "big")


def poke16(frame: bytes, at: int, value: int) -> bytes:
    """``frame`` with the big-endian 16-bit field at ``at`` set to ``value`` (no CRC fix)."""
    return frame[:at] + value.to_bytes(2, "big") + frame[at + 2:]


def add16(frame: bytes, at: int, delta: int) -> bytes:
    return poke16(frame, at, u16(frame, at) + delta)


def poke_padcnt(frame: bytes, bth: int, padcnt: int) -> bytes:
    """Set BTH PadCnt (bits 5-4 of the BTH's second byte)."""
    byte = frame[bth + 1] & ~0x30 | padcnt << 4
    return frame[:bth + 1] + bytes([byte]) + frame[bth + 2:]


def poke_pktlen(frame: bytes, pktlen: int) -> bytes:
    """Set LRH PktLen (low 11 bits of LRH bytes 4-5)."""
    return poke16(frame, LRH_PKTLEN, u16(frame, LRH_PKTLEN) & 0xF800 | pktlen)


def broken_icrc(frame: bytes) -> bytes:
    """A RoCEv2 frame with the last byte of its ICRC flipped."""
    return frame[:-1] + bytes([frame[-1] ^ 0xFF])


def padcnt(frame: bytes, bth: int) -> int:
    return frame[bth + 1] >> 4 & 3


def ipv4_frame(proto: int, payload: bytes, *, total_length: int | None = None) -> bytes:
    """Ethernet + IPv4 (valid header checksum) carrying ``payload``: not RoCE."""
    length = 20 + len(payload) if total_length is None else total_length
    header = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, length, 1, 0x4000, 64, proto, 0,
                                   bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])))
    header[10:12] = ipv4_checksum(bytes(header)).to_bytes(2, "big")
    return bytes.fromhex("020000000002" "020000000001" "0800") + bytes(header) + payload


TCP_SEGMENT = struct.pack(">HHIIBBHHH", 40000, 80, 1, 0, 0x50, 0x10, 1000, 0, 0) + b"data"
OTHER_FRAMES = [
    bytes.fromhex("ffffffffffff020000000001080600010800060400010200000000010a000001"
                  "0000000000000a000002"),                                          # ARP
    ipv4_frame(6, TCP_SEGMENT),                                                     # TCP
    ipv4_frame(17, struct.pack(">HHHH", 5353, 53, 12, 0) + b"abcd"),                # DNS
    bytes.fromhex("020000000002020000000001" "86dd" "6000000000083a40") + bytes(32)
    + bytes.fromhex("8000000000000000"),                                            # ICMPv6
    bytes.fromhex("0180c200000e020000000001" "88cc") + bytes(32),                   # LLDP
]


# ----------------------------------------------------------------------------- captures
def records(entries: list[tuple[bytes, int | None]], linktype: int = 1, *,
            snaplen: int = 65535) -> bytes:
    """A pcap of (data, orig_len) records (orig_len None: the data's length)."""
    out = pcap_header(linktype, snaplen=snaplen)
    for k, (data, orig_len) in enumerate(entries):
        out += pcap_record(T0 + k * 1000, data, orig_len=orig_len)
    return out


def roce_pcap(*frames: bytes) -> bytes:
    return pcap_file(list(frames))


def ib_pcap(*frames: bytes) -> bytes:
    return pcap_file(list(frames), 247)


def frame_lie(bad: bytes) -> bytes:
    """Two good RoCEv2 packets, ``bad``, two more: the bad one is record 3."""
    return roce_pcap(roce(1), roce(2), bad, roce(4), roce(5))


def ib_frame_lie(bad: bytes) -> bytes:
    return ib_pcap(ib(1), ib(2), bad, ib(4), ib(5))


def cut(frame: bytes, length: int) -> bytes:
    """Two good frames, ``frame`` captured only up to ``length`` (orig_len says the whole
    frame was on the wire, as a snaplen leaves it), two more good frames."""
    return records([(roce(1), None), (roce(2), None), (frame[:length], len(frame)),
                    (roce(4), None), (roce(5), None)])


def ib_cut(frame: bytes, length: int) -> bytes:
    return records([(ib(1), None), (ib(2), None), (frame[:length], len(frame)),
                    (ib(4), None), (ib(5), None)], 247)


def gzip_cut_after(frames: list[bytes], whole: int, extra: int = 5) -> bytes:
    """gzip of a pcap of ``frames``, fully flushed after ``whole`` records and cut ``extra``
    bytes later: exactly ``whole`` records can be decompressed."""
    body = roce_pcap(*frames)
    at = 24 + sum(16 + len(f) for f in frames[:whole])
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = packer.compress(body[:at]) + packer.flush(zlib.Z_FULL_FLUSH)
    rest = packer.compress(body[at:]) + packer.flush()
    return head + rest[:extra]


GOOD_PCAP = roce_pcap(roce(1), roce(2), roce(3))
GOOD_PCAPNG = pcapng_file([roce(1), roce(2)])
NEXT_EPBS = epb(0, T0 // 1000 + 3, roce(4)) + epb(0, T0 // 1000 + 4, roce(5))


def pcapng_block(length: int | None = None, trailing: int | None = None,
                 caplen: int | None = None) -> bytes:
    """An EPB holding roce(3), with its length fields as given (default: honest)."""
    frame = roce(3)
    body = struct.pack("<IIIII", 0, (T0 // 1000 + 2) >> 32, (T0 // 1000 + 2) & 0xFFFFFFFF,
                       len(frame) if caplen is None else caplen, len(frame)) + frame
    return block(6, body, length=length, trailing=trailing)


def erf_ib(k: int, **kwargs: Any) -> bytes:
    """An ERF record of type 21 (InfiniBand) holding ib(k)."""
    return erf_record(T0 + k * 1000, 21, ib(k), **kwargs)


def erf_in_pcap(bad: bytes) -> bytes:
    """A LINKTYPE_ERF pcap: two good ERF records, ``bad``, two more."""
    out = pcap_header(197)
    for k, erf in enumerate((erf_ib(1), erf_ib(2), bad, erf_ib(4), erf_ib(5))):
        out += pcap_record(T0 + k * 1000, erf)
    return out


# ----------------------------------------------------------------------------- file level
@dataclass(frozen=True)
class Unreadable:
    """A FILE argument from which nothing can be read."""

    id: str
    make: Callable[[Path], Path]
    words: tuple[str, ...]
    """The one stderr line must name the problem with one of these (case-insensitive)."""


def written(data: bytes, name: str = "capture.pcap") -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        return path
    return make


GZIP_EMPTY_CUT = gzip.compress(GOOD_PCAP)[:15]  # gzip data that ends before any byte comes out

UNREADABLE = [
    Unreadable("empty", written(b""), ("empty",)),
    Unreadable("bad-magic", written(b"GIF89a" + bytes(64)), ("magic", "not a pcap")),
    Unreadable("truncated-pcap-global-header", written(pcap_header()[:10]), ("truncated",)),
    Unreadable("pcap-header-only-20-of-24", written(pcap_header()[:20]), ("truncated",)),
    Unreadable("unknown-pcap-version", written(pcap_header()[:4] + b"\x03\x00" +
                                               pcap_header()[6:]), ("version",)),
    Unreadable("truncated-pcapng-section-header", written(shb()[:20], "capture.pcapng"),
               ("truncated",)),
    Unreadable("pcapng-section-header-length-lie",
               written(shb()[:4] + struct.pack("<I", 30) + shb()[8:], "capture.pcapng"),
               ("length",)),
    Unreadable("gzip-cut-before-any-data", written(GZIP_EMPTY_CUT, "capture.pcap.gz"),
               ("gzip", "truncated")),
    Unreadable("gzip-of-garbage", written(gzip.compress(b"this is not a capture file"),
                                          "capture.pcap.gz"), ("magic", "not a pcap")),
    Unreadable("directory", lambda tmp_path: tmp_path, ("directory",)),
    Unreadable("nonexistent", lambda tmp_path: tmp_path / "no-such-capture.pcap",
               ("no such file", "not found", "does not exist")),
]


@pytest.mark.parametrize("verb", ["check", "show", "stats"])
@pytest.mark.parametrize("case", UNREADABLE, ids=lambda c: c.id)
def test_unreadable_file_is_one_line_and_exit_two(tmp_path: Path, case: Unreadable,
                                                  verb: str) -> None:
    path = case.make(tmp_path)
    result = cli(verb, path)
    assert result.status == 2, result
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1, result.err
    line = result.err_lines[0]
    assert str(path) in line, line
    assert names_one_of(line, case.words), line
    assert line.startswith(f"ibwire {verb}: "), line
    assert result.out == "", result.out


# ----------------------------------------------------------------------------- packet level
@dataclass(frozen=True)
class Bad:
    """A capture in which record ``bad`` (1-based) is malformed; every other record is a good
    InfiniBand/RoCE packet."""

    id: str
    data: bytes
    bad: int
    scanned: int
    """How many records the CLI must report, the bad one included (less than the file holds
    when the lie ends the file)."""
    words: tuple[str, ...]
    """The reason must name one of these (case-insensitive): the header/field at fault."""
    suffix: str = ".pcap"
    reason_bug: str | None = None
    """Set when ibwire's reason does not name the header/field today (xfail of the tests
    that look at the reason)."""

    @property
    def good(self) -> int:
        return self.scanned - 1


IP_WORDS = ("ip.len", "ip length", "total length", "total_length")
ICRC_OR_LENGTHS = ("icrc", "ip.len", "ip length", "udp.length", "udp length")

BAD = [
    # --- pcap record headers: the lie ends the file (the next records are not reached)
    Bad("pcap-truncated-record-data", roce_pcap(roce(1), roce(2)) +
        pcap_record(T0, roce(3))[:40], 3, 3, ("truncated",)),
    Bad("pcap-truncated-record-header", roce_pcap(roce(1), roce(2)) +
        pcap_record(T0, roce(3))[:9], 3, 3, ("truncated",)),
    Bad("pcap-absurd-caplen", roce_pcap(roce(1), roce(2)) +
        pcap_record(T0, roce(3), caplen=300 << 20) + pcap_record(T0, roce(4)),
        3, 3, ("caplen",)),
    Bad("pcap-caplen-past-end", roce_pcap(roce(1), roce(2)) +
        pcap_record(T0, roce(3), caplen=10 << 20) + pcap_record(T0, roce(4)),
        3, 3, ("caplen", "truncated")),
    Bad("pcap-trailing-garbage-short", roce_pcap(roce(1), roce(2)) + b"garbage-garbage",
        3, 3, ("trailing", "truncated")),
    Bad("pcap-trailing-garbage-long", roce_pcap(roce(1), roce(2)) + b"garbage! " * 8,
        3, 3, ("trailing", "truncated", "caplen", "garbage")),
    # --- pcapng: a block length that lies ends the file; a packet that lies inside an honest
    #     block is skipped and reading goes on
    Bad("pcapng-block-length-past-end", GOOD_PCAPNG + pcapng_block(length=4000) + NEXT_EPBS,
        3, 3, ("block", "length"), ".pcapng"),
    Bad("pcapng-block-length-not-multiple-of-4",
        GOOD_PCAPNG + pcapng_block(length=94) + NEXT_EPBS, 3, 3, ("block", "length"), ".pcapng"),
    Bad("pcapng-trailing-block-length-differs",
        GOOD_PCAPNG + pcapng_block(trailing=40) + NEXT_EPBS, 3, 3, ("length",), ".pcapng"),
    Bad("pcapng-block-cut-at-end", GOOD_PCAPNG + pcapng_block()[:50], 3, 3,
        ("length", "truncated"), ".pcapng"),
    Bad("pcapng-epb-caplen-exceeds-block", GOOD_PCAPNG + pcapng_block(caplen=400) + NEXT_EPBS,
        3, 5, ("caplen", "captured length"), ".pcapng"),
    # --- ERF: a native ERF rlen that lies ends the file; one inside a pcap record is skipped
    Bad("erf-native-rlen-under-16", erf_ib(1) + erf_ib(2) + erf_ib(3, rlen=8) + erf_ib(4),
        3, 3, ("rlen",), ".erf"),
    Bad("erf-native-rlen-past-end", erf_ib(1) + erf_ib(2) + erf_ib(3, rlen=400) + erf_ib(4),
        3, 3, ("rlen", "truncated"), ".erf"),
    Bad("erf-native-record-cut-at-end", erf_ib(1) + erf_ib(2) + erf_ib(3)[:-8],
        3, 3, ("rlen", "truncated"), ".erf"),
    Bad("erf-in-pcap-rlen-shorter-than-header", erf_in_pcap(erf_ib(3, rlen=12)), 3, 5,
        ("rlen",)),
    Bad("erf-in-pcap-header-cut", erf_in_pcap(erf_ib(3)[:10]), 3, 5, ("erf", "truncated")),
    Bad("erf-in-pcap-wlen-lie", erf_in_pcap(erf_ib(3, wlen=10)), 3, 5,
        ("wlen", "erf", "truncated", "pktlen")),
    # --- IPv4 / UDP lengths (RoCEv2)
    Bad("ipv4-total-length-too-long", frame_lie(add16(roce(3), IPV4_TOTAL_LENGTH, 8)), 3, 5,
        IP_WORDS),
    Bad("ipv4-total-length-past-frame", frame_lie(poke16(roce(3), IPV4_TOTAL_LENGTH, 0xFFFF)),
        3, 5, IP_WORDS),
    Bad("ipv4-total-length-below-header", frame_lie(poke16(roce(3), IPV4_TOTAL_LENGTH, 10)),
        3, 5, IP_WORDS),
    Bad("udp-length-too-long", frame_lie(add16(roce(3), UDP_LENGTH, 68)), 3, 5,
        ("udp.length", "udp length")),
    Bad("udp-length-too-short", frame_lie(poke16(roce(3), UDP_LENGTH, 10)), 3, 5,
        ("udp.length", "udp length")),
    Bad("ipv4-and-udp-lengths-short-by-4-icrc-moves",
        frame_lie(add16(add16(roce(3), IPV4_TOTAL_LENGTH, -4), UDP_LENGTH, -4)), 3, 5,
        ICRC_OR_LENGTHS),
    Bad("ipv4-and-udp-lengths-past-frame",
        frame_lie(add16(add16(roce(3), IPV4_TOTAL_LENGTH, 8), UDP_LENGTH, 8)), 3, 5,
        ICRC_OR_LENGTHS + ("truncated",)),
    Bad("ipv4-and-udp-lengths-leave-no-bth",
        frame_lie(poke16(poke16(roce(3), IPV4_TOTAL_LENGTH, 36), UDP_LENGTH, 16)), 3, 5,
        ICRC_OR_LENGTHS + ("bth",)),
    Bad("ipv6-payload-length-too-long",
        roce_pcap(roce_v6(1), roce_v6(2), add16(roce_v6(3), IPV6_PAYLOAD_LENGTH, 8),
                  roce_v6(4), roce_v6(5)), 3, 5, ("ipv6", "plen", "payload length", "ip length")),
    Bad("ipv6-payload-length-leaves-no-udp",
        roce_pcap(roce_v6(1), roce_v6(2), poke16(roce_v6(3), IPV6_PAYLOAD_LENGTH, 4),
                  roce_v6(4), roce_v6(5)), 3, 5, ("ipv6", "plen", "payload length", "ip length")),
    # --- GRH PayLen (RoCEv1 and native IB)
    Bad("rocev1-grh-paylen-past-frame",
        roce_pcap(roce_v1(1), roce_v1(2), add16(roce_v1(3), GRH_PAYLEN_ROCE_V1, 8), roce_v1(4),
                  roce_v1(5)), 3, 5, ("grh", "paylen", "payload length", "icrc")),
    Bad("rocev1-grh-paylen-short-by-4-icrc-moves",
        roce_pcap(roce_v1(1), roce_v1(2), add16(roce_v1(3), GRH_PAYLEN_ROCE_V1, -4), roce_v1(4),
                  roce_v1(5)), 3, 5, ("grh", "paylen", "payload length", "icrc")),
    Bad("ib-grh-paylen-disagrees-with-lrh",
        ib_frame_lie(add16(ib_global(3), GRH_PAYLEN_IB, 8)), 3, 5,
        ("grh", "paylen", "payload_length", "payload length")),
    # --- LRH PktLen (native IB)
    Bad("lrh-pktlen-past-frame", ib_frame_lie(poke_pktlen(ib(3), 11)), 3, 5,
        ("pktlen", "packet_length", "lrh")),
    Bad("lrh-pktlen-below-lrh", ib_frame_lie(poke_pktlen(ib(3), 1)), 3, 5,
        ("pktlen", "packet_length", "lrh")),
    Bad("lrh-pktlen-short-by-1-word-crcs-move", ib_frame_lie(poke_pktlen(ib(3), 7)), 3, 5,
        ("pktlen", "packet_length", "lrh", "icrc", "vcrc")),
    # --- BTH PadCnt
    Bad("bth-padcnt-exceeds-payload",
        frame_lie(poke_padcnt(ack_without_payload(3), BTH_ROCE, 3)), 3, 5, ("padcnt",)),
    Bad("bth-padcnt-lie-inside-payload", frame_lie(poke_padcnt(roce(3), BTH_ROCE, 1)), 3, 5,
        ("padcnt", "icrc")),
    Bad("ib-bth-padcnt-lie", ib_frame_lie(poke_padcnt(ib(3), BTH_IB, 3)), 3, 5,
        ("padcnt", "icrc", "vcrc")),
    # --- frames cut inside a header by the capture (caplen < orig_len)
    Bad("cut-inside-ethernet", cut(roce_write(3), 6), 3, 5, ("ethernet", "truncated")),
    Bad("cut-inside-ipv4", cut(roce_write(3), 20), 3, 5, ("ipv4", "truncated")),
    Bad("cut-inside-udp", cut(roce_write(3), 38), 3, 5, ("udp", "truncated")),
    Bad("ib-cut-inside-lrh", ib_cut(ib_global(3), 5), 3, 5, ("lrh", "truncated")),
    # (a header of an InfiniBand/RoCE packet cut by a snap length is not a failure:
    # tests/cli/test_headers_only.py)
    # --- gzip: data cut after three records (records 1-3 readable, the cut is record 4), and
    #     a truncated pcap inside whole gzip data
    Bad("gzip-data-cut", gzip_cut_after([roce(k) for k in range(1, 7)], 3), 4, 4,
        ("gzip", "truncated"), ".pcap.gz"),
    Bad("gzip-of-a-truncated-pcap", gzip.compress(roce_pcap(roce(1), roce(2), roce(3))[:-10]),
        3, 3, ("truncated",), ".pcap.gz"),
]


CHECK_PATHS = [pytest.param((), id="default"),
               pytest.param(("-c", "1000000"), id="scanner"),
               pytest.param(("--where", "frame > 0"), id="dissector")]
"""``check`` and ``stats`` scan in batches; ``check`` of a classic pcap file only counts
(``ibwire.scan.tally``) unless ``-c`` asks for a prefix (here one longer than every case); with
``--where`` (here one that keeps every record) they dissect packet by packet: all must keep
the contract."""


def bad_params(reason_checked: bool) -> list[Any]:
    """The BAD cases; those whose reason is wrong today xfail where the reason is checked."""
    params = []
    for case in BAD:
        marks = []
        if reason_checked and case.reason_bug:
            marks.append(pytest.mark.xfail(strict=True, reason=case.reason_bug))
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


def write_case(tmp_path: Path, case: Bad) -> Path:
    path = tmp_path / f"capture{case.suffix}"
    path.write_bytes(case.data)
    return path


@pytest.mark.parametrize("how", CHECK_PATHS)
@pytest.mark.parametrize("case", bad_params(reason_checked=True))
def test_check_reports_the_bad_record_and_goes_on(tmp_path: Path, case: Bad,
                                                  how: tuple[str, ...]) -> None:
    path = write_case(tmp_path, case)
    result = cli("check", *how, path)
    assert result.status == 1, result
    assert result.err == "", result.err
    # the bad record, and only it, is reported, with a reason that names what is wrong
    assert record_numbers(result.out) == {case.bad}, result.out
    reason = check_reason(result, case.bad)
    assert names_one_of(reason, case.words), f"{reason!r} names none of {case.words}"
    # the records before it and, where the format allows, after it were all scanned
    summary = check_summary(cli("check", "--json", *how, path))
    assert summary["records"] == case.scanned, summary
    assert summary["failed"] == 1, summary
    assert case.good <= summary["ib"] <= case.good + 1, summary
    assert summary["other"] == 0, summary


@pytest.mark.parametrize("case", bad_params(reason_checked=True))
def test_show_prints_every_record_and_the_bad_one_with_its_reason(tmp_path: Path,
                                                                   case: Bad) -> None:
    result = cli("show", write_case(tmp_path, case))
    assert result.status == 0, result
    assert result.err == "", result.err
    lines = result.lines
    assert [line.split()[0] for line in lines] == [str(n) for n in range(1, case.scanned + 1)]
    for number, line in enumerate(lines, 1):
        if number == case.bad:
            reason = show_reason(line)
            assert reason and names_one_of(reason, case.words), line
        else:
            assert "ICRC ok" in line and "BAD" not in line and "[" not in line, line


@pytest.mark.parametrize("how", CHECK_PATHS)
@pytest.mark.parametrize("case", bad_params(reason_checked=False))
def test_stats_counts_every_record_and_the_failure(tmp_path: Path, case: Bad,
                                                   how: tuple[str, ...]) -> None:
    result = cli("stats", "--json", *how, write_case(tmp_path, case))
    assert result.status == 0, result
    assert result.err == "", result.err
    totals = json.loads(result.out)["totals"]
    assert totals["records"] == case.scanned, totals
    assert case.good <= totals.get("ib_packets", 0) <= case.good + 1, totals
    failures = [totals.get(key, 0) for key in ("errors", "icrc_bad", "vcrc_bad")]
    assert max(failures) == 1, totals


STATS_CASES = [case for case in BAD if case.id in (
    "pcap-truncated-record-data", "pcapng-epb-caplen-exceeds-block", "ipv4-total-length-too-long")]


@pytest.mark.parametrize("case", STATS_CASES, ids=lambda c: c.id)
def test_stats_does_not_count_a_failed_record_as_other_traffic(tmp_path: Path,
                                                               case: Bad) -> None:
    totals = json.loads(cli("stats", "--json", write_case(tmp_path, case)).out)["totals"]
    assert totals.get("other", 0) == 0, totals


@pytest.mark.parametrize("case", STATS_CASES, ids=lambda c: c.id)
def test_stats_names_the_failing_record(tmp_path: Path, case: Bad) -> None:
    result = cli("stats", write_case(tmp_path, case))
    assert result.status == 0
    assert case.bad in record_numbers(result.out + result.err), result.out


def test_the_pokes_hit_their_fields() -> None:
    """The byte offsets above hold the fields the dissector reads (so each lie is the lie
    its case says it is)."""
    fields = parse(roce(3)).fields()
    assert u16(roce(3), IPV4_TOTAL_LENGTH) == fields["ip.len"]
    assert u16(roce(3), UDP_LENGTH) == fields["udp.length"]
    assert padcnt(roce(3), BTH_ROCE) == fields["bth.padcnt"] == 2
    assert [(h.name, h.offset) for h in parse(roce_write(3)).headers][-2:] == [
        ("bth", 42), ("reth", 54)]
    assert u16(roce_v6(3), IPV6_PAYLOAD_LENGTH) == parse(roce_v6(3)).fields()["ipv6.plen"]
    assert u16(roce_v1(3), GRH_PAYLEN_ROCE_V1) == parse(roce_v1(3)).fields()["grh.paylen"]
    ib_fields = parse(ib(3), "infiniband").fields()
    assert u16(ib(3), LRH_PKTLEN) & 0x7FF == ib_fields["lrh.pktlen"] == 8
    assert padcnt(ib(3), BTH_IB) == ib_fields["bth.padcnt"]
    assert poke_pktlen(ib(3), 8) == ib(3) and poke_padcnt(roce(3), BTH_ROCE, 2) == roce(3)
    global_fields = parse(ib_global(3), "infiniband").fields()
    assert u16(ib_global(3), GRH_PAYLEN_IB) == global_fields["grh.paylen"]
    assert [(h.name, h.offset) for h in parse(ib_global(3), "infiniband").headers] == [
        ("lrh", 0), ("grh", 8), ("bth", 48)]


def test_good_inputs_of_every_format_check_clean(tmp_path: Path) -> None:
    """The unbroken versions of the inputs above verify (exit 0), so a failure above is the
    lie's doing."""
    inputs = {
        "rocev2.pcap": roce_pcap(roce(1), roce_write(2), roce_v6(3), roce_v1(4)),
        "ib.pcap": ib_pcap(ib(1), ib_global(2)),
        "ng.pcapng": GOOD_PCAPNG + pcapng_block() + NEXT_EPBS,
        "native.erf": erf_ib(1) + erf_ib(2) + erf_ib(3),
        "erf-in.pcap": erf_in_pcap(erf_ib(3)),
        "whole.pcap.gz": gzip.compress(roce_pcap(*[roce(k) for k in range(1, 7)])),
    }
    for name, data in inputs.items():
        (tmp_path / name).write_bytes(data)
    result = cli("check", "--json", *(tmp_path / name for name in inputs))
    assert result.status == 0, result
    summaries = json_lines(result)
    assert [(s["records"], s["ib"], s["failed"]) for s in summaries] == [
        (4, 4, 0), (2, 2, 0), (5, 5, 0), (3, 3, 0), (5, 5, 0), (6, 6, 0)]


# ----------------------------------------------------------------------------- byte offsets
ERF_RLEN_LIE = erf_ib(3, rlen=12)


@pytest.mark.parametrize(("how", "good_before"), [
    pytest.param("file", 2, id="file"),
    pytest.param("file", 70_000, id="file-past-the-first-batch"),  # > one scanner batch
    pytest.param("gzip", 2, id="gzip"),
    pytest.param("stdin", 2, id="stdin"),
])
def test_check_names_the_byte_of_a_lying_erf_rlen(tmp_path: Path, how: str,
                                                  good_before: int) -> None:
    before = pcap_record(T0, erf_ib(1)) * good_before
    data = pcap_header(197) + before + pcap_record(T0, ERF_RLEN_LIE) + pcap_record(T0, erf_ib(5))
    rlen_at = 24 + len(before) + 16 + 10  # pcap header, records, record header, ERF rlen
    if how == "stdin":
        result = cli("check", "-", stdin=data)
    else:
        path = tmp_path / ("capture.pcap.gz" if how == "gzip" else "capture.pcap")
        path.write_bytes(gzip.compress(data) if how == "gzip" else data)
        result = cli("check", path)
    assert result.status == 1, result
    bad = good_before + 1
    reason = check_reason(result, bad)
    assert "rlen" in reason, reason
    assert re.findall(r"\bbyte (\d+)", reason) == [str(rlen_at)], reason


# ----------------------------------------------------------------------------- caplen > snaplen
SNAPLEN_LIE = records([(roce(1), None), (roce_write(2), None), (roce(3), None)], snaplen=66)
"""Record 2 (82 bytes) is longer than the file's snaplen (66): a usable record, with a warning."""


@pytest.mark.parametrize("how", CHECK_PATHS)
def test_caplen_over_snaplen_is_still_verified(tmp_path: Path, how: tuple[str, ...]) -> None:
    path = tmp_path / "capture.pcap"
    path.write_bytes(SNAPLEN_LIE)
    result = cli("check", "--json", *how, path)
    assert result.status == 0, result
    assert "Traceback" not in result.err
    summary = check_summary(result)
    assert (summary["records"], summary["ib"], summary["failed"]) == (3, 3, 0)
    shown = cli("show", path)
    assert shown.status == 0 and len(shown.lines) == 3
    assert all("ICRC ok" in line for line in shown.lines), shown.out


@pytest.mark.parametrize("how", CHECK_PATHS)
def test_caplen_over_snaplen_is_reported_with_its_record(tmp_path: Path,
                                                         how: tuple[str, ...]) -> None:
    path = tmp_path / "capture.pcap"
    path.write_bytes(SNAPLEN_LIE)
    result = cli("check", *how, path)
    assert result.status == 0
    assert record_numbers(result.out) == {2}, result.out
    assert "snaplen" in check_reason(result, 2)


# ----------------------------------------------------------------------------- gzip, stdin
STDIN_INPUTS = {
    "pcap": (GOOD_PCAP, roce_pcap(roce(1), roce(2)) + pcap_record(T0, roce(3))[:40]),
    "gzip": (gzip.compress(GOOD_PCAP), gzip_cut_after([roce(1), roce(2), roce(3), roce(4)], 2)),
}


@pytest.mark.parametrize("kind", sorted(STDIN_INPUTS))
def test_stdin_good_capture(kind: str) -> None:
    good, _ = STDIN_INPUTS[kind]
    result = cli("check", "--json", "-", stdin=good)
    assert result.status == 0, result
    assert (check_summary(result)["records"], check_summary(result)["ib"]) == (3, 3)
    shown = cli("show", "-", stdin=good)
    assert shown.status == 0 and [line.split()[0] for line in shown.lines] == ["1", "2", "3"]


@pytest.mark.parametrize("kind", sorted(STDIN_INPUTS))
def test_stdin_truncated_capture_reports_the_record(kind: str) -> None:
    _, truncated = STDIN_INPUTS[kind]
    result = cli("check", "-", stdin=truncated)
    assert result.status == 1, result
    assert result.err == ""
    assert record_numbers(result.out) == {3}, result.out
    reason = check_reason(result, 3)
    assert names_one_of(reason, ("truncated", "gzip")), reason
    summary = check_summary(cli("check", "--json", "-", stdin=truncated))
    assert (summary["records"], summary["ib"], summary["failed"]) == (3, 2, 1)
    shown = cli("show", "-", stdin=truncated)
    assert shown.status == 0 and len(shown.lines) == 3
    assert names_one_of(show_reason(shown.lines[2]), ("truncated", "gzip")), shown.out
    totals = json.loads(cli("stats", "--json", "-", stdin=truncated).out)["totals"]
    assert (totals["records"], totals["ib_packets"], totals["errors"]) == (3, 2, 1)


@pytest.mark.parametrize("verb", ["check", "show", "stats"])
@pytest.mark.parametrize("data", [b"", b"not a capture at all", pcap_header()[:12],
                                  GZIP_EMPTY_CUT], ids=["empty", "bad-magic",
                                                        "truncated-header", "gzip-cut"])
def test_stdin_unreadable_is_one_line_and_exit_two(verb: str, data: bytes) -> None:
    result = cli(verb, "-", stdin=data)
    assert result.status == 2, result
    assert "Traceback" not in result.err
    assert len(result.err_lines) == 1 and "stdin" in result.err, result.err
    assert result.out == ""


def test_gzip_file_good_and_truncated(tmp_path: Path) -> None:
    good = tmp_path / "good.pcap.gz"
    good.write_bytes(gzip.compress(roce_pcap(*[roce(k) for k in range(1, 7)])))
    cut_file = tmp_path / "cut.pcap.gz"
    cut_file.write_bytes(gzip_cut_after([roce(k) for k in range(1, 7)], 3))
    result = cli("check", "--json", good, cut_file)
    assert result.status == 1, result
    summaries = {s["file"]: s for s in json_lines(result)}
    assert {name: [f["record"] for f in s["failures"]] for name, s in summaries.items()} == \
        {str(good): [], str(cut_file): [4]}
    assert (summaries[str(good)]["records"], summaries[str(good)]["failed"]) == (6, 0)
    assert (summaries[str(cut_file)]["records"], summaries[str(cut_file)]["ib"]) == (4, 3)


# ----------------------------------------------------------------------------- several files
@pytest.mark.parametrize("order", [
    ("good", "unreadable", "failing", "missing"),
    ("unreadable", "failing", "good", "missing"),
    ("failing", "missing", "good", "unreadable"),
    ("unreadable", "good", "failing"),
    ("failing", "good"),
], ids="-".join)
def test_several_files_one_bad(tmp_path: Path, order: tuple[str, ...]) -> None:
    paths = {"good": tmp_path / "good.pcap", "unreadable": tmp_path / "unreadable.pcap",
             "failing": tmp_path / "failing.pcap", "missing": tmp_path / "missing.pcap"}
    paths["good"].write_bytes(GOOD_PCAP)
    paths["unreadable"].write_bytes(b"\x00" * 64)
    paths["failing"].write_bytes(roce_pcap(roce(1), broken_icrc(roce(2)), roce(3)))
    result = cli("check", *(paths[name] for name in order))
    file_level = [name for name in order if name in ("unreadable", "missing")]
    assert result.status == (2 if file_level else 1), result
    assert "Traceback" not in result.err
    # one stderr line per unreadable file, naming it
    assert len(result.err_lines) == len(file_level), result.err
    for name, line in zip(file_level, result.err_lines, strict=True):
        assert str(paths[name]) in line, line
    # the readable files are still checked and reported
    out = result.out
    assert re.search(rf"^{re.escape(str(paths['good']))}: OK: 3 records", out, re.M), out
    failing = [line for line in result.lines if line.startswith(str(paths["failing"]))]
    assert any("record 2" in line and "ICRC" in line for line in failing), out
    assert any("FAILED" in line and "3 records" in line for line in failing), out
    assert record_numbers(out) == {2}, out


# ----------------------------------------------------------------------------- other traffic
@pytest.mark.parametrize("how", CHECK_PATHS)
def test_capture_of_other_traffic_only_checks_clean(tmp_path: Path,
                                                    how: tuple[str, ...]) -> None:
    path = tmp_path / "other.pcap"
    path.write_bytes(roce_pcap(*OTHER_FRAMES))
    result = cli("check", "--json", *how, path)
    assert result.status == 0, result
    summary = check_summary(result)
    assert (summary["records"], summary["ib"], summary["other"], summary["failed"]) == (
        len(OTHER_FRAMES), 0, len(OTHER_FRAMES), 0)
    text = cli("check", *how, path)
    assert text.status == 0 and record_numbers(text.out) == set()
    assert f"{len(OTHER_FRAMES)} other; 0 failed" in text.out
    shown = cli("show", path)
    assert shown.status == 0 and len(shown.lines) == len(OTHER_FRAMES)
    assert not any("BAD" in line or "[" in line for line in shown.lines), shown.out
    totals = json.loads(cli("stats", "--json", path).out)["totals"]
    assert totals["other"] == len(OTHER_FRAMES) and totals.get("ib_packets", 0) == 0
    assert totals.get("errors", 0) == 0


def test_other_link_type_is_other_traffic(tmp_path: Path) -> None:
    path = tmp_path / "wifi.pcap"
    path.write_bytes(pcap_file([b"\x01\x02\x03" * 10, b"\x04" * 40], 105))
    summary = check_summary(cli("check", "--json", path))
    assert (summary["records"], summary["other"], summary["failed"]) == (2, 2, 0)


OTHER_WITH_LYING_IP = {
    # TCP segment with IPv4 total length 0: what a capture of a host using TSO shows
    "tcp-tso-ipv4-total-length-0": ipv4_frame(6, TCP_SEGMENT, total_length=0),
    # DNS over IPv6 whose payload length (4) leaves no room for the UDP header
    "dns-ipv6-payload-length-4": bytes.fromhex("020000000002020000000001" "86dd"
                                               "6000000000041140") + bytes(32)
    + struct.pack(">HHHH", 5353, 53, 12, 0) + b"abcd",
}
@pytest.mark.parametrize("reader", [
    pytest.param("check", id="check-scanner"),
    pytest.param("check-where", id="check-dissector"),
    pytest.param("show"),
    pytest.param("stats", id="stats-scanner"),
    pytest.param("stats-where", id="stats-dissector"),
])
@pytest.mark.parametrize("name", sorted(OTHER_WITH_LYING_IP))
def test_other_traffic_with_a_lying_ip_length_is_other_not_a_failure(
        tmp_path: Path, name: str, reader: str) -> None:
    path = tmp_path / "capture.pcap"
    path.write_bytes(roce_pcap(roce(1), OTHER_WITH_LYING_IP[name], roce(3)))
    if reader == "show":
        result = cli("show", path)
        assert result.status == 0 and len(result.lines) == 3
        assert "[" not in result.lines[1] and "BAD" not in result.lines[1], result.out
        return
    how = ("--where", "frame > 0") if reader.endswith("-where") else ()
    if reader.startswith("stats"):
        totals = json.loads(cli("stats", "--json", *how, path).out)["totals"]
        assert (totals["records"], totals["ib_packets"], totals["other"]) == (3, 2, 1)
        assert totals.get("errors", 0) == 0, totals
        return
    result = cli("check", "--json", *how, path)
    summary = check_summary(result)
    assert (summary["records"], summary["ib"], summary["other"], summary["failed"]) == (
        3, 2, 1, 0), result.out
    assert result.status == 0


# ----------------------------------------------------------------------------- show details
def test_show_time_of_an_error_record_is_not_negative(tmp_path: Path) -> None:
    """An error record has no timestamp: show prints '-' for it, not a time relative to 0."""
    path = tmp_path / "capture.pcapng"
    path.write_bytes(GOOD_PCAPNG + pcapng_block(caplen=400) + NEXT_EPBS)
    result = cli("show", path)
    assert result.status == 0 and len(result.lines) == 5
    times = [line.split()[1] for line in result.lines]
    assert "-" in times, result.out
    assert all(float(t) >= 0 for t in times if t != "-"), result.out


# ----------------------------------------------------------------------------- fuzz
FUZZ_SEEDS = [
    roce_pcap(roce(1), roce_write(2), roce_v6(3), roce_v1(4), *OTHER_FRAMES[:2]),
    ib_pcap(ib(1), ib_global(2)),
    GOOD_PCAPNG + NEXT_EPBS,
    erf_ib(1) + erf_ib(2),
    erf_in_pcap(erf_ib(3)),
]


def assert_cli_copes(path: Path) -> None:
    """check and stats (both paths) and show on ``path``: no crash, a status in {0, 1, 2}, the
    same number of records from each, a clean one-line error when the file is unreadable."""
    counts = []
    for argv in (["check", "--json"], ["check", "--json", "--where", "frame > 0"], ["show"],
                 ["stats", "--json"], ["stats", "--json", "--where", "frame > 0"]):
        verb = argv[0]
        result = cli(*argv, path)
        assert result.status in (0, 1, 2), (verb, result)
        assert "Traceback" not in result.err, (verb, result.err)
        if result.status == 2:
            assert len(result.err_lines) == 1 and str(path) in result.err, (verb, result.err)
            assert result.out == "", (verb, result.out)
            counts.append(None)
            continue
        assert result.err == "", (verb, result.err)
        if verb == "check":
            summary = check_summary(result)
            assert result.status == (1 if summary["failed"] else 0), result
            failures = {f["record"] for f in summary["files"][0]["failures"]}
            assert len(failures) == summary["failed"]
            counts.append(summary["records"])
        elif verb == "show":
            assert result.status == 0
            numbers = [line.split()[0] for line in result.lines]
            assert numbers == [str(n) for n in range(1, len(numbers) + 1)], result.out
            counts.append(len(numbers))
        else:
            assert result.status == 0
            counts.append(json.loads(result.out)["totals"].get("records", 0))
    assert len(set(counts)) == 1, counts


@st.composite
def mutated_captures(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(FUZZ_SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        how = draw(st.sampled_from(["set", "set", "set", "insert", "delete", "truncate"]))
        if how == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif how == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        else:
            del data[at:]
    return bytes(data)


FUZZ_FILES = itertools.count()
"""Each example gets its own file (a file is never rewritten while a reader may map it)."""
FUZZ = settings(max_examples=200, deadline=5000, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes_never_crash_the_cli(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / f"random{next(FUZZ_FILES)}.pcap"
    path.write_bytes(data)
    assert_cli_copes(path)


@FUZZ
@given(data=mutated_captures())
def test_mutated_captures_never_crash_the_cli(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / f"mutated{next(FUZZ_FILES)}.pcap"
    path.write_bytes(data)
    assert_cli_copes(path)

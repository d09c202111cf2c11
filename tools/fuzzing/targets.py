"""The campaign's entry points, each a function of the fuzzer's bytes, and their oracles.

A target returns quietly when ibwire handled its input (a result, or an ``IbwireError``); it
raises :class:`Finding` when the C engines and their pure-Python twins disagree; any other
exception is a finding too (libFuzzer reports it with the input), and so is a crash or a
sanitizer report in the C code, or a hang (libFuzzer's ``-timeout``).

* ``parse``: ``ibwire.parse`` of one frame on its link (also ``strict=True``), its fields, and
  the CRC engine's verdict, C against the twin;
* ``scan``: the capture image indexed (the file map, the pcap and pcapng walks) and scanned,
  every column compared between the twins, the connection grouping too;
* ``rewrite``: ``ibwire rewrite`` with an edit (chosen by the input's last byte) through the
  C kernel and through its numpy twin: the output files must be identical;
* ``show``: ``ibwire show`` as lines, header trees (``-V``), JSON and with ``--where``, the C
  text filler against its twin;
* ``check``: ``ibwire check`` (the counting scan, C against the twin).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from tools.fuzzing.images import LINKS, capture_input, frame_input

import ibwire
from ibwire.errors import IbwireError


class Finding(AssertionError):
    """The C engine and its twin disagree (or another oracle failed) on this input."""


#: Where the inputs' capture files are written: $FUZZ_WORK, or a new directory in /dev/shm
#: (libFuzzer ends the process without Python's exit handlers: the caller removes it).
WORK = Path(os.environ.get("FUZZ_WORK") or tempfile.mkdtemp(
    prefix="ibwire-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))


# ------------------------------------------------------------------ twins
def _swaps() -> list[tuple[Any, str, Any]]:
    """(module, attribute, twin value) for every C engine that is chosen once at import."""
    import ibwire.analysis.connections as connections
    import ibwire.crc as crc
    import ibwire.pcap as pcap
    import ibwire.pcap.filemap as filemap
    import ibwire.rewrite.batch as batch
    import ibwire.scan as scan
    import ibwire.scan.text as text
    from ibwire.analysis import _streams_python
    from ibwire.crc import _python as crc_python
    from ibwire.pcap import _filemap_python
    from ibwire.pcap import _python as pcap_python
    from ibwire.rewrite import vector
    from ibwire.scan import _python as scan_python
    from ibwire.scan import _text_python

    _ = scan.implementation, pcap.implementation, filemap.engine()  # loaded, then swapped
    swaps: list[tuple[Any, str, Any]] = [
        (connections, "_streams", _streams_python), (filemap, "_engine", _filemap_python),
        (batch, "_kernel", vector), (text, "_engine", _text_python),
        (pcap, "pcapng_epbs", pcap_python.pcapng_epbs)]
    swaps += [(scan, name, getattr(scan_python, name))
              for name in ("scan_frames", "pcap_records", "scan_pcap")]
    swaps += [(crc, name, getattr(crc_python, name))
              for name in ("locate", "icrc", "vcrc", "verify", "fix", "fix_batch", "verify_batch")]
    swaps += [(m, "implementation", "python") for m in (connections, filemap, batch, text, pcap,
                                                          scan, crc)]
    return swaps


_SWAPS: list[tuple[Any, str, Any]] = []


@contextlib.contextmanager
def twins() -> Iterator[None]:
    """Every engine is its pure-Python twin inside (the ones chosen per call through
    IBWIRE_NO_EXTENSIONS, the ones chosen at import by swapping the module's name)."""
    if not _SWAPS:
        _SWAPS.extend(_swaps())
    saved = [(module, name, getattr(module, name)) for module, name, _ in _SWAPS]
    before = os.environ.get("IBWIRE_NO_EXTENSIONS")
    os.environ["IBWIRE_NO_EXTENSIONS"] = "1"
    for module, name, value in _SWAPS:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        if before is None:
            del os.environ["IBWIRE_NO_EXTENSIONS"]
        else:
            os.environ["IBWIRE_NO_EXTENSIONS"] = before


def both(work: Callable[[], Any]) -> tuple[Any, Any]:
    """``work()`` with the C engines, then with the twins; an ``IbwireError`` is a result
    (its class and text), so the twins must fail alike."""
    results = []
    for context in (contextlib.nullcontext(), twins()):
        with context:
            try:
                results.append(work())
            except IbwireError as exc:
                results.append((type(exc).__name__, str(exc)))
    return results[0], results[1]


def agree(what: str, c: Any, python: Any) -> None:
    if not _equal(c, python):
        raise Finding(f"{what}: the C engine and its twin disagree:\nC:      {c!r}\n"
                      f"python: {python!r}")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) \
            and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


# ------------------------------------------------------------------ entry points
def parse(data: bytes) -> None:
    got = frame_input(data)
    if got is None:
        return
    frame, link = got
    for strict in (False, True):
        try:
            packet = ibwire.parse(frame, link, strict=strict)
            packet.fields()
        except IbwireError:
            pass
    agree("crc verify", *both(lambda: _crc_verdicts(frame, link)))


def _crc_verdicts(frame: bytes, link: str) -> list[Any]:
    import ibwire.crc as crc

    out: list[Any] = []
    for lenient in (False, True):
        try:
            out.append(tuple(crc.verify(frame, link, lenient=lenient)))
        except IbwireError as exc:
            out.append(type(exc).__name__)
    return out


def _image(data: bytes) -> Path | None:
    image = capture_input(data)
    if image is None:
        return None
    path = WORK / "in.pcap"
    path.write_bytes(image)
    return path


def scan(data: bytes) -> None:
    path = _image(data)
    if path is None:
        return
    agree("index", *both(lambda: _indexed(path)))
    agree("scan", *both(lambda: _scanned(path)))


def _indexed(path: Path) -> tuple[Any, ...]:
    from ibwire.pcap import index_capture

    index = index_capture(path)
    return (bytes(index.buffer), index.offsets, index.lengths, index.link_codes,
            [str(e) for e in index.errors], [str(w) for w in index.warnings])


def _scanned(path: Path) -> list[Any]:
    from ibwire.analysis import connections
    from ibwire.scan import scan_capture

    out: list[Any] = []
    for batch in scan_capture(path):
        cols = dict(batch.columns)
        out.append(cols)
        keys = [cols[k].astype(np.uint64) for k in ("bth.destqp", "bth.opcode") if k in cols]
        if keys and len(keys[0]):
            out.append(connections._streams.group_rows(tuple(keys)))
    return out


def _cli(verb: str, argv: list[str]) -> tuple[int | None, bytes, str]:
    """Run ``ibwire VERB ARGV`` in this process: (status, stdout bytes, stderr)."""
    from ibwire.cli.main import parser, verb_module

    args = parser(verb).parse_args([verb, *argv])
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = verb_module(verb).run(args)
        out.flush()
    said = "".join(line for line in err.getvalue().splitlines(keepends=True)
                   if not line.startswith("INFO: Instrumenting"))  # atheris, on a first import
    return status, out.buffer.getvalue(), said  # type: ignore[attr-defined]


SHOW_MODES = ([], ["-V"], ["--json"], ["--where", "bth.opcode < 10 or error"])


def show(data: bytes) -> None:
    path = _image(data)
    if path is None:
        return
    mode = SHOW_MODES[data[-1] % len(SHOW_MODES)]
    agree(f"show {mode}", *both(lambda: _cli("show", [*mode, str(path)])))


def check(data: bytes) -> None:
    path = _image(data)
    if path is None:
        return
    json = ["--json"] if data[-1] % 2 else []
    agree("check", *both(lambda: _cli("check", [*json, str(path)])))


#: Edits for ``ibwire rewrite`` (one per input): each reaches the batch kernel or its fallback.
EDITS = (["--qpmap", "0x11:0x22,1:0xabcdef"], ["--psn-offset", "1000"], ["--pkey", "0x8001"],
         ["--ttl", "-1"], ["--dscp", "46"], ["--ecn", "3"], ["--tclass", "7"],
         ["--flowlabel", "5"], ["--enet-vlan", "add", "--enet-vlan-tag", "5"],
         ["--enet-vlan", "del"], ["--enet-smac", "02:00:00:00:00:01"], ["--lidmap", "1:2,3:4"],
         ["--srcipmap", "0.0.0.0/0:10.0.0.0/8"], ["--mtu-trunc", "80"], ["--fixcsum"],
         ["--portmap", "4791:4792"], ["--keep-bad-icrc", "--qpmap", "0x11:0x22"])


def rewrite(data: bytes) -> None:
    path = _image(data)
    if path is None:
        return
    edit = EDITS[data[-1] % len(EDITS)]
    out = WORK / "out.pcap"

    def run() -> tuple[Any, ...]:
        out.unlink(missing_ok=True)
        status, text, _err = _cli("rewrite", [*edit, str(path), str(out)])
        return status, text, out.read_bytes() if out.exists() else None

    agree(f"rewrite {edit}", *both(run))


TARGETS: dict[str, Callable[[bytes], None]] = {
    "parse": parse, "scan": scan, "rewrite": rewrite, "show": show, "check": check}


def seeds() -> Iterator[bytes]:
    """Starting inputs: the project's sample captures as raw images (first byte 0), a few
    frames of each link, and structured inputs of every size class."""
    root = Path(__file__).resolve().parents[2] / "captures"
    for capture in sorted(root.glob("*.pcap*")):
        yield b"\0" + capture.read_bytes()
    for i in range(len(LINKS)):
        yield bytes([0, i]) + bytes(64)
    for n in (8, 64, 512, 4096):
        yield b"\1" + bytes(range(256)) * (n // 256) + bytes(range(n % 256))


if __name__ == "__main__":  # python -m tools.fuzzing.targets TARGET FILE...: replay inputs
    target = TARGETS[sys.argv[1]]
    for name in sys.argv[2:]:
        target(Path(name).read_bytes())
    print(argparse.Namespace(replayed=len(sys.argv) - 2))

"""Fuzz bytes straight into ibwire's Cython modules, each against its pure-Python twin: no
capture file, no hypothesis, one call of the compiled function per input (run by
``tools/fuzz_cython.py``; ``tools/fuzz_c.sh`` names them ``cy-NAME``).

Targets (the module, what an input becomes, the oracle besides "no sanitizer report"):

* ``tally``: scan/_tally.pyx. A buffer of pcap records or pcapng blocks (the input's own
  bytes, so libFuzzer mutates the container) and a window; ``check_pcap``, ``check_pcapng``,
  ``pcap_sync``, ``pcapng_sync``: the same results as ``scan._tally_python``.
* ``text``: scan/_text.pyx. Templates of every op, columns of random values: ``fill``, the
  same bytes as ``scan._text_python``; made wrong (an index, an op, a short column), it must
  refuse with an exception, never read outside.
* ``kernel``: rewrite/_kernel.pyx. Frames (the input's bytes) and one of the rewrite option
  sets of tests/rewrite/test_rewrite_batch.py: ``edit_frames``, the same frames and fallbacks
  as ``rewrite.vector``.
* ``streams``: analysis/_streams.pyx. Key columns: ``group_rows``, as
  ``analysis._streams_python``.
* ``observer``: transport/_observer.pyx. A connection's rows (opcodes, PSN steps, NAK
  syndromes, lengths, times): the same story as ``transport._observer_python``, fed whole or
  in pieces.
* ``engine``: pcap/_engine.pyx. ``pcapng_epbs`` over blocks and interfaces, ``erf_block`` over
  ERF records: as ``pcap._python``.

A disagreement raises :class:`Finding` with both results; an exception other than the
expected refusals is a finding too (atheris reports it). Replay an input without the fuzzer:
``python -m tools.fuzzing.cython_targets NAME FILE``.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

LINKS = (0, 1, 2, 3, 255)
MAX_CAPLEN = 256 * 1024 * 1024


class Finding(AssertionError):
    """A compiled module and its Python twin disagreed."""


def agree(what: str, ours: Any, theirs: Any) -> None:
    if not _equal(ours, theirs):
        raise Finding(f"{what}: compiled {ours!r}\n      twin {theirs!r}")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return bool(a == b)


class Take:
    """An input read as a sequence of choices (zeros once it runs out)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def left(self) -> int:
        return len(self.data) - self.at

    def u(self, size: int) -> int:
        chunk = self.data[self.at:self.at + size]
        self.at += len(chunk)
        return int.from_bytes(chunk.ljust(size, b"\0"), "little")

    def pick(self, options: tuple[Any, ...] | list[Any]) -> Any:
        return options[self.u(1) % len(options)]

    def rest(self) -> bytes:
        chunk = self.data[self.at:]
        self.at = len(self.data)
        return chunk

    def bytes(self, most: int) -> bytes:
        n = min(self.u(2) % (most + 1), self.left())
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk


def exact(data: bytes) -> np.ndarray:
    """``data`` in a heap buffer of exactly its size (under ``PYTHONMALLOC=malloc``)."""
    return np.frombuffer(bytes(data), np.uint8).copy()


# ------------------------------------------------------------------ scan/_tally.pyx
def tally(data: bytes) -> None:
    from ibwire.scan import _tally, _tally_python

    t = Take(data)
    swapped, header, link = bool(t.u(1) & 1), t.pick((0, 0, 1, 2)), t.pick(LINKS)
    snaplen, cap = t.pick((0, 0, 64, 65535)), 1 + t.u(1) % 8
    max_len = t.pick((MAX_CAPLEN, MAX_CAPLEN, 1 << 18, 96))
    faces = [(t.pick((0, 64, 1500)), t.pick(LINKS), t.pick((-1, 0, 0, 1, 2)))
             for _ in range(t.u(1) % 4)]
    depth, search = 1 + t.u(1) % 8, t.pick((1, 7, 300, 1024 * 1024))
    buf = exact(t.rest())
    pos = t.u(2) % (len(buf) + 1) if buf.size else 0
    for name, args in (
            ("check_pcap", (swapped, max_len, snaplen, link, header, cap)),
            ("check_pcapng", (swapped, max_len, faces, cap)),
            ("pcap_sync", (swapped, max_len, 10**6 if depth & 1 else 10**9, depth, search)),
            ("pcapng_sync", (swapped, max_len, depth, search))):
        ours = getattr(_tally, name)(buf, pos, len(buf), *args)
        agree(name, ours, getattr(_tally_python, name)(buf, pos, len(buf), *args))


# ------------------------------------------------------------------ scan/_text.pyx
def text(data: bytes) -> None:
    from ibwire.scan import _text, _text_python
    from ibwire.scan.text import HEX, LITERAL, NUMBER, PREFIX, SECONDS, SMALL, TEXT, Templates

    t = Take(data)
    kinds = ((NUMBER, 6, 0), (NUMBER, 0, 0), (HEX, 0, 0), (HEX, 8, PREFIX), (SMALL, 0, 0),
             (SECONDS, 11, 0), (SECONDS, 0, 0), (NUMBER, 40, 0), (HEX, 30, PREFIX))
    literals = ("a", " → ", "", "é%s", "x" * 300, "\0")
    templates = Templates()
    for _ in range(1 + t.u(1) % 4):
        ops: list[tuple[int, str, int, int]] = []
        for _ in range(t.u(1) % 8):
            pick = t.u(1) % 3
            if pick == 0:
                ops.append((LITERAL, t.pick(literals), 0, 0))
            elif pick == 1:
                ops.append((TEXT, f"s{t.u(1) % 2}", 0, 0))
            else:
                kind, width, flags = t.pick(kinds)
                ops.append((kind, f"i{t.u(1) % 2}", width, flags))
        templates.add(ops)
    rows = t.u(1) % 24
    starts, flat, pool = templates.flat()
    ints = [exact(struct.pack(f"<{rows}Q", *(t.u(8) for _ in range(rows)))).view(np.uint64)
            for _ in templates.ints]
    strs = [[t.pick(("", "10.0.0.1", "fe80::1", "→é", "z" * 500)) for _ in range(rows)]
            for _ in templates.strs]
    template = np.array([t.u(1) % (len(starts) - 1) for _ in range(rows)], np.int32)
    wrong = t.u(1) % 4 == 0
    if wrong:  # one input made wrong: the compiled filler must refuse it
        template, starts, flat, ints, strs = _garbage(t, template, starts, flat, ints, strs)
        try:
            _text.fill(template, starts, flat, pool, ints, strs, "\n")
        except (ValueError, TypeError, IndexError, OverflowError):
            pass
        return
    ours = _text.fill(template, starts, flat, pool, ints, strs, "\n")
    agree("fill", ours, _text_python.fill(template, starts, flat, pool, ints, strs, "\n"))


def _garbage(t: Take, template: np.ndarray, starts: np.ndarray, ops: np.ndarray,
             ints: list[np.ndarray], strs: list[list[str]]) -> tuple[Any, ...]:
    template, starts, ops = template.copy(), starts.copy(), ops.copy()
    big = t.pick((-1, -(1 << 31), (1 << 31) - 1, 1 << 20, 7))
    pick = t.u(1) % 5
    if pick == 0 and template.size:
        template[t.u(2) % template.size] = big
    elif pick == 1 and starts.size:
        starts[t.u(2) % starts.size] = big
    elif pick == 2 and ops.size:
        ops.flat[t.u(2) % ops.size] = big
    elif pick == 3 and ints:
        ints = [c[:t.u(1) % (len(c) + 1)] for c in ints]
    elif strs:
        strs = [s[:t.u(1) % (len(s) + 1)] for s in strs]
    return template, starts, ops, ints, strs


# ------------------------------------------------------------------ rewrite/_kernel.pyx
_OPTION_SETS: list[Any] = []


def kernel(data: bytes) -> None:
    from ibwire.rewrite import _kernel, vector
    from ibwire.scan import _engine as scan

    if not _OPTION_SETS:
        from tests.rewrite.test_rewrite_batch import ALL_OPTIONS, options

        _OPTION_SETS.extend(options(argv) for _name, argv in sorted(ALL_OPTIONS.items()))
    t = Take(data)
    o = t.pick(_OPTION_SETS)
    frames, links = [], []
    while t.left() and len(frames) < 8:
        links.append(t.pick((0, 0, 0, 2, 3)))  # Ethernet mostly; IP; GRH (no native IB)
        frames.append(t.bytes(1600))
    if not frames:
        return
    lens = np.array([len(f) for f in frames], np.int64)
    # a pcap record header before the first frame, as the batch path's windows have
    offs = 16 + np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    image = bytes(16) + b"".join(frames)
    c = scan.scan_frames(exact(image), offs, lens, np.array(links, np.uint8))
    results, bufs = [], []
    for twin in (vector, _kernel):
        buf = exact(image + bytes(vector.PAD))  # the editors' contract: PAD bytes after
        results.append(twin.edit_frames(buf, offs, lens, c["link"], c["error"], c["icrc_ok"],
                                        c["offset.bth"], c["offset.icrc"], o))
        bufs.append(buf)
    theirs, ours = results
    agree("fallback", ours.fallback, theirs.fallback)
    for row in np.flatnonzero(~ours.fallback).tolist():
        at, n = int(offs[row]), int(lens[row])
        agree(f"frame {row}", bytes(bufs[1][at:at + n]), bytes(bufs[0][at:at + n]))


# ------------------------------------------------------------------ analysis/_streams.pyx
def streams(data: bytes) -> None:
    from ibwire.analysis import _streams, _streams_python

    t = Take(data)
    ncols, spread = 1 + t.u(1) % 4, t.pick((1, 2, 5, 256, 1 << 16, 1 << 64))
    n = t.left() // (8 * ncols)
    columns = tuple(exact(struct.pack(f"<{n}Q", *(t.u(8) % spread for _ in range(n))))
                    .view(np.uint64) for _ in range(ncols))
    agree("group_rows", _streams.group_rows(columns), _streams_python.group_rows(columns))


# ------------------------------------------------------------------ transport/_observer.pyx
OPCODES = (0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0A, 0x0C, 0x0D, 0x0E, 0x0F, 0x10,
           0x11, 0x12, 0x13, 0x14, 0x20, 0x24, 0x81, 0x64, 0x1F)
SYNDROMES = (0x1F, 0x00, 0x60, 0x61, 0x62, 0x63, 0x20, 0x36, 0x3F)
DMALENS = (0, 1, 1024, 3000, 5000, 1 << 20, (1 << 32) - 1)
VAS = (0, 4096, 4096 + 1024, 4096 + 2048, 1 << 63, (1 << 64) - 1)


def observer(data: bytes) -> None:
    from ibwire.transport.observer_limits import ROW_FIELDS

    t = Take(data)
    pmtu, stall_ns = t.pick((None, None, 1024, 256)), t.pick((5000, 10_000_000, 1))
    psn, time, values = t.u(3), 1_000_000, []
    while t.left() >= 6 and len(values) < 200:
        op, flags, step = t.pick(OPCODES), t.u(1), t.u(1)
        psn = (psn + (step - 128 if step & 1 else (step >> 4) - 4)) & 0xFFFFFF
        if flags & 0x80:  # a jump anywhere in the PSN space
            psn = (psn + t.u(3)) & 0xFFFFFF
        time += t.pick((1, 50, 200, 4000, 9000, 10**8, -50, 0))
        values.append((len(values), time, op, psn, flags & 1, t.pick(SYNDROMES),
                       DMALENS[(flags >> 1 & 7) % len(DMALENS)], VAS[(flags >> 4) % len(VAS)],
                       t.u(2) % 4097, int(flags & 0x0C == 0x0C), int(flags == 0x3F)))
    if not values:
        return
    rows = {k: np.array([v[i] for v in values], np.uint64 if k == "va" else np.int64)
            for i, k in enumerate(ROW_FIELDS)}
    cuts = sorted({t.u(1) % (len(values) + 1) for _ in range(t.u(1) % 4)})
    from tests.transport.test_observer import story  # the twin test's own account

    agree("story", story("c", rows, cuts, pmtu, stall_ns),
          story("python", rows, cuts, pmtu, stall_ns))


# ------------------------------------------------------------------ pcap/_engine.pyx
def engine(data: bytes) -> None:
    from ibwire.pcap import _engine, _python
    from ibwire.pcap.index_links import erf_tables

    t = Take(data)
    if t.u(1) & 1:
        swapped, cap = bool(t.u(1) & 1), t.u(1)
        max_len = t.pick((MAX_CAPLEN, 1 << 18, 64))
        faces = []
        for _ in range(t.u(1) % 4):
            kind = t.u(1) % 3
            param = t.pick((0, 1, 1000, 10**9, 10**19, 93, 127, t.u(8)))
            faces.append((kind, max(param, 1) if kind == 1 else param,
                          t.pick((0, -1, 1 << 62, -(1 << 63), t.u(8) - (1 << 63))),
                          t.pick((0, 64, 1500)), t.u(1) & 1))
        buf = exact(t.rest())
        pos = t.u(2) % (len(buf) + 1) if buf.size else 0
        args = (buf, pos, len(buf), swapped, max_len, faces, cap)
        agree("pcapng_epbs", _engine.pcapng_epbs(*args), _python.pcapng_epbs(*args))
        return
    rows = []
    while t.left() >= 4 and len(rows) < 16:
        rows.append((t.u(2), t.u(2), t.u(2)))
    octets = exact(t.rest())
    size = len(octets)
    # as the index has them: each row starts inside the buffer (its header may run past it)
    offsets = [a % (size + 1) for a, _b, _c in rows]
    lengths = [b % (size - off + 1) for off, (_a, b, _c) in zip(offsets, rows, strict=True)]
    n = len(rows)
    columns = (np.array(offsets, np.int64), np.array(lengths, np.uint32), np.zeros(n, np.int64),
               np.full(n, 7, np.uint8), np.array([c for *_ab, c in rows], np.uint32))
    ours, theirs = (tuple(x.copy() for x in columns) for _ in range(2))
    left = _engine.erf_block(octets, *ours, *erf_tables())
    agree("erf_block", left, _python.erf_block(octets, *theirs, *erf_tables()))
    agree("erf_block columns", ours, theirs)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "tally": tally, "text": text, "kernel": kernel, "streams": streams, "observer": observer,
    "engine": engine}


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] not in TARGETS:
        sys.exit(f"usage: python -m tools.fuzzing.cython_targets {{{','.join(TARGETS)}}} FILE...")
    for path in argv[2:]:
        with open(path, "rb") as f:
            TARGETS[argv[1]](f.read())
        print(f"{path}: no finding")


if __name__ == "__main__":
    main(sys.argv)

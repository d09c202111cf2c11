"""Byte streams for the stream readers: gzip decompression that gives every byte it could
decompress before a problem, a stream whose first bytes were already read, and reading up to
a size from any of them."""

from __future__ import annotations

import zlib
from typing import BinaryIO

from ibwire.errors import TruncatedError

GZIP_MAGIC = b"\x1f\x8b"


class PrefixedStream:
    """A byte stream whose first bytes were already read (to sniff the format)."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self.prefix = prefix
        self.rest = rest

    def read(self, size: int = -1) -> bytes:
        if self.prefix:
            take = self.prefix if size < 0 else self.prefix[:size]
            self.prefix = self.prefix[len(take):]
            return take
        return self.rest.read(size)


class GunzipStream:
    """Decompresses gzip data (one or more members) from a byte stream, in bounded pieces.

    Unlike ``gzip.GzipFile`` it hands out every byte decompressed before a problem (truncated
    or corrupt data, bad CRC) and raises only when nothing is left to give.
    """

    def __init__(self, raw: BinaryIO | PrefixedStream, piece: int = 64 * 1024) -> None:
        self.raw = raw
        self.piece = piece
        self.inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)
        self.in_member = False
        self.unused = b""
        self.pending = bytearray()
        self.error: Exception | None = None
        self.finished = False

    def read(self, size: int = -1) -> bytes:
        want = self.piece if size < 0 else size
        while len(self.pending) < want and self.error is None and not self.finished:
            self._pump(want - len(self.pending))
        if not self.pending and self.error is not None:
            raise self.error
        out = bytes(self.pending[:want])
        del self.pending[:want]
        return out

    def _pump(self, want: int) -> None:
        compressed = self.inflater.unconsumed_tail or self.unused or self.raw.read(self.piece)
        self.unused = b""
        if not compressed:
            self.finished = True
            if self.in_member:
                self.error = EOFError("gzip data ended inside a compressed stream")
            return
        self.in_member = True
        before = self.inflater.copy()
        try:
            self.pending += self.inflater.decompress(compressed, max(want, self.piece))
        except zlib.error as exc:
            self.inflater = before
            self._salvage(compressed, exc)
            return
        if self.inflater.eof:
            rest = self.inflater.unused_data
            self.inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)
            self.in_member = False
            if rest.strip(b"\0"):
                self.unused = rest

    def _salvage(self, compressed: bytes, error: zlib.error) -> None:
        """Feed the piece that failed again a byte at a time, keeping what comes out before
        the failure (zlib gives nothing from a call that fails)."""
        for at in range(len(compressed)):
            try:
                self.pending += self.inflater.decompress(compressed[at:at + 1])
            except zlib.error:
                break
        self.error = error


def read_upto(stream: BinaryIO | GunzipStream | PrefixedStream, size: int, compressed: bool,
              arrived: bool = False) -> tuple[bytes, bool, TruncatedError | None]:
    """Up to ``size`` bytes of a stream, fewer only at its end: (bytes, the data ended, the
    error that ended it: corrupt or truncated gzip data, an unreadable input). ``arrived``
    (a live capture's pipe): what one read gives, as soon as anything has arrived."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        try:
            part = stream.read(size - got)
        except (OSError, EOFError, zlib.error) as exc:
            what = "gzip data" if compressed else "input"
            return b"".join(parts), True, TruncatedError(
                f"{what} corrupt or truncated ({exc})", header="gzip" if compressed else None)
        if not part:
            return b"".join(parts), True, None
        parts.append(part)
        got += len(part)
        if arrived:
            break
    return b"".join(parts), False, None

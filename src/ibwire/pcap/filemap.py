"""Windows of capture files, safe against the file shrinking while it is read.

A capture that shrinks under a plain ``mmap`` (log rotation, another process truncating it)
kills the reader with SIGBUS at the first page past the new end. The readers here take their
windows from :class:`CaptureMap` instead, which has twins, as the CRC engine does: the C one
(``_filemap``, over ``filemap.c``) maps the window and catches such a fault (the page reads as
zeros and the map is marked ``faulted``); the pure-Python one (``_filemap_python``, chosen
with ``IBWIRE_NO_EXTENSIONS=1`` or where the extension is not built) reads the window into
memory, where a shrink is a short read. ``implementation`` says which is active.

What a reader does when it finds out (``ibwire.scan.feed``, ``ibwire.pcap.source``,
``ibwire.pcap.index``):

* before reading on, the file is shorter than it was (``os.fstat``, a short read): the data
  now ends there, as if the capture had been cut: the records up to there are read, then a
  :class:`ShrunkError` (a TruncatedError) record says the file shrank (``shrunk_error``), as for any
  truncated capture;
* bytes vanished while they were being read (a map ``faulted``), or the file is now shorter
  than where the reader already is: what was read cannot be trusted and the capture can no
  longer be read: :class:`CaptureError` (``vanished_error``), naming the file and the record.

Nothing is installed at import: the C twin's SIGBUS handler is in place only while one of its
maps exists, and passes any other SIGBUS to the handler that was there before.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ibwire._twins import load_twin
from ibwire.errors import CaptureError, ShrunkError

_engine: ModuleType | None = None
implementation = ""


def engine() -> ModuleType:
    """``_filemap`` or its twin, chosen once."""
    global _engine, implementation
    if _engine is None:
        _engine, implementation = load_twin("ibwire.pcap._filemap",
                                            "ibwire.pcap._filemap_python")
    return _engine


def maps() -> bool:
    """Whether windows are maps (the C engine), not reads into memory."""
    engine()
    return implementation == "c"


def map_window(fileno: int, offset: int, length: int, name: str) -> Any:
    """A :class:`CaptureMap` of ``length`` bytes of the file ``name`` from ``offset`` (fewer,
    from the pure-Python twin, if the file now ends first)."""
    return engine().CaptureMap(fileno, offset, length, name)


def faulted(buffer: object) -> bool:
    """Whether ``buffer`` (a CaptureMap, or a memoryview of one) lost bytes to a shrink."""
    owner = buffer.obj if isinstance(buffer, memoryview) else buffer
    return getattr(owner, "faulted", False) is True


def check_buffer(buffer: object, record: int) -> None:
    """Raise :func:`vanished_error` if ``buffer`` lost bytes to a shrink; ``record``: the
    first record read from it."""
    if faulted(buffer):
        owner = buffer.obj if isinstance(buffer, memoryview) else buffer
        raise vanished_error(getattr(owner, "name", "") or "<capture>", None, record, None)


def shrunk_error(name: str, size: int, now: int, offset: int) -> ShrunkError:
    """The record that ends the capture ``name`` found shorter (``now`` bytes, was ``size``)
    before the reader got to byte ``offset``."""
    return ShrunkError(f"the file shrank from {size} to {now} bytes while it was being read",
                       name=name, offset=offset)


def vanished_error(name: str, now: int | None, record: int, offset: int | None
                   ) -> CaptureError:
    """The error of a capture whose bytes vanished under the reader at record number
    ``record`` (from 0; the message counts from 1, as ``ibwire check`` does)."""
    size = "" if now is None else f" to {now} bytes"
    at = "" if offset is None else f", byte {offset}"
    error = CaptureError(f"{name}: the file shrank{size} while it was being read (at record "
                         f"{record + 1}{at}); it can no longer be read")
    error.record, error.offset = record, offset
    return error

"""Outputs that appear whole or not at all: written beside their name, then renamed over it
(rename(2) is atomic within a file system), with the permissions a file opened under that
name would have had: those of the file replaced, else 0666 less the umask. A temporary file
is made 0600 (mkstemp(3)); an output that kept that mode, or the mode the tool that wrote it
chose (dumpcap's spool), would be unreadable to the group and others where a plain write is
not.

:class:`AtomicFile` is a file object to write into; :func:`replace_into` moves into place a
file something else wrote under a temporary name (matplotlib's ``savefig``, dumpcap's spool).
``IBWIRE_FSYNC=1`` in the environment (or ``durable=True``) fsyncs the file and the rename.
"""

from __future__ import annotations

import os
from typing import BinaryIO

#: Environment variable that makes every output durable (fsync before the rename).
FSYNC_ENV = "IBWIRE_FSYNC"


def durable_default() -> bool:
    """Whether outputs are fsynced before their rename: ``IBWIRE_FSYNC`` set to 1."""
    return os.environ.get(FSYNC_ENV, "") not in ("", "0")


def umask() -> int:
    """The process's umask: read from /proc/self/status (Linux 4.7 and later) where it can
    be, which changes nothing; else set and put back (a thread creating a file meanwhile
    would get mode bits the umask should have removed)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def new_file_mode(path: str | os.PathLike[str]) -> int:
    """The permission bits a file opened for writing as ``path`` would have: those of the
    file there, else 0666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~umask()


def replace_into(temp_path: str | os.PathLike[str], path: str | os.PathLike[str],
                 durable: bool | None = None) -> None:
    """Give the file ``temp_path`` the mode of a file opened as ``path``
    (:func:`new_file_mode`), then rename it to ``path``; ``durable`` (default
    ``IBWIRE_FSYNC``): the file and the rename reach the disk first."""
    if durable is None:
        durable = durable_default()
    os.chmod(temp_path, new_file_mode(path))
    if durable:
        handle = os.open(temp_path, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
    os.replace(temp_path, path)
    if durable:  # the rename itself, in the directory (fsync(2): NOTES)
        directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def temporary_beside(path: str | os.PathLike[str], suffix: str = ".tmp") -> tuple[int, str]:
    """(descriptor, name) of a new empty file in ``path``'s directory, named after it."""
    import tempfile  # here: it loads shutil, bz2 and lzma

    target = os.fspath(path)
    return tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=suffix,
                            dir=os.path.dirname(os.path.abspath(target)))


class AtomicFile:
    """A temporary file next to ``path`` that replaces ``path`` on :meth:`commit`;
    ``durable`` (default: ``IBWIRE_FSYNC``) fsyncs it first."""

    def __init__(self, path: str | os.PathLike[str], durable: bool | None = None) -> None:
        self.durable = durable_default() if durable is None else durable
        self.path = os.fspath(path)
        handle, self.temp_path = temporary_beside(self.path)
        self.file: BinaryIO = os.fdopen(handle, "wb")
        self.done = False

    def commit(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            self.file.close()
            replace_into(self.temp_path, self.path, self.durable)
        except BaseException:
            self._discard()
            raise

    def abort(self) -> None:
        if not self.done:
            self.done = True
            self._discard()

    def _discard(self) -> None:
        self.file.close()
        try:
            os.unlink(self.temp_path)
        except FileNotFoundError:
            pass


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` into ``path`` through an :class:`AtomicFile`: a reader sees the old file or
    the whole new one, never a part."""
    out = AtomicFile(path)
    try:
        out.file.write(data)
    except BaseException:
        out.abort()
        raise
    out.commit()

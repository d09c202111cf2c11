# cython: language_level=3
"""Read-only maps of capture file windows that survive the file shrinking (over filemap.c):
the same names as the pure-Python twin ``ibwire.pcap._filemap_python``, which reads the
window instead. Imports neither numpy nor anything of ibwire (``ibwire check`` starts light).
"""

from cpython.buffer cimport PyBuffer_FillInfo
from libc.errno cimport errno
from libc.stdint cimport int64_t, uintptr_t
from posix.types cimport off_t

import os

__all__ = ["CaptureMap", "faults"]


cdef extern from "<sys/mman.h>" nogil:
    void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
    int munmap(void *addr, size_t length)
    int madvise(void *addr, size_t length, int advice)
    int PROT_READ, MAP_SHARED, MADV_SEQUENTIAL, MADV_DONTNEED
    void *MAP_FAILED


cdef extern from "filemap.h" nogil:
    int ibw_map_register(uintptr_t start, uintptr_t end)
    int ibw_map_faulted(int slot)
    int ibw_map_release(int slot)
    int64_t ibw_map_faults()


cdef char _EMPTY[1]


cdef class CaptureMap:
    """``length`` bytes of file descriptor ``fileno`` from ``offset`` (a multiple of
    ``mmap.ALLOCATIONGRANULARITY``), mapped read-only; a bytes-like object (buffer protocol);
    ``name``: the file's, for messages.

    If the file shrinks under the map, the pages past its new end read as zeros instead of
    killing the process with SIGBUS, and ``faulted`` becomes True: the reader must then throw
    away what it read and say the file shrank. ``close()`` unmaps it once no buffer of it is
    held any more (at once if none is)."""

    cdef char *addr
    cdef Py_ssize_t length
    cdef int slot
    cdef int exports
    cdef bint closing
    cdef bint was_faulted
    cdef public str name
    cdef object __weakref__

    def __cinit__(self, int fileno, off_t offset, Py_ssize_t length, str name=""):
        self.name = name
        self.addr = NULL
        self.slot = -1
        if length < 0 or offset < 0:
            raise ValueError(f"bad window {offset}+{length}")
        self.length = length
        if length == 0:
            return
        cdef void *found = mmap(NULL, length, PROT_READ, MAP_SHARED, fileno, offset)
        if found == MAP_FAILED:
            raise OSError(errno, os.strerror(errno))
        self.addr = <char *>found
        madvise(found, length, MADV_SEQUENTIAL)
        self.slot = ibw_map_register(<uintptr_t>found, <uintptr_t>found + length)
        if self.slot < 0:
            code = errno
            munmap(found, length)
            self.addr = NULL
            raise OSError(code, f"cannot guard a capture map ({os.strerror(code)})")

    def __getbuffer__(self, Py_buffer *buffer, int flags):
        if self.closing:
            raise ValueError("the capture map is closed")
        PyBuffer_FillInfo(buffer, self, self.addr if self.addr != NULL else _EMPTY,
                          self.length, 1, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *buffer):
        self.exports -= 1
        if self.exports == 0 and self.closing:
            self._unmap()

    cdef void _unmap(self) noexcept:
        if self.slot >= 0:
            self.was_faulted |= ibw_map_release(self.slot)
            self.slot = -1
        if self.addr != NULL:
            munmap(self.addr, self.length)
            self.addr = NULL

    def close(self) -> None:
        """Unmap now, or when the last buffer of the map is released."""
        self.closing = True
        if self.exports == 0:
            self._unmap()

    def release(self) -> None:
        """Let the pages read so far go from the process's memory (they stay in the page
        cache): a read after this faults them in again, as after the kernel reclaimed them."""
        if self.addr != NULL:
            madvise(self.addr, self.length, MADV_DONTNEED)

    @property
    def faulted(self) -> bool:
        """Whether bytes of the map vanished (the file shrank) while it was read."""
        return bool(self.was_faulted or ibw_map_faulted(self.slot))

    def __len__(self) -> int:
        return self.length

    def __dealloc__(self):
        self._unmap()


def faults() -> int:
    """SIGBUS faults caught in capture maps since the process started."""
    return ibw_map_faults()

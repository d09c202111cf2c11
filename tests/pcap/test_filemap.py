"""The C twin of ``ibwire.pcap.filemap``: its SIGBUS handler is there only while a map is,
passes a SIGBUS that is not its own to the handler that was there before, and a map reads
zeros (and says so) where the file shrank under it. Each case in a fresh process."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.pcap.conftest import _filemap

CHAIN = """
import os, signal, sys
from ibwire.pcap._filemap import CaptureMap, faults
got = []
signal.signal(signal.SIGBUS, lambda sig, frame: got.append(sig))
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"x" * 65536)
fd = os.open(path, os.O_RDONLY)
window = CaptureMap(fd, 0, 65536, path)
view = memoryview(window)
os.kill(os.getpid(), signal.SIGBUS)  # not a fault in a map: to the user's handler
os.truncate(path, 100)
tail = bytes(view[60000:60004])  # past the new end: a fault, caught
view.release()
window.close()
os.kill(os.getpid(), signal.SIGBUS)  # no map left: the user's handler, as before
print(got == [signal.SIGBUS] * 2, tail == bytes(4), window.faulted, faults())
"""


def test_a_foreign_sigbus_reaches_the_users_handler(tmp_path):
    if _filemap is None:
        pytest.skip("ibwire.pcap._filemap is not built")
    done = subprocess.run([sys.executable, "-c", CHAIN, str(tmp_path / "f")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != -signal.SIGBUS, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "1"], done.stderr


KERNEL = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def handler():  # the kernel's SIGBUS action: the first field of glibc's struct sigaction
    buf = ctypes.create_string_buffer(256)
    assert libc.sigaction(7, None, buf) == 0
    return int.from_bytes(buf.raw[:8], sys.byteorder)
seen = [handler()]
import ibwire.pcap._filemap as m
seen.append(handler())
fd = os.open(sys.argv[1], os.O_RDONLY)
w = m.CaptureMap(fd, 0, 10)
seen.append(handler())
w.close()
seen.append(handler())
print(seen[0] == seen[1] == seen[3] == 0, seen[2] != 0)
"""


def test_nothing_is_installed_at_import_or_left_after(tmp_path):
    """The kernel's SIGBUS action (not Python's idea of it): the default until a map is
    made, ours while it lives, the default again once it is closed."""
    if _filemap is None or sys.platform != "linux":
        pytest.skip("ibwire.pcap._filemap is not built (or not glibc)")
    path = tmp_path / "f"
    path.write_bytes(bytes(100))
    done = subprocess.run([sys.executable, "-c", KERNEL, str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stdout.split() == ["True", "True"], done.stderr

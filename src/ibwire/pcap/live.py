"""Live captures: the packets dumpcap (Wireshark's capture program) or tcpdump captures on an
interface, read as they arrive.

As tshark does, the tool writes a classic pcap file, a spool, in a directory of its own
(``dumpcap -P -w FILE``, ``tcpdump -U -w FILE``), and ibwire reads behind it as the file grows
(``ibwire.pcap.follow``): however far behind ibwire falls (a slow terminal, a busy machine),
the tool keeps emptying the kernel's buffer into the file, so no packet is dropped for ibwire's
sake (the kernel's drops, if any, are in the tool's closing statistics: :attr:`LiveCapture.dropped`).
The spool is removed at the end, or kept under a name the caller gives (``keep``).
ibwire's readers take a :class:`LiveCapture` as they take standard input
(``open_capture(live)``, ``ibwire.scan.scan_capture(live)``), except that a read hands out
what has arrived instead of waiting for a full window.

The tool runs in its own session, so a terminal's Ctrl-C reaches ibwire only, which stops it
(:meth:`LiveCapture.stop`: the tool writes its last packets and exits, and the data ends).
It is stopped on every way out of :meth:`LiveCapture.close`, and on Linux it is also killed
when ibwire itself dies, however it dies (``PR_SET_PDEATHSIG``, prctl(2)).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import BinaryIO

from ibwire.errors import CaptureError, IbwireError
from ibwire.pcap.atomic import replace_into
from ibwire.pcap.follow import FollowedFile

ROCE_FILTER = "udp port 4791 or ether proto 0x8915"
"""The default capture filter: RoCEv2 (UDP destination port 4791, IBA Annex A17) and RoCEv1
(EtherType 0x8915, IBA Annex A16), in pcap-filter(7) syntax."""
TOOLS = ("dumpcap", "tcpdump")
"""The capture programs, in order of preference."""
GRACE = 5.0
"""Seconds a tool asked to stop has to write its last packets and exit before it is killed."""

#: The line that says the tool is capturing (dumpcap names its output file once its
#: interface is open and its filter set; tcpdump says it is listening).
_READY = {"dumpcap": re.compile(r"^File: "), "tcpdump": re.compile(r"^tcpdump: listening on ")}
#: The line of the tool's closing statistics that counts packets dropped.
_DROPPED = {"dumpcap": re.compile(r"received/dropped on interface .*: \d+/(\d+)"),
            "tcpdump": re.compile(r"^(\d+) packets? dropped by kernel")}
BUFFER_MIB = 32
"""The kernel buffer the tool asks for, in MiB (dumpcap and tcpdump ``-B``; their default is
2): room for a burst while the tool is not scheduled."""
SPOOL = "capture.pcap"
"""The spool file's name in its directory."""
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def find_tool(tool: str | None = None) -> tuple[str, str]:
    """(name, path) of the capture program to run: ``tool`` ("dumpcap" or "tcpdump"), else
    the first of :data:`TOOLS` on PATH."""
    for name in TOOLS if tool is None else (tool,):
        if name not in TOOLS:
            raise CaptureError(f"unknown capture program {name!r}; expected one of {TOOLS}")
        path = _which(name)
        if path is not None:
            return name, path
    wanted = " or ".join(TOOLS) if tool is None else tool
    raise CaptureError(f"live capture needs {wanted} on PATH (dumpcap comes with Wireshark "
                       f"and tshark); none was found")


def _which(name: str) -> str | None:
    """The program ``name`` on PATH, as ``shutil.which`` finds it (shutil is not imported:
    it loads the bz2 and lzma modules)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or os.curdir, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def capture_command(tool: str, path: str, interface: str, capture_filter: str, spool: str
                    ) -> list[str]:
    """The command line that captures on ``interface`` into the classic pcap file ``spool``
    (dumpcap flushes it a few times a second, tcpdump ``-U`` after each packet)."""
    if tool == "dumpcap":
        command = [path, "-i", interface, "-P", "-w", spool, "-q", "-B", str(BUFFER_MIB)]
        return command + ["-f", capture_filter] if capture_filter else command
    return [path, "-i", interface, "-U", "-w", spool, "-B", str(BUFFER_MIB << 10)] + (
        [capture_filter] if capture_filter else [])


def _spool_directory(keep: str | None) -> str:
    """A new directory only this user can read, for the spool: beside ``keep`` when the
    spool is kept (it is then renamed into place, atomically), else in the temporary
    directory (``TMPDIR``; tempfile is not imported: it loads shutil, bz2 and lzma)."""
    parent = os.path.dirname(os.path.abspath(keep)) if keep is not None else \
        os.environ.get("TMPDIR") or "/tmp"
    for _ in range(100):
        path = os.path.join(parent, f".ibwire-live-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise CaptureError(f"cannot make a spool directory in {parent} ({exc.strerror})"
                               ) from exc
    raise CaptureError(f"cannot make a spool directory in {parent}")


def _parent_death_signal() -> Callable[[], None] | None:
    """A function for the child to run before exec that has Linux kill it when its parent
    dies (nobody reads what it writes then; prepared in the parent: the child of a fork
    must not import)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        if os.getppid() != parent:  # the parent died before the request was made
            os.kill(os.getpid(), signal.SIGKILL)
    return arm


class LiveCapture:
    """Capturing on ``interface`` with ``capture_filter`` ("" for every packet) through
    ``tool`` (default: dumpcap, else tcpdump); ``duration`` (seconds) stops it by itself.
    ``keep``: a path where the spool stays, as a classic pcap file, once the capture ends
    (default: removed). ``on_ready`` is called (from another thread) with a line to show once
    the tool is capturing. Use it as a context manager, or call :meth:`close`."""

    def __init__(self, interface: str, capture_filter: str = ROCE_FILTER, *,
                 tool: str | None = None, duration: float | None = None,
                 keep: str | None = None,
                 on_ready: Callable[[str], None] | None = None) -> None:
        import subprocess

        self.interface = interface
        self.name = interface
        self.capture_filter = capture_filter
        self.keep = keep
        self.tool, path = find_tool(tool)
        self.directory = _spool_directory(keep)
        self.spool = os.path.join(self.directory, SPOOL)
        self.command = capture_command(self.tool, path, interface, capture_filter, self.spool)
        self.ready = threading.Event()
        self.stopped = False  # stop() was asked: how the tool ends is then no failure
        self._on_ready = on_ready
        self._messages: list[str] = []
        self._timers: list[threading.Timer] = []
        try:
            self._process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, bufsize=0, start_new_session=True,
                preexec_fn=_parent_death_signal())
        except OSError as exc:
            self._remove_spool()
            raise CaptureError(f"{interface}: cannot run {path} ({exc.strerror})") from exc
        assert self._process.stderr is not None
        self.stream = FollowedFile(self.spool, self._running, name=interface,
                                   opened=None if keep is not None else self._remove_spool)
        """The spool, read as it grows while the tool runs. Unless it is kept, its name is
        removed as soon as it is open here (the tool writes on, ibwire reads on, the disk
        space goes when both have closed it): nothing is left behind, even by a killed
        ibwire."""
        self._reader = threading.Thread(target=self._read_messages, args=(self._process.stderr,),
                                        name="ibwire-live", daemon=True)
        self._reader.start()
        if duration is not None:
            self._after(max(duration, 0.0), self.stop)

    def _running(self) -> bool:
        return self._process.poll() is None

    @property
    def pid(self) -> int:
        """The capture program's process id."""
        return self._process.pid

    def _after(self, seconds: float, action: Callable[[], None]) -> None:
        timer = threading.Timer(seconds, action)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _read_messages(self, stderr: BinaryIO) -> None:
        """Keep the tool's messages (its errors, its closing statistics); say when it is
        capturing."""
        for raw in iter(stderr.readline, b""):
            for line in raw.decode(errors="replace").split("\r"):
                line = line.strip()
                if not line:
                    continue
                self._messages.append(line)
                if not self.ready.is_set() and _READY[self.tool].search(line):
                    self.ready.set()
                    if self._on_ready is not None:
                        filtered = f"filter {self.capture_filter!r}" if self.capture_filter \
                            else "no filter"
                        self._on_ready(f"Capturing on {self.interface!r} with {self.tool} "
                                       f"({filtered})")

    def stop(self) -> None:
        """Ask the tool to stop: it writes the packets it has, exits, and the stream ends.
        Safe from a signal handler or another thread; a tool that does not exit within
        :data:`GRACE` seconds is killed."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self._process.send_signal(signal.SIGTERM)
        except OSError:
            pass  # already gone
        self._after(GRACE, self._kill)

    def _kill(self) -> None:
        try:
            self._process.kill()
        except OSError:
            pass

    @property
    def dropped(self) -> int | None:
        """Packets the tool says were dropped (known once it has exited)."""
        for line in self._messages:
            found = _DROPPED[self.tool].search(line)
            if found:
                return int(found.group(1))
        return None

    def failure(self) -> CaptureError | None:
        """Why the tool failed, once it has exited by itself with an error; None when it did
        not, or was stopped."""
        code = self._process.returncode
        if code is None or code == 0 or self.stopped:
            return None
        self._reader.join(GRACE)
        return CaptureError(f"{self.interface}: {self.tool}: {self._reason(code)}")

    def _reason(self, code: int) -> str:
        """The tool's own words: its first error line and the line after it (dumpcap and
        tcpdump say what failed, then why), as one line."""
        lines = [line for line in self._messages if not _READY[self.tool].search(line)]
        prefix = f"{self.tool}: "
        for i, line in enumerate(lines):
            if line.startswith(prefix):
                reason = line[len(prefix):]
                after = lines[i + 1] if i + 1 < len(lines) else prefix
                if not after.startswith(prefix) and after.strip("()") not in reason:
                    reason += " " + after
                return reason
        if lines:
            return lines[-1]
        if code < 0:
            return f"killed by signal {-code}"
        return f"exited with status {code}"

    def close(self) -> None:
        """Stop the tool if it still runs and wait for it (it has :data:`GRACE` seconds, and
        is killed after them, or at once if the wait is interrupted); then remove the spool,
        or put it where ``keep`` says."""
        import subprocess

        try:
            if self._process.poll() is None:
                self.stop()
            try:
                self._process.wait(GRACE)
            except subprocess.TimeoutExpired:
                pass
        finally:
            if self._process.poll() is None:
                self._kill()
                self._process.wait()
            for timer in self._timers:
                timer.cancel()
            self.stream.close()
            self._reader.join(GRACE)
            if self._process.stderr is not None:
                self._process.stderr.close()
            self._remove_spool()

    def _remove_spool(self) -> None:
        """Remove the spool's directory, first renaming the spool to ``keep`` when asked."""
        if self.keep is not None and os.path.exists(self.spool):
            try:
                replace_into(self.spool, self.keep)
            except OSError as exc:
                raise CaptureError(f"{self.interface}: cannot keep the capture as {self.keep} "
                                   f"({exc.strerror}); it is in {self.spool}") from exc
        if not os.path.isdir(self.directory):
            return  # closed before
        for name in os.listdir(self.directory):
            os.remove(os.path.join(self.directory, name))
        os.rmdir(self.directory)

    def __enter__(self) -> LiveCapture:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Close; when the tool failed, its reason is the error (it explains an empty or
        cut stream better than the reader can)."""
        self.close()
        failure = self.failure()
        if failure is not None and (exc is None or isinstance(exc, IbwireError)):
            raise failure from exc

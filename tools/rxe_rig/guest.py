"""One QEMU guest: its process, its console log and its control channel.

The console (first serial port) goes to a file; the second serial port is a unix socket
served by QEMU, on which the guest's ``/init`` runs commands (:mod:`guest_init`).
"""

from __future__ import annotations

import base64
import itertools
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .guest_init import END, READY
from .image import Image
from .netns import Namespace

SUBNET4 = "10.77.0"
SUBNET6 = "fd77::"


class GuestError(RuntimeError):
    """A guest did not boot, died, or did not answer on its control channel in time."""


@dataclass
class Result:
    """A command's exit status and output (stdout and stderr together)."""

    status: int
    output: str

    @property
    def ok(self) -> bool:
        return self.status == 0


class Guest:
    """Guest ``index`` (1-based): ``10.77.0.<index>/24``, ``fd77::<index>/64``, on ``tap<index-1>``."""

    def __init__(self, index: int, workdir: Path, memory_mb: int = 512) -> None:
        self.index = index
        self.name = f"guest{index}"
        self.addr = f"{SUBNET4}.{index}"
        self.addr6 = f"{SUBNET6}{index}"
        self.mac = f"52:54:00:77:00:{index:02x}"
        self.tap = f"tap{index - 1}"
        self.console = workdir / f"{self.name}-console.log"
        self.socket_path = workdir / f"{self.name}-control.sock"
        self.memory_mb = memory_mb
        self.process: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._ids = itertools.count(1)
        self._jobs = itertools.count(1)

    # -- life --------------------------------------------------------------------------

    def qemu_args(self, image: Image, accel: str) -> list[str]:
        append = (f"console=ttyS0 rdinit=/init panic=-1 loglevel=5 "
                  f"ibrig.addr={self.addr}/24 ibrig.addr6={self.addr6}/64")
        machine = (["-accel", "kvm", "-cpu", "host"] if accel == "kvm"
                   else ["-accel", "tcg"])
        return ["qemu-system-x86_64", *machine, "-m", str(self.memory_mb), "-smp", "1",
                "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
                "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", append,
                "-serial", f"file:{self.console}",
                "-serial", f"unix:{self.socket_path},server=on,wait=off",
                "-netdev", f"tap,id=n0,ifname={self.tap},script=no,downscript=no",
                "-device", f"virtio-net-pci,netdev=n0,mac={self.mac},romfile="]

    def start(self, namespace: Namespace, image: Image, accel: str) -> None:
        self.console.unlink(missing_ok=True)
        self.socket_path.unlink(missing_ok=True)
        self.process = subprocess.Popen(namespace.command(self.qemu_args(image, accel)),
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def connect(self, timeout: float = 10.0) -> None:
        """Open the control socket (QEMU makes it at once; the guest's first words on it are
        lost if nobody is connected, so this comes right after :meth:`start`)."""
        deadline = time.monotonic() + timeout
        while self._sock is None:
            self._check_alive()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.socket_path))
                self._sock = sock
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() > deadline:
                    raise GuestError(f"{self.name}: no control socket") from None
                time.sleep(0.02)

    def wait_ready(self, timeout: float) -> None:
        """Wait for the guest's READY line on the control channel."""
        deadline = time.monotonic() + timeout
        while self._line(deadline) != READY:
            pass

    def stop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        self.socket_path.unlink(missing_ok=True)

    def alive(self) -> bool:
        """Its QEMU still runs."""
        return self.process is not None and self.process.poll() is None

    def _check_alive(self) -> None:
        if not self.alive():
            said = ""
            if self.process is not None and self.process.stdout is not None:
                said = self.process.stdout.read().decode(errors="replace").strip()
            raise GuestError(f"{self.name}: QEMU exited ({said or 'no message'}); "
                             f"console: {self.console_tail()}")

    def console_tail(self, lines: int = 8) -> str:
        try:
            text = self.console.read_text(errors="replace")
        except FileNotFoundError:
            return "(no console log)"
        return " | ".join(text.strip().splitlines()[-lines:])

    # -- control channel ---------------------------------------------------------------

    def _line(self, deadline: float) -> str:
        assert self._sock is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GuestError(f"{self.name}: no answer in time; console: "
                                 f"{self.console_tail()}")
            self._sock.settimeout(min(remaining, 1.0))
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                self._check_alive()
                continue
            if not chunk:
                self._check_alive()
                raise GuestError(f"{self.name}: control channel closed")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").strip("\r")

    def run(self, command: str, timeout: float = 60.0) -> Result:
        """Run ``command`` under ``sh`` in the guest; its exit status and output."""
        if self._sock is None:
            raise GuestError(f"{self.name}: not connected")
        if "\n" in command or "\r" in command:
            raise ValueError("a guest command is one line")
        ident = next(self._ids)
        try:
            self._sock.sendall(f"RUN {ident} {command}\n".encode())
        except OSError as exc:  # QEMU closed the channel: the guest is gone
            self._check_alive()
            raise GuestError(f"{self.name}: control channel: {exc}; console: "
                             f"{self.console_tail()}") from exc
        deadline = time.monotonic() + timeout
        encoded: list[str] = []
        while True:
            line = self._line(deadline)
            if line.startswith(END + " "):
                _, got, status = line.split()
                if int(got) != ident:
                    raise GuestError(f"{self.name}: answer {got} to command {ident}")
                output = base64.b64decode("".join(encoded)).decode(errors="replace")
                return Result(int(status), output)
            encoded.append(line)

    def check(self, command: str, timeout: float = 60.0) -> str:
        """Run ``command``; its output, or :class:`GuestError` if it failed."""
        result = self.run(command, timeout)
        if not result.ok:
            raise GuestError(f"{self.name}: {command!r} exited {result.status}: "
                             f"{result.output.strip()[-400:]}")
        return result.output

    def spawn(self, command: str, ready: str | None = None, timeout: float = 30.0) -> int:
        """Start ``command`` in the background; :meth:`wait` gives its result. With
        ``ready``, a shell condition, return once it holds (or the job ended, or
        ``timeout``)."""
        job = next(self._jobs)
        rc = f"/tmp/job{job}.rc"
        line = (f"( sh -c {shlex.quote(command)} > /tmp/job{job}.out 2>&1 < /dev/null; "
                f"echo $? > {rc}.tmp; mv {rc}.tmp {rc} ) > /dev/null 2>&1 &")
        if ready:
            line += (f" i=0; while ! ( {ready} ) && [ ! -e {rc} ] && "
                     f"[ $i -lt {int(timeout * 20)} ]; do sleep 0.05; i=$((i+1)); done")
        self.check(line, timeout=timeout + 30)
        return job

    def wait(self, job: int, timeout: float) -> Result:
        """The job's result, waiting in the guest (one round trip) up to ``timeout``;
        status -1 if it is still running then."""
        rc = f"/tmp/job{job}.rc"
        done = self.run(f"i=0; while [ ! -e {rc} ] && [ $i -lt {max(1, int(timeout * 20))} ]; "
                        f"do sleep 0.05; i=$((i+1)); done; cat {rc} 2>/dev/null || echo -1; "
                        f"cat /tmp/job{job}.out", timeout=timeout + 30)
        status, _, out = done.output.partition("\n")
        if status.strip() == "-1":
            return Result(-1, out + f"\n[rxe_rig: still running after {timeout:.0f} s]\n")
        return Result(int(status), out)

    def kill_all(self, names: tuple[str, ...]) -> None:
        """Kill leftover tool processes (after a failed or timed-out scenario)."""
        self.run("; ".join(f"pkill -KILL -x {n}" for n in names) + "; true")

"""The rig: N guests booted on the namespace's bridge, each with ``rxe0`` ACTIVE (or, with
``join="impair"``, two guests whose taps only ``ibwire impair`` joins: :meth:`Rig.impairing`).

``with Rig() as rig:`` builds (or takes from the cache) the image, creates the namespace,
boots the guests and waits for ``rxe0``; on leaving, whether normally, by an exception,
Ctrl-C, SIGTERM or SIGHUP, it stops the guests and removes the namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType
from typing import TypeVar

from .guest import Guest, GuestError
from .image import Image, build, cache_root
from .netns import Namespace

T = TypeVar("T")
COUNTERS = "/sys/class/infiniband/rxe0/ports/1/hw_counters"
PORT = "/sys/class/infiniband/rxe0/ports/1"
BOOT_TIMEOUT_TCG = 180.0
#: Seconds ``ibwire impair`` is given to start (the interpreter, numpy) before traffic.
IMPAIR_START = 3.0
#: KVM must bring a guest to its READY line within this, else the rig uses TCG.
KVM_PROBE_TIMEOUT = 40.0


def qemu_present() -> str | None:
    """Why QEMU cannot run here, or None when it can (the binary, root, /dev/net/tun)."""
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed"
    if os.geteuid() != 0:
        return "the rig needs root (network namespaces, taps)"
    if not os.path.exists("/dev/net/tun"):
        return "no /dev/net/tun"
    if shutil.which("ip") is None:
        return "ip (iproute2) is not installed"
    return None


class _Signals:
    """SIGTERM and SIGHUP raise SystemExit while the rig is up (Ctrl-C raises
    KeyboardInterrupt already), so that ``__exit__`` cleans up; restored afterwards."""

    def __init__(self) -> None:
        self.saved: dict[int, object] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self.saved[sig] = signal.signal(sig, self._raise)

    @staticmethod
    def _raise(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    def restore(self) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self.saved.clear()


class Rig:
    def __init__(self, guests: int = 2, workdir: Path | None = None, accel: str | None = None,
                 image: Image | None = None, log: bool = False, join: str = "bridge") -> None:
        if guests < 2:
            raise ValueError("the rig needs at least two guests")
        self.count = guests
        self.keep_workdir = workdir is not None
        self.workdir = workdir
        self.accel_asked = accel or os.environ.get("IBRIG_ACCEL")
        self.accel = ""
        self.image = image
        self.log = log
        if join not in ("bridge", "impair"):
            raise ValueError(f"join must be bridge or impair, not {join!r}")
        if join == "impair" and guests != 2:
            raise ValueError("ibwire impair joins two taps: the rig needs two guests")
        self.join = join
        self.namespace = Namespace(guests, bridged=join == "bridge")
        self.guests: list[Guest] = []
        self.timings: dict[str, float] = {}
        self._gids: dict[tuple[int, bool], int] = {}
        self._signals = _Signals()

    def _say(self, text: str) -> None:
        if self.log:
            print(f"rxe_rig: {text}", flush=True)

    # -- up and down -------------------------------------------------------------------

    def __enter__(self) -> Rig:
        self._signals.install()
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        why = qemu_present()
        if why:
            raise GuestError(why)
        start = time.monotonic()
        if self.image is None:
            self.image = build(log=self.log)
        self.timings["image"] = time.monotonic() - start
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="ibwire-rig-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.namespace.create()
        start = time.monotonic()
        self.accel = self.accel_asked or self._probe_accel()
        self._say(f"booting {self.count} guests ({self.accel})")
        self.guests = [Guest(i + 1, self.workdir) for i in range(self.count)]
        for guest in self.guests:
            guest.start(self.namespace, self.image, self.accel)
            guest.connect()
        for guest in self.guests:
            guest.wait_ready(BOOT_TIMEOUT_TCG)
        for guest in self.guests:
            self._wait_active(guest)
        self.timings["boot"] = time.monotonic() - start
        self._say(f"up in {self.timings['boot']:.1f} s")

    def stop(self) -> None:
        for guest in self.guests:
            try:
                guest.stop()
            except Exception:  # the others must still stop
                pass
        self.namespace.remove()
        if self.workdir is not None and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self._signals.restore()

    def _wait_active(self, guest: Guest, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            state = guest.run(f"cat {PORT}/state 2>&1").output.strip()
            if "ACTIVE" in state:
                return
            if time.monotonic() > deadline:
                raise GuestError(f"{guest.name}: rxe0 not ACTIVE ({state}); console: "
                                 f"{guest.console_tail()}")
            time.sleep(0.2)

    # -- the taps joined by ibwire impair (join="impair") ------------------------------

    @contextmanager
    def impairing(self, *faults: str, capture: Path | None = None,
                  manifest: Path | None = None) -> Iterator[subprocess.Popen]:
        """``ibwire impair -i tap0 -i tap1 FAULTS`` in the namespace for the block (the
        guests reach each other only through it), stopped with SIGTERM at its end so that
        its capture and manifest are complete. ``faults``: impair's options, as given."""
        if self.join != "impair":
            raise GuestError("the rig was started with its taps on the bridge (join='impair')")
        argv = [sys.executable, "-m", "ibwire.cli.main", "impair", "-i", "tap0", "-i", "tap1",
                "--no-progress", *faults]
        if capture is not None:
            argv += ["-w", str(capture)]
        if manifest is not None:
            argv += ["--manifest", str(manifest)]
        proc = subprocess.Popen(self.namespace.command(argv), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(IMPAIR_START)
            if proc.poll() is not None:
                raise GuestError(f"ibwire impair ended at once: {proc.stderr.read().strip()}")
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            proc.summary = err  # type: ignore[attr-defined]

    # -- KVM or TCG --------------------------------------------------------------------

    def _probe_accel(self) -> str:
        """KVM where it really boots this kernel (remembered per host kernel, QEMU and
        image), else TCG."""
        if not os.access("/dev/kvm", os.R_OK | os.W_OK):
            return "tcg"
        assert self.image is not None and self.workdir is not None
        qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True,
                              text=True).stdout.splitlines()[0]
        key = f"{os.uname().release} {qemu} {self.image.directory.name}"
        memo = cache_root() / "accel.json"
        known = json.loads(memo.read_text()) if memo.exists() else {}
        if key in known:
            return str(known[key])
        probe = Guest(99, self.workdir)
        probe.tap = self.namespace.taps[0]
        result = "tcg"
        try:
            probe.start(self.namespace, self.image, "kvm")
            probe.connect()
            probe.wait_ready(KVM_PROBE_TIMEOUT)
            result = "kvm"
        except GuestError:
            pass
        finally:
            probe.stop()
        known[key] = result
        tmp = memo.with_suffix(".tmp")
        tmp.write_text(json.dumps(known, indent=1))
        os.replace(tmp, memo)
        return result

    # -- what the scenarios need -------------------------------------------------------

    def on_each(self, fn: Callable[[Guest], T]) -> list[T]:
        """``fn`` on the first two guests at once (each has its own control channel)."""
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(fn, self.guests[:2]))

    def counters(self, guest: Guest) -> dict[str, int]:
        out = guest.check(f"cd {COUNTERS} && grep -H . *")
        values = {}
        for line in out.splitlines():
            name, _, value = line.partition(":")
            if value.strip().lstrip("-").isdigit():
                values[name] = int(value)
        return values

    def gid_index(self, guest: Guest, ipv6: bool = False) -> int:
        """The index of the guest's RoCEv2 GID for its IPv4 (``::ffff:a.b.c.d``) or its
        global IPv6 address (the table is read once per guest and family)."""
        key = (guest.index, ipv6)
        if key in self._gids:
            return self._gids[key]
        out = guest.check(f"cd {PORT} && for i in $(seq 0 15); do g=$(cat gids/$i); "
                          f"case $g in 0000:0000:0000:0000:0000:0000:0000:0000) continue;; esac;"
                          f" echo $i $g $(cat gid_attrs/types/$i); done", timeout=20)
        want = _gid_of(guest.addr6 if ipv6 else guest.addr, ipv6)
        for line in out.splitlines():
            parts = line.split(None, 2)
            if len(parts) >= 3 and parts[1] == want and "v2" in parts[2]:
                self._gids[key] = int(parts[0])
                return self._gids[key]
        raise GuestError(f"{guest.name}: no RoCEv2 GID {want}:\n{out}")


def _gid_of(addr: str, ipv6: bool) -> str:
    import ipaddress

    ip = ipaddress.ip_address(addr)
    packed = ip.packed if ipv6 else ipaddress.IPv6Address(f"::ffff:{addr}").packed
    hexed = packed.hex()
    return ":".join(hexed[i:i + 4] for i in range(0, 32, 4))

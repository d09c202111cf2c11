"""The rig as a live target: a long-running RDMA connection between the guests, a tap on the
bridge that learns it and injects into it, the consoles watched, probes, fresh guest pairs.

- :class:`WireTap` -- an AF_PACKET socket on the namespace's bridge (opened from a thread that
  entered the namespace: nothing else is ever touched). It feeds every frame the guests send
  to an :class:`ibwire.livefuzz.state.LiveState` and sends frames into the bridge, which
  delivers them by destination MAC (the frames carry the bridge's own MAC as source, so the
  bridge never learns a guest's MAC on the wrong port);
- :class:`Consoles` -- what each guest's console said since the last look, scanned with
  :func:`ibwire.livefuzz.console.scan`;
- :class:`LiveScenario` -- ``rping`` servers in guest 1 (persistent: ``-P``), a long ``rping``
  client in guest 2 kept running (restarted when it ends), a 10 ms netem delay in both
  guests so that it idles rather than spins under emulation; :meth:`LiveScenario.probe`, a
  one-iteration rping on a connection of its own (CM REQ/REP/RTU, SEND, RDMA READ/WRITE,
  DREQ/DREP): the endpoints still answer;
- :func:`planted_trap` -- the plumbing test's fault: a packet-socket reader in a guest
  (perl, AF_PACKET) that writes a kernel-style WARNING to ``/dev/kmsg`` when a frame
  carrying :data:`TRAP_MARK` arrives.
"""

from __future__ import annotations

import base64
import ctypes
import socket
import struct
import threading
import time

from ibwire.livefuzz.console import Sign, scan
from ibwire.livefuzz.hook import InFlightMutator
from ibwire.livefuzz.retarget import InFlightShots
from ibwire.livefuzz.state import LiveState, QpState

from .guest import Guest, GuestError
from .netns import BRIDGE, Namespace
from .rig import Rig

CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET, PACKET_ADD_MEMBERSHIP, PACKET_MR_PROMISC = 263, 1, 1
#: rping's ports: the fuzzed connection, and the probes'.
MAIN_PORT, PROBE_PORT = 7174, 7175
#: RDMA CM service ID of an RDMA_PS_TCP port (cma.c rdma_get_service_id).
def service_id(port: int) -> int:
    return 0x0106 << 16 | port


#: Counters that no packet from the wire should move (rxe_hw_counters.c): a send the driver
#: failed to put on the wire, a link that went down.
SILENT_COUNTERS = ("send_err", "link_downed")
TRAP_MARK = b"IBWIRE-TRAP"
#: The taps ``ibwire impair`` joins in a rig started with ``join="impair"``.
TAPS = ("tap0", "tap1")
#: Source MAC of frames injected through the forwarder (locally administered; rxe does not
#: check it).
INJECT_MAC = "02:1b:00:00:00:fe"
TRAP_SCRIPT = r"""
socket(S, 17, 3, 0x0300) or die "socket: $!";
$| = 1;
print "trap armed\n";
while (defined(recv(S, $b, 65535, 0))) {
    next if index($b, "MARK") < 0;
    open(K, ">>", "/dev/kmsg") or next;
    print K "<4>WARNING: CPU: 0 PID: $$ at ibwire/planted_trap.c:1 planted_trap+0x0/0x1\n";
    close(K);
}
"""


def enter_namespace(name: str) -> None:
    """Moves the calling thread (only it) into network namespace ``name``: the sockets it
    opens from then on live there."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/var/run/netns/{name}") as ns:
        if libc.setns(ns.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")


def _in_namespace(name: str, make: type[socket.socket] | None = None) -> socket.socket:
    """An AF_PACKET socket created inside network namespace ``name`` (by a thread that
    enters it; the process stays where it is)."""
    out: list[object] = []

    def enter() -> None:
        try:
            enter_namespace(name)
            out.append(socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                     socket.htons(ETH_P_ALL)))
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=enter)
    thread.start()
    thread.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]  # type: ignore[return-value]


class WireTap:
    """Sniff the bridge into a :class:`LiveState`; inject frames into it."""

    def __init__(self, namespace: Namespace, record: bool = False) -> None:
        self.sock = _in_namespace(namespace.name)
        self.sock.bind((BRIDGE, 0))
        # promiscuous: the bridge device then sees the frames it forwards between the taps
        index = int(namespace.run(["cat", f"/sys/class/net/{BRIDGE}/ifindex"]).stdout)
        self.sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP,
                             struct.pack("iHH8s", index, PACKET_MR_PROMISC, 0, b""))
        self.sock.settimeout(0.2)
        self.mac = _mac_of(namespace, BRIDGE)
        self.state = LiveState()
        self.lock = threading.Lock()
        self.record = record
        self.frames: list[bytes] = []
        self.received = 0
        self.sent = 0
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                frame, address = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            if address[2] == PACKET_OUTGOING:
                continue  # our own injections
            with self.lock:
                self.received += 1
                self.state.feed(frame)
                if self.record:
                    self.frames.append(frame)

    def send(self, frames: list[bytes], gap: float = 0.0) -> None:
        for frame in frames:
            try:
                self.sock.send(frame)
            except OSError:  # a frame the kernel refuses (too short, too long)
                self.refused += 1
                continue
            self.sent += 1
            if gap:
                time.sleep(gap)

    def connection(self, port: int = MAIN_PORT) -> tuple[QpState, QpState] | None:
        with self.lock:
            return self.state.connection(service_id(port))

    def wait_connection(self, port: int = MAIN_PORT, timeout: float = 60.0,
                        moving: bool = True) -> tuple[QpState, QpState]:
        """The live connection of ``port``, once both ends' PSNs are known (and, when
        ``moving``, traffic has been seen on it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            conn = self.connection(port)
            if conn and all(q.recv_psn is not None and q.send_psn is not None and q.mac
                            for q in conn) and (not moving or
                                                min(q.packets_in for q in conn) > 2):
                return conn
            time.sleep(0.2)
        raise GuestError(f"no live connection on port {port} seen on the bridge in "
                         f"{timeout:.0f} s")

    def arm(self) -> None:
        """Nothing to arm: the bridge's tap only listens (see :class:`ForwarderTap`)."""

    def disarm(self) -> None:
        """Nothing to disarm (see :class:`ForwarderTap`)."""

    def when_outstanding(self, to: int, port: int = MAIN_PORT,
                         timeout: float = 2.0) -> tuple[QpState, QpState] | None:
        """The connection once end ``to`` has a request outstanding (a response injected
        then meets a send queue entry its completer is waiting on), or as it is after
        ``timeout``."""
        deadline = time.monotonic() + timeout
        conn = self.connection(port)
        while conn is not None and not conn[to].outstanding and time.monotonic() < deadline:
            time.sleep(0.002)
            conn = self.connection(port)
        return conn

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class ForwarderTap(WireTap):
    """The rig's two taps joined by ``ibwire impair``'s forwarder (a rig started with
    ``join="impair"``), run in a thread inside the rig's namespace, with the in-flight
    mutator as its hook (:class:`~ibwire.livefuzz.retarget.InFlightShots`: ``rate`` of the
    RoCE frames mutated, each mutation kept as a shot). The connection is learnt from what
    the forwarder carries; injected frames go out through it, on the port of their
    destination MAC. The same interface as :class:`WireTap`. Nothing is mutated until
    :meth:`arm` (the campaign arms it once the connection to fuzz is up, and disarms it
    while a new one is set up)."""

    def __init__(self, namespace: Namespace, rate: float, seed: int = 0,
                 source_mac: str = INJECT_MAC) -> None:
        from ibwire.impair import Forwarder

        self.rate = rate
        self.mutator = InFlightMutator(0.0, seed)
        self.hook = InFlightShots(self.mutator, source_mac)
        self.state, self.lock, self.mac = self.hook.state, self.hook.lock, source_mac
        self.record, self.frames = False, []
        self.received = self.sent = self.refused = 0
        self.forwarder: Forwarder | None = None
        failed: list[BaseException] = []
        ready = threading.Event()

        def forward() -> None:
            try:
                enter_namespace(namespace.name)
                self.forwarder = Forwarder(TAPS[0], TAPS[1], hook=self.hook, force=True)
            except BaseException as exc:
                failed.append(exc)
                return
            finally:
                ready.set()
            self.forwarder.run()

        self._thread = threading.Thread(target=forward, daemon=True)
        self._thread.start()
        ready.wait(30)
        if failed or self.forwarder is None:
            raise GuestError(f"the forwarder between {TAPS[0]} and {TAPS[1]} did not start: "
                             f"{failed[0] if failed else 'no answer in 30 s'}")

    def arm(self) -> None:
        """Mutate from now on, at the rate given."""
        self.mutator.rate = self.rate

    def disarm(self) -> None:
        """Forward unchanged from now on (while a connection to fuzz is set up)."""
        self.mutator.rate = 0.0

    @property
    def mutated(self) -> int:
        return len(self.hook.shots)

    def send(self, frames: list[bytes], gap: float = 0.0) -> None:
        assert self.forwarder is not None
        for frame in frames:
            if len(frame) < 14:
                self.refused += 1
                continue
            self.forwarder.inject(frame, self.hook.direction_to(frame))
            self.sent += 1
            if gap:
                time.sleep(gap)

    def close(self) -> None:
        if self.forwarder is not None:
            self.forwarder.stop()
        self._thread.join(10)
        self.mutator.close()


def _mac_of(namespace: Namespace, interface: str) -> str:
    done = namespace.run(["cat", f"/sys/class/net/{interface}/address"])
    return done.stdout.strip()


class Consoles:
    """New console text of each guest since the last :meth:`read`."""

    def __init__(self, guests: list[Guest]) -> None:
        self.guests = guests
        self.offsets = {g.name: self._size(g) for g in guests}

    @staticmethod
    def _size(guest: Guest) -> int:
        try:
            return guest.console.stat().st_size
        except FileNotFoundError:
            return 0

    def read(self) -> dict[str, str]:
        out = {}
        for guest in self.guests:
            try:
                with open(guest.console, "rb") as f:
                    f.seek(self.offsets[guest.name])
                    data = f.read()
            except FileNotFoundError:
                data = b""
            self.offsets[guest.name] += len(data)
            out[guest.name] = data.decode(errors="replace")
        return out

    def signs(self) -> list[tuple[str, Sign, str]]:
        """(guest, sign, the new console text) of each report since the last look."""
        found = []
        for name, text in self.read().items():
            found += [(name, sign, text) for sign in scan(text)]
        return found


class LiveScenario:
    """A long rping between the guests to fuzz, probes, and the scenario's health."""

    name = "rping-live"

    def __init__(self, rig: Rig, delay_ms: int = 10, size: int = 64) -> None:
        self.rig = rig
        self.server, self.client = rig.guests[0], rig.guests[1]
        self.delay_ms = delay_ms
        self.size = size
        self.client_job: int | None = None
        self.restarts = 0
        self.tool_exits: list[tuple[int, str]] = []

    def start(self) -> None:
        for guest in (self.server, self.client):
            if self.delay_ms:
                guest.run("tc qdisc del dev eth0 root 2>/dev/null; "
                          f"tc qdisc add dev eth0 root netem delay {self.delay_ms}ms")
        for port in (MAIN_PORT, PROBE_PORT):
            self.start_server(port)
        self.start_client()

    def _server_command(self, port: int) -> str:
        return f"rping -s -P -a {self.server.addr} -p {port}"

    def start_server(self, port: int) -> None:
        ready = f"rdma resource show cm_id | grep LISTEN | grep -q ':{port} '"
        self.server.spawn(self._server_command(port), ready=ready)

    def start_client(self) -> None:
        self.client_job = self.client.spawn(
            f"rping -c -a {self.server.addr} -p {MAIN_PORT} -C 100000000 -S {self.size}")

    def client_ended(self) -> tuple[int, str] | None:
        """(status, last output) if the fuzzed client has ended since it was started."""
        if self.client_job is None:
            return None
        result = self.client.wait(self.client_job, timeout=0.05)
        if result.status == -1:
            return None
        return result.status, result.output.strip()[-300:]

    def restart_client(self) -> None:
        """The fuzzed connection anew: its client and its server (the probes' server stays;
        a server whose connection was lied to may no longer take new ones)."""
        self.client.kill_all(("rping",))
        port = str(MAIN_PORT)  # the bracket keeps the pattern off the shell running pkill
        pattern = f"rping -s -P -a {self.server.addr} -p [{port[0]}]{port[1:]}"
        self.server.run(f"pkill -KILL -f '{pattern}'; true")
        self.restarts += 1
        self.start_server(MAIN_PORT)
        self.start_client()

    def probe(self, timeout: int = 30, attempts: int = 2) -> tuple[bool, str]:
        """A one-iteration rping on a connection of its own; (ok, what went wrong). A
        failure is tried once more (rping itself sometimes trips over its own disconnect
        on a loaded emulated machine): the endpoints stopped answering when both fail."""
        said = []
        for _ in range(attempts):
            try:
                for guest in (self.server, self.client):
                    guest.check("true", timeout=20)
                result = self.client.run(f"timeout {timeout} rping -c -a {self.server.addr} "
                                         f"-p {PROBE_PORT} -C 1 -S 64", timeout=timeout + 20)
            except GuestError as exc:
                return False, f"control channel: {exc}"
            if result.ok:
                return True, ""
            said.append(f"probe rping exited {result.status}: "
                        f"{result.output.strip()[-200:]}")
        return False, said[-1]

    def counters(self) -> dict[str, dict[str, int]]:
        out = {}
        for guest in (self.server, self.client):
            try:
                out[guest.name] = self.rig.counters(guest)
            except GuestError:
                out[guest.name] = {}
        return out

    def kernel(self) -> str:
        return self.server.run("uname -r; cat /proc/version").output.strip().replace("\n", " | ")


def silent_counters_moved(before: dict[str, dict[str, int]],
                          after: dict[str, dict[str, int]]) -> list[str]:
    """``guest:counter +n`` for each of :data:`SILENT_COUNTERS` that moved."""
    moved = []
    for guest, values in after.items():
        for name in SILENT_COUNTERS:
            if name in values and values[name] > before.get(guest, {}).get(name, values[name]):
                moved.append(f"{guest}:{name} +{values[name] - before[guest][name]}")
    return moved


def planted_trap(guest: Guest, mark: bytes = TRAP_MARK) -> int:
    """Arm the planted fault in ``guest``; its background job."""
    script = TRAP_SCRIPT.replace("MARK", mark.decode())
    encoded = base64.b64encode(script.encode()).decode()
    guest.check(f"echo {encoded} | base64 -d > /tmp/trap.pl")
    return guest.spawn("perl /tmp/trap.pl", ready="grep -q armed /tmp/job*.out 2>/dev/null",
                       timeout=20)



"""The named scenarios: a server in guest 1, a client in guest 2, faults, MTU, IP version.

Commands are templates: ``{gid}`` the guest's RoCEv2 GID index (IPv4-mapped, or its global
IPv6 address when the scenario is IPv6), ``{server}`` guest 1's address. Sizes are small so
that a run takes seconds under TCG. Runs that must be clean give perftest a long transport
timeout (``-u 20``: 4.096 us * 2^20, about 4 s, instead of rxe's 67 ms default that fires
spuriously on a busy emulated machine); runs with faults keep the default, so that recovery
is quick.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .faults import Drop, Faults

#: RC RDMA WRITE FIRST/MIDDLE/LAST/ONLY and ACKNOWLEDGE (IBA 1.4 §9.2, Table 38).
WRITE_OPCODES = (6, 7, 8, 10)
ACK = 17
PERFTEST = "-d rxe0 -x {gid} -F"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    server: str
    client: str
    faults: Faults = field(default_factory=Faults)
    ipv6: bool = False
    mtu: int | None = None
    """The guests' eth0 MTU for this run (rxe's port MTU follows it); None: 1500."""
    ready: str = "tcp"
    """How to tell the server is ready: ``tcp`` (it listens on TCP port 18515), ``cm`` (an
    rdma_cm ID listens) or ``wait`` (two seconds)."""
    timeout: float = 120.0
    tools: tuple[str, ...] = ()
    unsupported: str | None = None
    """Output that says this kernel's rxe cannot do it (then the run is not retried and is
    recorded as unsupported, not failed)."""

    @property
    def clean(self) -> bool:
        return not self.faults.on_bridge and not self.faults.netem

    def commands(self, server_gid: int, client_gid: int, server: str) -> tuple[str, str]:
        return (self.server.format(gid=server_gid, server=server),
                self.client.format(gid=client_gid, server=server))


def _perftest(name: str, tool: str, args: str, summary: str, clean: bool = True,
              **kwargs: object) -> Scenario:
    flags = f"{PERFTEST} {args}" + (" -u 20" if clean else "")
    return Scenario(name, summary, f"{tool} {flags}", f"{tool} {flags} {{server}}",
                    tools=(tool,), **kwargs)  # type: ignore[arg-type]


def _pingpong(name: str, tool: str, args: str, summary: str,
              unsupported: str | None = None) -> Scenario:
    return Scenario(name, summary, f"{tool} -d rxe0 -g {{gid}} {args}",
                    f"{tool} -d rxe0 -g {{gid}} {args} {{server}}", tools=(tool,),
                    unsupported=unsupported)


def _rping(name: str, args: str, summary: str, **kwargs: object) -> Scenario:
    return Scenario(name, summary, f"rping -s -a {{server}} {args}",
                    f"rping -c -a {{server}} {args} -v", ready="cm", tools=("rping",),
                    **kwargs)  # type: ignore[arg-type]


LOSS = Faults(loss_percent=2.0)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    _perftest("write", "ib_write_bw", "-n 100 -s 16384", "RC RDMA WRITE, 100 x 16 KiB"),
    _perftest("read", "ib_read_bw", "-n 100 -s 16384", "RC RDMA READ, 100 x 16 KiB"),
    _perftest("send", "ib_send_bw", "-n 100 -s 16384", "RC SEND, 100 x 16 KiB"),
    _perftest("atomic", "ib_atomic_bw", "-n 100", "RC FETCH_ADD, 100 atomics"),
    _perftest("write_uc", "ib_write_bw", "-c UC -n 100 -s 16384", "UC RDMA WRITE"),
    _perftest("send_uc", "ib_send_bw", "-c UC -n 100 -s 16384", "UC SEND"),
    _perftest("send_ud", "ib_send_bw", "-c UD -n 100 -s 512", "UD SEND, 512 B"),
    Scenario("write_cm", "RC RDMA WRITE set up by rdma_cm (CM REQ/REP/RTU, DREQ/DREP)",
             "ib_write_bw -d rxe0 -R -F -n 100 -s 16384 -u 20",
             "ib_write_bw -d rxe0 -R -F -n 100 -s 16384 -u 20 {server}", ready="cm",
             tools=("ib_write_bw",)),
    _rping("rping", "-C 10 -S 64", "rping over rdma_cm: SEND, RDMA READ and WRITE"),
    _pingpong("rc_pingpong", "ibv_rc_pingpong", "-n 50 -s 4096", "RC SEND ping-pong"),
    _pingpong("ud_pingpong", "ibv_ud_pingpong", "-n 50 -s 512", "UD SEND ping-pong"),
    _pingpong("srq_pingpong", "ibv_srq_pingpong", "-n 50 -s 1024 -q 4",
              "RC SEND ping-pong into a shared receive queue, 4 QPs"),
    _pingpong("xsrq_pingpong", "ibv_xsrq_pingpong", "-n 20 -s 1024",
              "XRC SEND ping-pong (XRC SRQ); Linux 6.1's rxe has no XRC: ibv_open_xrcd "
              "fails with EOPNOTSUPP (95)", unsupported="Couldn't Open the XRC Domain 95"),
    _perftest("mtu256", "ib_write_bw", "-m 256 -n 50 -s 4096", "RC WRITE at path MTU 256"),
    _perftest("mtu4096", "ib_write_bw", "-m 4096 -n 50 -s 16384",
              "RC WRITE at path MTU 4096 (eth0 MTU 4200)", mtu=4200),
    _perftest("write_ipv6", "ib_write_bw", "-n 100 -s 16384",
              "RC RDMA WRITE between IPv6 GIDs", ipv6=True),
    _rping("rping_ipv6", "-C 10 -S 64", "rping over rdma_cm, IPv6", ipv6=True),
    _perftest("write_loss", "ib_write_bw", "-n 25 -s 65536",
              "RC WRITE with 2 % of RoCE frames dropped on the bridge", clean=False,
              faults=LOSS),
    _perftest("read_loss", "ib_read_bw", "-n 25 -s 65536",
              "RC READ with 2 % of RoCE frames dropped on the bridge", clean=False,
              faults=LOSS),
    _perftest("send_loss", "ib_send_bw", "-n 25 -s 65536",
              "RC SEND with 2 % of RoCE frames dropped on the bridge", clean=False,
              faults=LOSS),
    _perftest("write_drops", "ib_write_bw", "-n 100 -s 16384",
              "RC WRITE with the 41st and 701st WRITE packets and the 6th ACK dropped",
              clean=False, faults=Faults(drops=(
                  Drop(nth=(40, 700), opcodes=WRITE_OPCODES, source="10.77.0.2"),
                  Drop(nth=(5,), opcodes=(ACK,), source="10.77.0.1")))),
    _perftest("write_drops_small", "ib_write_bw", "-n 10 -s 8192",
              "RC WRITE, 10 x 8 KiB, the 21st WRITE packet and the 3rd ACK dropped (the "
              "source of captures/rxe/rxe-write-drops-headers.pcap)", clean=False,
              faults=Faults(drops=(Drop(nth=(20,), opcodes=WRITE_OPCODES, source="10.77.0.2"),
                                   Drop(nth=(2,), opcodes=(ACK,), source="10.77.0.1")))),
    _perftest("write_delay", "ib_write_bw", "-n 100 -s 16384",
              "RC WRITE, guest 2 delays its frames by 5 ms (netem)",
              faults=Faults(netem=((2, "delay 5ms"),))),
    _perftest("write_reorder", "ib_write_bw", "-n 10 -s 8192",
              "RC WRITE, guest 2 reorders its frames (netem delay 1ms, jitter 300us)",
              clean=False, faults=Faults(netem=((2, "delay 1ms 300us"),))),
    _perftest("write_duplicate", "ib_write_bw", "-n 100 -s 16384",
              "RC WRITE, guest 2 duplicates 2 % of its frames (netem)", clean=False,
              faults=Faults(netem=((2, "duplicate 2%"),))),
)}

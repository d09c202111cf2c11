"""Packets/s of ibwire.parse against scapy's dissection (scapy.contrib.roce), same frames.

Run: python tools/bench_parse.py [N]   (one run, side by side; not a test)
Each side dissects the same N frames: a mix of RoCEv2 ACKs, WRITEs, READ responses, UD SENDs
and native IB frames from the reference vectors (scapy gets the RoCE ones; it has no LRH).
"""

from __future__ import annotations

import sys
import time

import ibwire


def frames(n: int) -> list[bytes]:
    mix = [
        ibwire.build("rocev2_ipv4", {"bth.destqp": 5, "aeth.syndrome": 0x1F},
                     opcode="RC_ACKNOWLEDGE"),
        ibwire.build("rocev2_ipv4", {"bth.destqp": 5, "reth.va": 0x1000}, bytes(256),
                     opcode="RC_RDMA_WRITE_ONLY"),
        ibwire.build("rocev2_ipv4", {"bth.destqp": 5}, bytes(1024),
                     opcode="RC_RDMA_READ_RESPONSE_MIDDLE"),
        ibwire.build("rocev2_ipv6", {"bth.destqp": 5, "deth.q_key": 1}, bytes(64),
                     opcode="UD_SEND_ONLY"),
    ]
    return [mix[i % len(mix)] for i in range(n)]


def rate(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return len(items) / (time.perf_counter() - start)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    data = frames(n)
    ours = max(rate(ibwire.parse, data) for _ in range(3))
    import scapy.contrib.roce  # noqa: F401  (binds UDP 4791 -> BTH)
    from scapy.layers.l2 import Ether

    def dissect(frame: bytes) -> None:
        Ether(frame)

    theirs = max(rate(dissect, data) for _ in range(3))
    print(f"{'frames':<34}{n:>14,}")
    print(f"{'ibwire.parse (packets/s)':<34}{ours:>14,.0f}")
    print(f"{'scapy Ether(frame) + roce (pkt/s)':<34}{theirs:>14,.0f}")
    print(f"{'ratio ibwire / scapy':<34}{ours / theirs:>14.2f}x")


if __name__ == "__main__":
    main()

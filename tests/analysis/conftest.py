"""Captures for the QP analysis tests: generated conversations, and hand-made packet lists."""

from __future__ import annotations

import os

import pytest

from ibwire.builder import build
from ibwire.gen import Scenario, write_pcap
from ibwire.pcap.writer import PcapWriter
from ibwire.tables import opcodes_by_name

OP = {name: op.value for name, op in opcodes_by_name().items()}
A, B = "192.0.2.1", "192.0.2.2"


def frame(name: str, psn: int, qp: int, *, src: str = A, dst: str = B, syndrome: int | None = None,
          ackreq: int = 0, payload: int = 0, ecn: int = 2, **extra: int) -> bytes:
    """A RoCEv2/IPv4 frame of opcode ``name`` ("RC_SEND_ONLY"), CRCs right."""
    fields = {"eth.src": "02:00:00:00:00:01", "eth.dst": "02:00:00:00:00:02", "ip.src": src,
              "ip.dst": dst, "ip.dsfield.ecn": ecn, "udp.srcport": 0xC000,
              "bth.opcode": OP[name], "bth.psn": psn & 0xFFFFFF, "bth.destqp": qp,
              "bth.a": ackreq, "bth.p_key": 0xFFFF,
              **{k.replace("_", ".", 1): v for k, v in extra.items()}}
    if syndrome is not None:
        fields["aeth.syndrome"] = syndrome
        fields["aeth.msn"] = 0
    return build("rocev2_ipv4", fields, bytes(payload))


def write_frames(path: str, frames: list[tuple[int, bytes]]) -> str:
    with PcapWriter(str(path), 1, nanoseconds=True) as writer:
        for when, f in frames:
            writer.write(f, when)
    return str(path)


@pytest.fixture
def generated(tmp_path):
    """``generated(scenario)`` -> (path, manifest) of a generated capture."""
    count = iter(range(1000))

    def make(scenario: Scenario) -> tuple[str, dict]:
        path = os.path.join(tmp_path, f"gen{next(count)}.pcap")
        return path, write_pcap(path, scenario)

    return make


def analyse_on(twin: str, source: object, **kw: object) -> object:
    """``ibwire.analysis.analyse`` with the observer on the rules of ``twin`` ("c" or
    "python"), whichever is loaded (the compiled one skipped when IBWIRE_NO_EXTENSIONS=1
    left it unbuilt)."""
    from unittest import mock

    from ibwire.analysis import analyse, connections
    from ibwire.transport.observed import observer_on
    from tests.transport.test_observer import compiled

    if twin == "c":
        compiled()
    observer = observer_on(twin)
    with mock.patch.object(connections, "Observed", observer):
        return analyse(source, **kw)

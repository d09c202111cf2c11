"""Generate RDMA conversations: scenario in, time-ordered frames and a ground-truth manifest out.

Drives the sans-IO transport model (:mod:`ibwire.transport`) forward over a simulated link,
with faults (drops, bad ICRCs, lost ACKs, RNR NAKs), ECN marks and the CNPs they draw.
RC/UC/XRC connections are set up and torn down by the CM when ``Scenario.cm``
(:mod:`ibwire.gen.cm`), else out of band.
"""

from __future__ import annotations

from ibwire.gen.run import MANIFEST_VERSION, Generation, generate
from ibwire.gen.scenario import (
    ENCAPSULATIONS,
    FAULT_KINDS,
    PROFILES,
    TAPS,
    Endpoint,
    Fault,
    Link,
    QpSpec,
    Scenario,
    ScenarioError,
)
from ibwire.gen.write import write_capture, write_pcap

__all__ = ["ENCAPSULATIONS", "FAULT_KINDS", "MANIFEST_VERSION", "PROFILES", "TAPS", "Endpoint",
           "Fault",
           "Generation", "Link", "QpSpec", "Scenario", "ScenarioError", "generate",
           "write_capture", "write_pcap"]

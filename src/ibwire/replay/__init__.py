"""Replaying captures on an interface, tcpreplay's way, with RoCE ICRCs kept right.

* :mod:`ibwire.replay.schedule`: ``--multiplier``/``--pps``/``--mbps``/``--topspeed`` as
  due times;
* :mod:`ibwire.replay.unique`: ``--unique-ip`` with the ICRC recomputed;
* :mod:`ibwire.replay.send`: the AF_PACKET socket and its start-up checks;
* :mod:`ibwire.replay.run`: loading, loops, limits, bursts, ``-w``.
"""

from __future__ import annotations

from ibwire.replay.run import Plan, ReplayStats, load, send_plan, write_plan
from ibwire.replay.schedule import Timing, TimingError
from ibwire.replay.send import ReplayError, check_interface

__all__ = ["Plan", "ReplayError", "ReplayStats", "Timing", "TimingError", "check_interface",
           "load", "send_plan", "write_plan"]

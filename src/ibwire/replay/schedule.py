"""When each packet of a replay goes out: tcpreplay's timing options as offsets in seconds.

* ``multiplier`` x: the capture's own gaps divided by x (tcpreplay's default, x = 1);
* ``pps`` p: packet i at i/p;
* ``mbps`` M: packet i when the bits before it have gone out at M Mbit/s;
* ``topspeed``: no waiting at all (every offset 0).

Offsets run on within a loop; ``loop`` copies follow each other, ``loopdelay_ms`` apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class TimingError(ValueError):
    pass


@dataclass(frozen=True)
class Timing:
    multiplier: float | None = None
    pps: float | None = None
    mbps: float | None = None
    topspeed: bool = False

    def __post_init__(self) -> None:
        given = [n for n in ("multiplier", "pps", "mbps") if getattr(self, n) is not None]
        if len(given) + self.topspeed > 1:
            raise TimingError("--multiplier, --pps, --mbps and --topspeed exclude each other")
        for name in given:
            if not getattr(self, name) > 0:
                raise TimingError(f"--{name} must be positive")


def offsets(timing: Timing, timestamps_ns: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Seconds after the start of a loop at which each packet is due (float64)."""
    n = len(lengths)
    if timing.topspeed or n == 0:
        return np.zeros(n)
    if timing.pps is not None:
        return np.arange(n, dtype=np.float64) / timing.pps
    if timing.mbps is not None:
        bits = np.concatenate(([0], np.cumsum(lengths.astype(np.float64) * 8)[:-1]))
        return bits / (timing.mbps * 1e6)
    gaps = (timestamps_ns - timestamps_ns[0]).astype(np.float64) / 1e9
    return np.maximum(gaps, 0) / (timing.multiplier or 1.0)


def loop_length(timing: Timing, due: np.ndarray, lengths: np.ndarray) -> float:
    """How long one loop lasts: its last packet's offset plus that packet's own share."""
    if not len(due) or timing.topspeed:
        return 0.0
    if timing.pps is not None:
        return len(due) / timing.pps
    if timing.mbps is not None:
        return float(lengths.sum()) * 8 / (timing.mbps * 1e6)
    return float(due[-1])

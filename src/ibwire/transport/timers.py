"""The transport's two timers, as durations in nanoseconds; the model keeps no clock.

- Local ACK timeout: 4.096 us x 2^t for the 5-bit QP attribute t; t = 0 disables the timer
  (IBA Vol. 1 11.2.4.2 QP attributes; ``ibv_modify_qp(3)`` "timeout"; perftest ``-u``).
- RNR NAK timer: the 5-bit code an RNR NAK carries in its AETH syndrome, decoded by
  specs/rnr_timers.tsv (IBA Table 45).
"""

from __future__ import annotations

from functools import cache

from ibwire.tables import read_table

#: 4.096 us, the unit of the local ACK timeout.
ACK_TIMEOUT_UNIT_NS = 4096


def local_ack_timeout_ns(t: int) -> int | None:
    """The local ACK timeout for attribute ``t`` (0..31), or None when ``t`` is 0 (no timer)."""
    if not 0 <= t <= 31:
        raise ValueError(f"local ACK timeout {t!r} is not a 5-bit value (0..31)")
    return None if t == 0 else ACK_TIMEOUT_UNIT_NS << t


@cache
def _rnr_table() -> dict[int, int]:
    return {int(row["code"]): int(row["usec"]) * 1000 for row in read_table("rnr_timers")}


def rnr_timer_ns(code: int) -> int:
    """The wait an RNR NAK with timer ``code`` (0..31) asks for."""
    table = _rnr_table()
    if code not in table:
        raise ValueError(f"RNR timer code {code!r} is not a 5-bit value (0..31)")
    return table[code]

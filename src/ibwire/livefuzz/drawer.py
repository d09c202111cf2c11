"""Drawing from hypothesis strategies one value at a time, on demand, from a seed.

A live fuzzer decides what to draw from only as the wire goes on (the connection it learnt
a moment ago, the frame the forwarder holds now), so it cannot hand hypothesis a strategy
up front. :class:`Drawer` keeps one hypothesis test running in a thread (generation only,
no database, no shrinking; the seed fixed) whose every example draws the strategy the
caller passes to :meth:`Drawer.draw`: hypothesis's own generation (boundary values, small
sizes first) with an arbitrary strategy per call.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

T = TypeVar("T")
_STOP = object()


class _Stopped(Exception):
    pass


class Drawer:
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._requests: queue.Queue[Any] = queue.Queue()
        self._answers: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._pending: Any = None
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def draw(self, strategy: st.SearchStrategy[T], timeout: float = 60.0) -> T:
        """A value of ``strategy``."""
        if self._stopping:
            raise RuntimeError("the drawer is closed")
        self._requests.put(strategy)
        ok, value = self._answers.get(timeout=timeout)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        self._stopping = True
        self._requests.put(_STOP)
        self._thread.join(5)

    def __enter__(self) -> Drawer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        seed = self.seed
        while not self._stopping:
            @settings(database=None, max_examples=10**9, phases=[Phase.generate],
                      deadline=None, suppress_health_check=list(HealthCheck))
            @hypothesis_seed(seed)
            @given(st.data())
            def loop(data: st.DataObject) -> None:
                if self._stopping:
                    raise _Stopped
                request = self._pending if self._pending is not None else self._requests.get()
                if request is _STOP:
                    self._stopping = True
                    raise _Stopped
                self._pending = request  # kept if hypothesis abandons this example
                try:
                    value = data.draw(request)
                except Exception as exc:  # a strategy's own error: the caller's to see
                    if type(exc).__module__.startswith("hypothesis"):
                        raise
                    self._pending = None
                    self._answers.put((False, exc))
                    return
                self._pending = None
                self._answers.put((True, value))

            try:
                loop()
            except _Stopped:
                return
            except Exception as exc:
                if self._pending is not None and not self._stopping:
                    self._answers.put((False, exc))
                    self._pending = None
            seed += 1

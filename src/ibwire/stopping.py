"""Stopping on SIGTERM and SIGHUP as on Ctrl-C: the signal is raised in the main thread as
:class:`Terminated` (a KeyboardInterrupt), so that what runs stops the way it does for Ctrl-C:
threads stopped, the temporary files of unfinished outputs removed. A run ended by
``timeout``, a job scheduler or a closed terminal would otherwise leave them behind.
Nothing is installed on import: ``ibwire``'s command line does it while a verb runs, and an
export's worker processes (``ibwire export -j``) for their lives; a live capture sets its own
handlers (stop capturing) through :func:`handle` and :func:`restore` while it captures."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterable, Iterator
from typing import Any

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C's KeyboardInterrupt would be."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def handle(signums: Iterable[int], handler: Any, only_default: bool = False
           ) -> dict[int, Any]:
    """Set ``handler`` for ``signums`` (with ``only_default``, for those that have their
    default action only: a handler already there, or SIGHUP ignored under ``nohup``, is
    left alone); returns the handlers replaced, for :func:`restore`. In the main thread
    only (elsewhere nothing is done)."""
    before: dict[int, Any] = {}
    for signum in signums:
        try:
            if not only_default or signal.getsignal(signum) == signal.SIG_DFL:
                before[signum] = signal.signal(signum, handler)
        except ValueError:  # not the main thread: signals stay as they are
            break
    return before


def restore(before: dict[int, Any]) -> None:
    """Put back the handlers :func:`handle` replaced."""
    for signum, handler in before.items():
        signal.signal(signum, handler)


def stop_on_terminate() -> dict[int, Any]:
    """Raise :class:`Terminated` on SIGTERM and SIGHUP where they have their default action;
    returns the handlers replaced."""
    return handle(SIGNALS, _raise, only_default=True)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """:func:`stop_on_terminate` for the time of the block, the handlers before put back
    after (a live capture's own handlers take over while it captures)."""
    before = stop_on_terminate()
    try:
        yield
    finally:
        restore(before)

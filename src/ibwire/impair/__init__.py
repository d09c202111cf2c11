"""``ibwire impair``: a RoCE-aware man in the middle between two interfaces.

:class:`Forwarder` joins two interfaces (AF_PACKET), forwards every frame both ways and
applies a fault plan (:class:`Plan`, rules spelled as ``ibwire gen``'s faults) to the
InfiniBand/RoCE frames, learning the connections from the traffic (:class:`LiveState`); it
writes what crossed (``capture``) and what it did (``manifest``, gen's format). A ``hook``
sees every IB/RoCE frame after the plan (live fuzzing), :meth:`Forwarder.inject` sends a
frame of the caller's.
"""

from __future__ import annotations

from ibwire._lazy import lazy_exports

_MODULES = {"Forwarder": "ibwire.impair.forwarder", "Plan": "ibwire.impair.plan",
            "Rule": "ibwire.impair.plan", "PlanError": "ibwire.impair.plan",
            "parse_rule": "ibwire.impair.plan", "LiveState": "ibwire.impair.state",
            "Connection": "ibwire.impair.state", "ImpairError": "ibwire.impair.ports"}
__all__ = sorted(_MODULES)
__getattr__ = lazy_exports(__name__, globals(), _MODULES)

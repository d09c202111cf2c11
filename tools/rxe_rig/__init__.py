"""A soft-RoCE (rxe) rig: Debian's stock kernel in QEMU guests on a bridge in a network
namespace, real RDMA traffic under chosen faults, captured, with rxe's own counters.

Used by ``tests/realstack`` (with ``tools/`` on ``sys.path``: ``import rxe_rig``) and from the
command line: ``python tools/rxe_rig build|boot|run SCENARIO...|shell|list``.
"""

from __future__ import annotations

from .image import BuildError, Image, build, cache_root, cached

__all__ = ["BuildError", "Image", "build", "cache_root", "cached"]

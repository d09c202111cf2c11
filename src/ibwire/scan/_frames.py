"""Argument checking shared by both scanner twins."""

from __future__ import annotations

import numpy as np


def frame_arrays(offsets: object, lengths: object, links: object
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contiguous (offsets int64, lengths int64, link codes uint8), one row per frame;
    ``links`` may be one code for every frame."""
    offs = np.ascontiguousarray(offsets, dtype=np.int64).reshape(-1)
    lens = np.ascontiguousarray(lengths, dtype=np.int64).reshape(-1)
    if offs.shape != lens.shape:
        raise ValueError(f"{offs.size} offsets but {lens.size} lengths")
    raw = np.asarray(links)
    if raw.dtype.kind not in "iu":
        raise ValueError(f"links must be integer link codes, not {raw.dtype}")
    if raw.ndim == 0:
        raw = np.full(offs.shape, int(raw))
    raw = raw.reshape(-1)
    if raw.shape != offs.shape:
        raise ValueError(f"{raw.size} link codes for {offs.size} frames")
    if raw.size and (raw.min() < 0 or raw.max() > 255):
        raise ValueError("link codes must be in 0..255")
    return offs, lens, np.ascontiguousarray(raw, dtype=np.uint8)


def wire_arrays(wires: object, lengths: np.ndarray) -> np.ndarray:
    """Contiguous int64 lengths on the wire, one per frame (None: each frame's own length,
    none cut by the capture)."""
    if wires is None:
        return lengths
    out = np.ascontiguousarray(wires, dtype=np.int64).reshape(-1)
    if out.shape != lengths.shape:
        raise ValueError(f"{out.size} wire lengths for {lengths.size} frames")
    return out

"""Generated conversations into capture files: pcap through the fast plan's batches where it
makes them (a lossless conversation, or the rest of a faulted one once its faults are over),
the other records (the CM exchange, what is simulated) one by one; pcapng frame by frame."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ibwire.gen.run import Generation
from ibwire.gen.scenario import Scenario

if TYPE_CHECKING:
    from ibwire.gen.fast import Batch
    from ibwire.pcap.writer import PcapWriter


def write_pcap(path: str, scenario: Scenario) -> dict[str, Any]:
    """Write the frames of ``scenario`` to a nanosecond pcap at ``path`` (atomically, through
    :class:`ibwire.pcap.writer.PcapWriter`); returns the manifest."""
    return write_capture(path, scenario, pcapng=False)


#: Records between two calls of ``write_capture``'s ``on_progress``.
PROGRESS_EVERY = 4096


def write_capture(path: str, scenario: Scenario, *, pcapng: bool | None = None,
                  on_progress: Callable[[int], None] | None = None,
                  fast: bool = True, snaplen: int | None = None) -> dict[str, Any]:
    """Stream the frames of ``scenario`` into a capture at ``path``, written atomically:
    a nanosecond pcap, or pcapng when ``pcapng`` (None: when ``path`` ends in ``.pcapng``).
    Frames are written as they are made (memory does not grow with the packets);
    ``on_progress(records)`` is called every :data:`PROGRESS_EVERY` records. Returns the
    manifest. ``snaplen``: a headers-only capture, every record cut to that many bytes as
    ``tcpdump -s`` would (:func:`ibwire.pcap.snap.snap_capture`); the manifest says so
    (``snaplen``, ``records_cut``) and is otherwise the whole conversation's."""
    from ibwire.pcap.writer import PcapngWriter, PcapWriter

    if snaplen is not None:
        return _write_snapped(path, scenario, pcapng, on_progress, fast, snaplen)

    if pcapng is None:
        pcapng = str(path).lower().endswith(".pcapng")
    generation = Generation(scenario, fast=fast)
    linktype = generation.linktype
    count = 0
    if pcapng:
        with PcapngWriter(path) as ng:
            for when, frame in generation:
                ng.write(frame, when, linktype)
                count += 1
                if on_progress is not None and not count % PROGRESS_EVERY:
                    on_progress(count)
        return generation.manifest
    with PcapWriter(path, linktype, nanoseconds=True) as writer, \
            ThreadPoolExecutor(1, thread_name_prefix="ibwire-gen-write") as disk:
        # The fast plan's batches are laid out in the file's mapped pages (numpy's copies
        # release the GIL) while the next batch is made; at most one batch is in flight,
        # so memory stays bounded. Records in between are written after it.
        pending: Future[None] | None = None
        for piece in generation.pieces():
            before = count
            if isinstance(piece, tuple):
                if pending is not None:
                    pending.result()
                    pending = None
                writer.write(piece[1], piece[0])
                count += 1
            else:
                if pending is not None:
                    pending.result()
                pending = disk.submit(_put, writer, piece)
                count += len(piece.when)
            if on_progress is not None and before // PROGRESS_EVERY != count // PROGRESS_EVERY:
                on_progress(count)
        if pending is not None:
            pending.result()
    return generation.manifest


def _write_snapped(path: str, scenario: Scenario, pcapng: bool | None,
                   on_progress: Callable[[int], None] | None, fast: bool,
                   snaplen: int) -> dict[str, Any]:
    """``write_capture`` with a snap length: the whole capture beside ``path``, then cut."""
    import os
    import tempfile

    from ibwire.pcap.snap import snap_capture

    if snaplen < 1:
        raise ValueError(f"a snap length must be at least 1 byte, not {snaplen}")
    if pcapng is None:
        pcapng = str(path).lower().endswith(".pcapng")
    handle, whole = tempfile.mkstemp(prefix=".ibwire-gen-", suffix=".pcapng" if pcapng
                                     else ".pcap", dir=os.path.dirname(os.path.abspath(path)))
    os.close(handle)
    try:
        manifest = write_capture(whole, scenario, pcapng=pcapng, on_progress=on_progress,
                                 fast=fast)
        manifest["snaplen"] = snaplen
        manifest["records_cut"] = snap_capture(whole, path, snaplen)
    finally:
        os.unlink(whole)
    return manifest


def _put(writer: PcapWriter, batch: Batch) -> None:
    """Lay out the fast path's ``batch`` in the file's next bytes, in place (the batch has
    each little-endian nanosecond record header in the 16 bytes before its frame)."""
    import numpy as np

    with writer.appending(batch.size, len(batch.when), batch.longest) as view:
        out = np.frombuffer(view, dtype=np.uint8)
        try:
            batch.fill(out)
        finally:
            del out

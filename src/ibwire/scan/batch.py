"""A scanned batch of capture records: columns, plus the errors behind the error codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ibwire.crc._common import CUT_HEADER, ERROR_CODES
from ibwire.errors import (
    IbwireError,
    MalformedError,
    NotInfinibandError,
    TruncatedError,
    UnsupportedError,
)
from ibwire.headers.fields import display
from ibwire.pcap.filemap import check_buffer
from ibwire.pcap.index import CaptureIndex
from ibwire.pcap.records import LINK_NAMES
from ibwire.scan import program

_ERROR_CLASSES: dict[int, type[IbwireError]] = {code: cls for cls, code in ERROR_CODES.items()}
NOT_IB = program.ERROR_NAMES.index("not_ib")
TRUNCATED = program.ERROR_NAMES.index("truncated")


@dataclass(frozen=True)
class ScanBatch:
    """Columns of consecutive capture records (see :mod:`ibwire.scan.program` for the names).

    ``errors`` maps a row to the capture-level error of a record that could not be read (its
    ``error`` column is ``capture``). ``buffer`` holds the frames (``frame.offset``,
    ``frame.len``); it is valid until the next batch of the same scan is asked for.
    """

    columns: dict[str, np.ndarray]
    errors: dict[int, IbwireError]
    buffer: Any
    warnings: dict[int, IbwireError] = field(default_factory=dict)
    """Row -> the capture's warning about a usable record (caplen over snaplen ...)."""

    def __len__(self) -> int:
        return len(self.columns["record"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def values(self, name: str, rows: np.ndarray | None = None) -> list[Any]:
        """Header-field column ``name`` as Python values shown as ``Packet.fields()`` shows
        them (addresses as text; 0 where the header is absent, see ``headers``); of
        ``rows`` only (an index array) if given."""
        column = program.column(name)
        field = program.SLOTS[column.slot].by_name[column.field]
        if column.width != 16 and field.fmt is None:
            data = self.columns[name] if rows is None else self.columns[name][rows]
            return data.tolist()
        shown, index = self.shown(name, rows)
        return shown[index].tolist()

    def shown(self, name: str, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """An address column ``name`` (a field with a display format, or 16 bytes) as text:
        each distinct value's text once (an object array, ending with an empty text), and
        each row's index into it (of ``rows`` only if given)."""
        column = program.column(name)
        field = program.SLOTS[column.slot].by_name[column.field]
        data = self.columns[name] if rows is None else self.columns[name][rows]
        if column.width != 16:  # addresses repeat: show each distinct one once
            distinct, index = distinct_values(data)
            texts = [display(v, field) for v in distinct.tolist()]
        else:  # 16-byte rows: as two numbers (numpy sorts raw bytes slowly)
            halves = np.ascontiguousarray(data).view(np.uint64).reshape(-1, 2)
            first, index = distinct_pairs(halves)
            texts = [display(int.from_bytes(bytes(data[i]), "big"), field)
                     for i in first.tolist()]
        shown = np.empty(len(texts) + 1, object)  # not np.array(texts): no 2-D of chars
        shown[:-1] = texts
        shown[-1] = ""
        return shown, index

    def frame(self, row: int) -> memoryview:
        off, n = int(self.columns["frame.offset"][row]), int(self.columns["frame.len"][row])
        return memoryview(self.buffer)[off:off + n]

    def link(self, row: int) -> str:
        return LINK_NAMES.get(int(self.columns["link"][row]), "other")

    def is_ib(self) -> np.ndarray:
        """InfiniBand/RoCE packets: an encapsulation was recognised (even if it then failed)."""
        return (self.columns["encapsulation"] != 0) & (self.columns["error"] != NOT_IB)

    def failed(self) -> np.ndarray:
        """Rows that did not verify: a CRC mismatch or any error but other traffic and the
        truncation of a header that the capture cut (a snap length: :meth:`cut`)."""
        c = self.columns
        error = c["error"]
        return ((c["icrc_ok"] == 0) | (c["vcrc_ok"] == 0)
                | ((error != 0) & (error != NOT_IB) & ~self.cut_header()))

    def cut(self) -> np.ndarray:
        """Packets the capture cut (a snap length) that did not fail otherwise: a CRC, or a
        header, past the bytes kept; their CRCs cannot be verified."""
        return (self.columns["cut"] != 0) & ~self.failed()

    def cut_header(self) -> np.ndarray:
        """Rows whose error is the truncation of a header that the capture cut."""
        c = self.columns
        return (c["error"] == TRUNCATED) & ((c["cut"] & CUT_HEADER) != 0)

    def error(self, row: int) -> IbwireError | None:
        """The error of a row (record = the row's record number), None if it has none or is
        just other traffic."""
        c = self.columns
        code = int(c["error"][row])
        record = int(c["record"][row])
        if code == program.CAPTURE_ERROR:
            return self.errors[row]
        if code in (0, NOT_IB):
            return None
        header, field = program.site_name(int(c["error.site"][row]))
        cls = _ERROR_CLASSES.get(code, IbwireError)
        site = int(c["error.site"][row])
        if site == program.SITE_PADCNT:
            reason = "PadCnt exceeds the payload"
        elif site >= program.SITE_SLOT_BASE:
            reason = f"{header} runs past the ICRC: a length field is too small"
            field = ""
        else:
            reason = _REASONS.get(cls, "bad packet")
        return cls(reason, header=header or None, field=field or None,
                   offset=int(c["error.offset"][row]), record=record)

    def to_arrow(self) -> Any:
        """The columns as a ``pyarrow.Table`` (16-byte columns as fixed-size binary)."""
        try:
            import pyarrow as pa
        except ImportError as exc:
            raise ImportError("to_arrow() needs pyarrow (pip install pyarrow)") from exc
        arrays = {}
        for name, col in self.columns.items():
            if col.ndim == 2:
                arrays[name] = pa.FixedSizeBinaryArray.from_buffers(
                    pa.binary(16), len(col), [None, pa.py_buffer(np.ascontiguousarray(col))])
            else:
                arrays[name] = pa.array(col)
        return pa.table(arrays)


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-D array (sorted) and each row's index among them, as
    ``np.unique(axis=0, return_inverse=True)`` gives them, without loading numpy.ma."""
    if not len(rows):
        return rows, np.zeros(0, np.intp)
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    first = np.ones(len(order), bool)
    first[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    inverse = np.empty(len(order), np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse


def distinct_values(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a 1-D array (sorted) and each value's index among them: a 1-D
    ``np.unique`` (which loads no numpy.ma), a third faster than :func:`distinct_rows` of
    one column."""
    distinct, inverse = np.unique(values.reshape(-1), return_inverse=True)
    return distinct, inverse.reshape(-1)


#: An odd 64-bit constant (2**64 over the golden ratio) that mixes a pair into one number.
_MIX = np.uint64(0x9E3779B97F4A7C15)


def distinct_pairs(halves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A row of each distinct row of an (n, 2) uint64 array, and each row's index among them
    (any order): by one number mixed from each pair (a 1-D ``np.unique`` is several times
    faster than :func:`distinct_rows`), checked row for row; if two distinct pairs mixed to
    one number, by :func:`distinct_rows`."""
    if not len(halves):
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    mixed = halves[:, 0] * _MIX ^ halves[:, 1]
    _numbers, first, inverse = np.unique(mixed, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if np.array_equal(halves[first][inverse], halves):
        return first, inverse
    distinct, inverse = distinct_rows(halves)
    first = np.zeros(len(distinct), np.intp)
    first[inverse[::-1]] = np.arange(len(inverse))[::-1]  # a row of each distinct value
    return first, inverse


_REASONS: dict[type[IbwireError], str] = {
    NotInfinibandError: "no InfiniBand transport packet here",
    TruncatedError: "frame ends before the data this field requires",
    MalformedError: "field contradicts the packet's structure",
    UnsupportedError: "valid, but not handled by the ICRC engine",
}


def cut_counts(batch: ScanBatch, kept: np.ndarray) -> tuple[int, int]:
    """The tally's last two counts of a batch: the packets the capture cut (``ScanBatch.cut``)
    and the most bytes kept of one of them (``kept``: each row's captured bytes)."""
    cut = batch.cut()[:len(kept)]
    return int(np.count_nonzero(cut)), int(kept[cut].max()) if cut.any() else 0


def make_batch(cols: dict[str, np.ndarray], first_record: int, timestamps: np.ndarray,
               linktypes: np.ndarray, orig_lengths: np.ndarray,
               errors: tuple[IbwireError, ...], warnings: object, buffer: Any) -> ScanBatch:
    """A batch from scanned columns and the capture's columns; ``errors`` and ``warnings``
    carry their row as ``record``."""
    count = len(cols["record"])
    cols["record"][:] = np.arange(first_record, first_record + count)
    cols["timestamp_ns"][:] = timestamps
    cols["linktype"][:] = linktypes
    cols["frame.orig_len"][:] = orig_lengths
    by_row: dict[int, IbwireError] = {}
    for error in errors:
        row = int(error.record if error.record is not None else 0)
        by_row[row] = error.at_record(first_record + row)
        cols["error"][row] = program.CAPTURE_ERROR
        cols["encapsulation"][row] = 0
    notes = {int(w.record): w.at_record(first_record + int(w.record))
             for w in warnings if w.record is not None}  # type: ignore[attr-defined]
    return ScanBatch(cols, by_row, buffer, notes)


def scan_index(index: CaptureIndex, first_record: int = 0, fields: object = None) -> ScanBatch:
    """Scan the frames of an index (``ibwire.pcap.index_capture`` or one window of a scan);
    rows are records ``first_record`` onwards; ``fields`` as for ``scan_frames``. Raises
    CaptureError if the file under a mapped index shrank while it was scanned (the frames
    past its new end read as zeros: ``ibwire.pcap.filemap``)."""
    from ibwire.scan import scan_frames

    cols = scan_frames(index.buffer, index.offsets, index.lengths, index.link_codes, fields,
                       index.orig_lengths)
    check_buffer(index.buffer, first_record)
    return make_batch(cols, first_record, index.timestamps_ns, index.linktypes,
                      index.orig_lengths, index.errors, index.warnings, index.buffer)

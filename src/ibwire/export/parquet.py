"""A Parquet writer for the export's tables: numbers, booleans and text, every column optional
(Apache Parquet format 2, its ``parquet.thrift`` and ``Encodings.md``).

Arrow's writer (``pyarrow.parquet``) spends 4 to 9 ns a value on the export's columns (its
definition levels value by value, three copies of each page, a compression context made for
each page): most of the time of an export of a few columns. Here each column chunk is one page
made by numpy over the whole row group: definition levels as one run or one bit-packed run,
a column all null as one run of level 0 and no values, numbers PLAIN (widened to INT32 as
Parquet stores them), a number column of one value in a row group as a dictionary of it and
one run of indices, text as a dictionary page and RLE_DICTIONARY indices, growing columns
DELTA_BINARY_PACKED; pages compressed with zstd (Arrow's codec), a column chunk of a few
bytes left uncompressed. Statistics (null count, min and max) where asked, with the
type-defined order (unsigned for the unsigned integers). The Arrow types taken are those of
``ibwire.export.schema`` (the connections table, with list and struct columns, is written
by ``pyarrow.parquet``: ``ibwire.export.write._write_connections``): (u)int8 to (u)int64,
bool, float64, string and dictionary of string; the file's schema is the Parquet types with
their logical types (read back as the same Arrow types, text as string), the schema's metadata
as the file's key-value metadata.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

import numpy as np

MAGIC = b"PAR1"
VERSION = 2
#: DELTA_BINARY_PACKED layout: values a block, miniblocks a block (Encodings.md: a block a
#: multiple of 128 values, a miniblock a multiple of 32).
DELTA_BLOCK, DELTA_MINIBLOCKS = 2048, 8

# parquet.thrift enums
BOOLEAN, INT32, INT64, DOUBLE, BYTE_ARRAY = 0, 1, 2, 5, 6
OPTIONAL = 1
PLAIN, RLE, DELTA_BINARY_PACKED, RLE_DICTIONARY = 0, 3, 5, 8
UNCOMPRESSED, ZSTD = 0, 6
#: A column chunk's pages of fewer bytes than this are not compressed.
SMALL_CHUNK = 256
#: The biggest page (its sizes are Thrift i32).
PAGE_MAX = (1 << 31) - 1
DATA_PAGE, DICTIONARY_PAGE = 0, 2
UTF8 = 0
#: ConvertedType of the integers (parquet.thrift): (bits, signed) -> code
CONVERTED = {(8, False): 11, (16, False): 12, (32, False): 13, (64, False): 14,
             (8, True): 15, (16, True): 16, (32, True): 17, (64, True): 18}

# Thrift compact protocol field types
_TRUE, _FALSE, _I8, _I32, _I64, _BINARY, _LIST, _STRUCT = 1, 2, 3, 5, 6, 8, 9, 12


class ParquetError(ValueError):
    """A table this writer does not take (a type outside the export's)."""


# --- Thrift compact protocol: a struct is a list of (field id, kind, value) -----------------

def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(0x80)]


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _list_header(size: int, kind: int) -> bytes:
    return bytes([(size << 4) | kind]) if size < 15 else bytes([0xF0 | kind]) + _varint(size)


Struct = list[tuple[int, str, Any]]


def _value(kind: str, value: Any) -> tuple[int, bytes]:
    """(compact type, encoded value) of one value of ``kind``: i8, i32, i64, bin, struct,
    encoded (a struct's bytes from ``encode_struct``), or list:KIND."""
    if kind == "i32" or kind == "i64":
        return (_I32 if kind == "i32" else _I64), _zigzag(value)
    if kind == "i8":
        return _I8, bytes([value & 0xFF])
    if kind == "bin":
        data = value.encode() if isinstance(value, str) else bytes(value)
        return _BINARY, _varint(len(data)) + data
    if kind == "struct":
        return _STRUCT, encode_struct(value)
    if kind == "encoded":  # a struct encode_struct made already
        return _STRUCT, value
    if kind.startswith("list:"):
        inner = kind[5:]
        parts = [_value(inner, v) for v in value]
        elem = parts[0][0] if parts else _value(inner, 0 if inner != "struct" else [])[0]
        return _LIST, _list_header(len(parts), elem) + b"".join(p for _, p in parts)
    raise ParquetError(f"no Thrift kind {kind!r}")  # pragma: no cover - callers' own kinds


def encode_struct(fields: Struct) -> bytes:
    """A Thrift struct in the compact protocol (fields in increasing id order; None values
    left out)."""
    out = bytearray()
    last = 0
    for fid, kind, value in fields:
        if value is None:
            continue
        if kind == "bool":
            ctype, data = (_TRUE if value else _FALSE), b""
        else:
            ctype, data = _value(kind, value)
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | ctype)
        else:
            out.append(ctype)
            out += _zigzag(fid)
        out += data
        last = fid
    out.append(0)
    return bytes(out)


def _page_header(header: Struct, size: int, packed: int) -> bytes:
    """A PageHeader (``encode_struct`` of type, sizes and ``header``'s page struct), made
    directly for the two shapes written: a data page (v1) and a dictionary page."""
    kind, (fid, _, fields) = header[0][2], header[1]
    out = b"\x15" + _zigzag(kind) + b"\x15" + _zigzag(size) + b"\x15" + _zigzag(packed)
    out += bytes([((fid - 3) << 4) | _STRUCT])
    last = 0
    for f, _, v in fields:
        out += bytes([((f - last) << 4) | _I32]) + _zigzag(v)
        last = f
    return out + b"\x00\x00"


# --- encodings -------------------------------------------------------------------------

def pack_bits(values: np.ndarray, width: int) -> bytes:
    """``values`` (unsigned, below 2**width) packed ``width`` bits each, least significant bit
    first, as the RLE/bit-packing hybrid and DELTA_BINARY_PACKED pack them; the last byte
    padded with zeros."""
    if width == 0 or not len(values):
        return b""
    if width == 1:
        return np.packbits(values.astype(bool), bitorder="little").tobytes()
    if width < 8:  # eight values to a 64-bit word, its first ``width`` bytes theirs
        n = len(values)
        groups = -(-n // 8)
        padded = np.zeros(groups * 8, np.uint64)
        padded[:n] = values
        grid = padded.reshape(groups, 8)
        word = grid[:, 0].copy()
        for i in range(1, 8):
            word |= grid[:, i] << np.uint64(width * i)
        packed = word.view(np.uint8).reshape(groups, 8)[:, :width].tobytes()
        return packed[:(n * width + 7) // 8]
    size = 1 if width <= 8 else 2 if width <= 16 else 4 if width <= 32 else 8
    narrow = np.ascontiguousarray(values, np.dtype(f"<u{size}"))
    if width == 8 * size:
        return narrow.tobytes()
    bits = np.unpackbits(narrow.view(np.uint8).reshape(-1, size), axis=1,
                         bitorder="little")[:, :width]
    return np.packbits(bits.ravel(), bitorder="little").tobytes()


def _run(count: int, value: int, width: int) -> bytes:
    """One RLE run of the RLE/bit-packing hybrid: ``count`` times ``value`` (``width`` bits)."""
    return _varint(count << 1) + value.to_bytes((width + 7) // 8, "little")


def hybrid(values: np.ndarray, width: int) -> bytes:
    """The RLE/bit-packing hybrid of ``values`` (no length prefix): one RLE run where all are
    equal, else one bit-packed run of the values padded to a multiple of 8."""
    n = len(values)
    if n == 0:
        return b""
    first = int(values[0])
    if not (values != values[0]).any():
        return _run(n, first, width)
    groups = (n + 7) // 8
    padded = np.zeros(groups * 8, values.dtype)
    padded[:n] = values
    return _varint((groups << 1) | 1) + pack_bits(padded, width)


def definition_levels(valid: np.ndarray | None, n: int) -> bytes:
    """A data page (v1)'s definition levels of an optional column: 4-byte length, hybrid."""
    return _levels(_run(n, 1, 1) if valid is None else hybrid(valid.view(np.uint8), 1))


def _levels(body: bytes) -> bytes:
    return len(body).to_bytes(4, "little") + body


def delta_binary_packed(values: np.ndarray, bits: int = 64) -> bytes:
    """DELTA_BINARY_PACKED of ``bits``-bit integers (32 or 64: INT32 or INT64), the deltas
    in that width's wrapping arithmetic, as readers undo them."""
    signed: Any = np.int64 if bits == 64 else np.int32
    unsigned: Any = np.uint64 if bits == 64 else np.uint32
    v: Any = np.ascontiguousarray(values).astype(signed, copy=False)
    n = len(v)
    out = bytearray(_varint(DELTA_BLOCK) + _varint(DELTA_MINIBLOCKS) + _varint(n)
                    + _zigzag(int(v[0]) if n else 0))
    if n <= 1:
        return bytes(out)
    with np.errstate(over="ignore"):
        deltas = v[1:] - v[:-1]
    count = len(deltas)
    blocks = -(-count // DELTA_BLOCK)
    per_mini = DELTA_BLOCK // DELTA_MINIBLOCKS
    if not (deltas != deltas[0]).any():  # record numbers: each block its minimum, widths 0
        return bytes(out) + (_zigzag(int(deltas[0])) + bytes(DELTA_MINIBLOCKS)) * blocks
    padded = np.empty(blocks * DELTA_BLOCK, signed)
    padded[:count] = deltas
    padded[count:] = deltas[-1]  # not below the last block's minimum; packed as zeros below
    grid = padded.reshape(blocks, DELTA_BLOCK)
    mins = grid.min(axis=1)
    with np.errstate(over="ignore"):
        adjusted = (grid - mins[:, None]).view(unsigned).astype(np.uint64)
    flat = adjusted.reshape(-1)
    flat[count:] = 0
    minis = adjusted.reshape(blocks * DELTA_MINIBLOCKS, per_mini)
    widths = bit_lengths(minis.max(axis=1))
    used = -(-count // per_mini)  # miniblocks with values; the others: width 0, no body
    widths[used:] = 0
    bodies: list[bytes] = [b""] * len(widths)
    for w in set(widths[:used].tolist()):
        which = np.flatnonzero(widths[:used] == w)
        packed = pack_bits(minis[which].reshape(-1), w)
        size = per_mini * w // 8
        for k, m in enumerate(which.tolist()):
            bodies[m] = packed[k * size:(k + 1) * size]
    mins_list = mins.tolist()
    width_rows = widths.reshape(blocks, DELTA_MINIBLOCKS)
    for b in range(blocks):
        out += _zigzag(mins_list[b])
        out += width_rows[b].tobytes()
        out += b"".join(bodies[b * DELTA_MINIBLOCKS:(b + 1) * DELTA_MINIBLOCKS])
    return bytes(out)


def bit_lengths(values: np.ndarray) -> np.ndarray:
    """Each unsigned 64-bit value's bit length (0 for 0), as uint8: six halvings."""
    x = values.astype(np.uint64)
    widths = np.zeros(len(x), np.uint8)
    for shift in (32, 16, 8, 4, 2, 1):
        high = x >= np.uint64(1 << shift)
        widths += high.astype(np.uint8) * np.uint8(shift)
        x = np.where(high, x >> np.uint64(shift), x)
    widths += (x != 0).astype(np.uint8)
    return widths


def plain_texts(texts: Sequence[str]) -> bytes:
    """PLAIN BYTE_ARRAY values: each a 4-byte length and its UTF-8 bytes."""
    return b"".join(len(b).to_bytes(4, "little") + b for b in (t.encode() for t in texts))


# --- columns ---------------------------------------------------------------------------

class _Kind:
    """How one Arrow type is stored: physical type, annotations, numpy dtype of the values."""

    def __init__(self, arrow_type: Any) -> None:
        import pyarrow as pa

        t = arrow_type
        self.text = pa.types.is_string(t) or (pa.types.is_dictionary(t)
                                              and pa.types.is_string(t.value_type))
        self.boolean = pa.types.is_boolean(t)
        self.converted: int | None = None
        self.logical: Struct | None = None
        self.dtype: np.dtype[Any] = np.dtype("<i4")
        self.source: np.dtype[Any] = self.dtype
        if self.text:
            self.physical, self.converted = BYTE_ARRAY, UTF8
            self.logical = [(1, "struct", [])]  # STRING
        elif self.boolean:
            self.physical = BOOLEAN
        elif pa.types.is_floating(t) and t.bit_width == 64:
            self.physical, self.dtype = DOUBLE, np.dtype("<f8")
            self.source = self.dtype
        elif pa.types.is_integer(t):
            bits, signed = t.bit_width, pa.types.is_signed_integer(t)
            self.physical = INT64 if bits == 64 else INT32
            self.dtype = np.dtype("<i8" if bits == 64 else "<i4")
            self.source = np.dtype(t.to_pandas_dtype())
            self.converted = CONVERTED.get((bits, signed))
            self.logical = [(10, "struct", [(1, "i8", bits), (2, "bool", signed)])]
        else:
            raise ParquetError(f"no Parquet column for Arrow type {t}")


def _valid(chunk: Any) -> np.ndarray | None:
    """A chunk's validity as bools (None: no nulls)."""
    if chunk.null_count == 0:
        return None
    n, offset = len(chunk), chunk.offset
    if chunk.null_count == n:
        return np.zeros(n, bool)
    return _bits(chunk.buffers()[0], offset, n)


def _numbers(chunk: Any, kind: _Kind) -> np.ndarray:
    """A chunk's values (every row, nulls' too) in the column's numpy type."""
    data = chunk.buffers()[1]
    n, offset = len(chunk), chunk.offset
    if data is None:
        return np.zeros(n, kind.source)
    return np.frombuffer(data, kind.source, count=offset + n)[offset:]


def _bools(chunk: Any) -> np.ndarray:
    return _bits(chunk.buffers()[1], chunk.offset, len(chunk))


def _bits(bitmap: Any, offset: int, n: int) -> np.ndarray:
    """``n`` bits of an Arrow bitmap buffer from bit ``offset``, as bools."""
    return np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little",
                         count=offset + n)[offset:].view(bool)


def _texts(chunks: Iterable[Any]) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """The distinct texts of a text column's chunks (in first-seen order of the chunks'
    dictionaries), each row's index among them, and the rows' validity."""
    import pyarrow as pa

    place: dict[str, int] = {}
    indices: list[np.ndarray] = []
    valids: list[np.ndarray | None] = []
    sizes: list[int] = []
    for chunk in chunks:
        if pa.types.is_dictionary(chunk.type):
            words, codes = chunk.dictionary.to_pylist(), chunk.indices
            data = codes.buffers()[1]
            width = np.dtype(codes.type.to_pandas_dtype())  # any integer index type
            ids = np.frombuffer(data, width, count=codes.offset + len(codes))[codes.offset:] \
                if len(codes) and data is not None else np.zeros(len(codes), np.int32)
        else:
            words = chunk.to_pylist()
            ids = np.arange(len(words), dtype=np.int32)
        start = len(place)
        moved = np.array([place.setdefault(w, len(place)) if w is not None else 0
                          for w in words] or [0], np.int32)
        valid = _valid(chunk.indices if pa.types.is_dictionary(chunk.type) else chunk)
        if start == 0 and len(place) == len(moved) and ids.dtype == np.int32:
            indices.append(ids)  # its words first seen here, in their order: ids as they are
            # (a null's id points nowhere in particular: only valid rows are read)
        else:
            safe = ids if valid is None else np.where(valid, ids, 0)
            indices.append(moved[safe])
        valids.append(valid)
        sizes.append(len(chunk))
    return list(place), _joined(indices, np.int32), _joined_valid(valids, sizes)


def _joined(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _joined_valid(valids: list[np.ndarray | None], sizes: list[int]) -> np.ndarray | None:
    if all(v is None for v in valids):
        return None
    return np.concatenate([np.ones(s, bool) if v is None else v
                           for v, s in zip(valids, sizes, strict=True)])


class _Chunk:
    """One column chunk written: where and how big, for the footer."""

    def __init__(self) -> None:
        self.dictionary_offset: int | None = None
        self.data_offset = 0
        self.compressed = 0
        self.uncompressed = 0
        self.encodings: list[int] = []
        self.statistics: Struct | None = None
        self.codec = ZSTD
        self.pages: list[tuple[Struct, bytes]] = []  # (header fields, body) to write


class ParquetWriter:
    """A Parquet file written a row group at a time from Arrow tables of one schema (every
    field optional); ``statistics`` names the columns whose statistics are written, ``deltas``
    the integer columns written DELTA_BINARY_PACKED."""

    def __init__(self, sink: str | os.PathLike[str] | BinaryIO, schema: Any, *,
                 statistics: Iterable[str] = (), deltas: Iterable[str] = (),
                 metadata: dict[str, str] | None = None,
                 created_by: str = "ibwire version (unknown)") -> None:
        import pyarrow as pa

        self.schema = schema
        self.kinds = _kinds(schema)
        self.statistics = set(statistics)
        self.deltas = set(deltas)
        for name in self.deltas:
            i = schema.get_field_index(name)
            if i < 0 or self.kinds[i].physical not in (INT32, INT64):
                raise ParquetError(f"DELTA_BINARY_PACKED is for integer columns: {name!r}")
        meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
        self.metadata = {**meta, **(metadata or {})}
        self.created_by = created_by
        self.codec = pa.Codec("zstd")
        self.own = isinstance(sink, (str, os.PathLike))
        self.file: BinaryIO
        self.path = sink if isinstance(sink, (str, os.PathLike)) else None
        if isinstance(sink, (str, os.PathLike)):
            self.file = open(sink, "wb")  # closed by close() (and park())
        else:
            self.file = sink
        self.file.write(MAGIC)
        self.at = len(MAGIC)
        self.row_groups: list[bytes] = []  # encoded as written: close() only joins them
        self.rows = 0
        self.done = False  # close() was called

    def park(self) -> None:
        """Close the file until the next row group or ``close()`` (written to a path only):
        a writer of one of many partitions then holds no file descriptor meanwhile."""
        if self.path is not None and not self.file.closed:
            self.file.close()

    def _unpark(self) -> None:
        if self.file.closed and self.path is not None:
            self.file = open(self.path, "ab")  # closed by close() (and park())
            if self.file.tell() != self.at:
                raise ParquetError(f"{self.path}: changed while it was being written")

    def write_table(self, table: Any) -> None:
        """``table`` (this writer's schema) as one row group (none for no rows)."""
        if not table.schema.equals(self.schema, check_metadata=False):
            raise ParquetError("table's schema is not the file's")
        n = table.num_rows
        if n == 0:
            return
        self._unpark()
        start = self.at
        chunks = [self._column(table.column(i), self.schema[i].name, self.kinds[i], n)
                  for i in range(table.num_columns)]
        columns = [_chunk_bytes(c, f.name, k, n) for c, f, k in
                   zip(chunks, self.schema, self.kinds, strict=True)]
        self.row_groups.append(encode_struct([
            (1, "list:encoded", columns),
            (2, "i64", sum(c.uncompressed for c in chunks)),
            (3, "i64", n),
            (5, "i64", start),
            (6, "i64", sum(c.compressed for c in chunks)),
        ]))
        self.rows += n

    def _write_chunk(self, chunk: _Chunk) -> None:
        """Write a column chunk's pages (dictionary first), compressed unless they are a few
        bytes in all (a zstd frame then costs more than it saves, and the making of its
        context more than the rest of the page)."""
        chunk.codec = ZSTD if sum(len(b) for _, b in chunk.pages) >= SMALL_CHUNK \
            else UNCOMPRESSED
        for header, body in chunk.pages:
            if len(body) > PAGE_MAX:
                raise ParquetError(f"a page of {len(body)} bytes: Parquet's sizes are 32-bit; "
                                   "write the table in smaller row groups")
            packed = self.codec.compress(body, asbytes=True) if chunk.codec == ZSTD else body
            self._put(chunk, _page_header(header, len(body), len(packed)), packed, len(body),
                      header[0][2] == DICTIONARY_PAGE)
        chunk.pages = []

    def _put(self, chunk: _Chunk, head: bytes, packed: bytes, size: int,
             dictionary: bool = False) -> None:
        """Write a page (its header, its ``size`` bytes as ``packed``) into ``chunk``."""
        if dictionary:
            chunk.dictionary_offset = self.at
        else:
            chunk.data_offset = self.at
        self.file.write(head)
        self.file.write(packed)
        chunk.compressed += len(head) + len(packed)
        chunk.uncompressed += len(head) + size
        self.at += len(head) + len(packed)

    def _column(self, column: Any, name: str, kind: _Kind, n: int) -> _Chunk:
        chunk = _Chunk()
        stats = name in self.statistics
        if column.null_count == n:  # every row null (most header fields on a given link):
            # one run of level 0, no values; nothing of the rows to look at: the same page
            # for every such column of n rows (uncompressed: a few bytes)
            head, body = _null_page(n)
            chunk.codec = UNCOMPRESSED
            self._put(chunk, head, body, len(body))
            if stats:
                chunk.statistics = _stats(n, None, None)
            chunk.encodings = [PLAIN, RLE]
            return chunk
        if kind.text:
            texts, ids, valid = _texts(column.chunks)
            present = ids if valid is None else ids[valid]
            if not texts:
                texts = [""]
            chunk.pages.append(_dictionary_page(len(texts), plain_texts(texts)))
            width = max((len(texts) - 1).bit_length(), 1)
            values = bytes([width]) + hybrid(present, width)
            encoding = RLE_DICTIONARY
            if stats:
                seen = ([0] if len(present) else []) if len(texts) == 1 else \
                    np.flatnonzero(np.bincount(present, minlength=len(texts))).tolist()
                used = sorted((texts[i] for i in seen), key=str.encode)
                chunk.statistics = _stats(n - len(present), used[0].encode() if used else None,
                                          used[-1].encode() if used else None)
            chunk.encodings = [PLAIN, RLE, RLE_DICTIONARY]
        else:
            parts = column.chunks
            valid = _joined_valid([_valid(c) for c in parts], [len(c) for c in parts])
            if kind.boolean:
                every = _joined([_bools(c) for c in parts], bool)
                present = every if valid is None else every[valid]
                values = np.packbits(present, bitorder="little").tobytes()
                encoding = PLAIN
            else:
                every = _joined([_numbers(c, kind) for c in parts], kind.source)
                present = every if valid is None else every[valid]
                if name in self.deltas:
                    values = delta_binary_packed(present.astype(kind.dtype, copy=False),
                                                 64 if kind.physical == INT64 else 32)
                    encoding = DELTA_BINARY_PACKED
                elif len(present) and not (present != present[0]).any():
                    # one value (most header fields within a row group): a dictionary of
                    # it, the rows one run of index 0; nothing to compress
                    chunk.pages.append(_dictionary_page(1, present[:1].astype(kind.dtype)
                                                        .tobytes()))
                    values = b"\x01" + _run(len(present), 0, 1)  # bit width 1, index 0
                    encoding = RLE_DICTIONARY
                else:
                    values = present.astype(kind.dtype, copy=False).tobytes()
                    encoding = PLAIN
            if stats:
                chunk.statistics = _number_stats(present, kind, n - len(present))
            chunk.encodings = [PLAIN, RLE, RLE_DICTIONARY] if encoding == RLE_DICTIONARY \
                else [encoding, RLE]
        chunk.pages.append(_data_page(n, encoding, definition_levels(valid, n) + values))
        self._write_chunk(chunk)
        return chunk

    def close(self) -> None:
        """Write the footer (the file is complete) and close a file this writer opened."""
        if self.done:
            return
        self.done = True
        self._unpark()
        footer = encode_struct([
            (1, "i32", VERSION),
            (2, "list:encoded", _schema_elements(self.schema)),
            (3, "i64", self.rows),
            (4, "list:encoded", self.row_groups),
            (5, "list:struct", [[(1, "bin", k), (2, "bin", v)]
                                for k, v in self.metadata.items()] or None),
            (6, "bin", self.created_by),
            (7, "list:struct", [[(1, "struct", [])] for _ in self.kinds]),  # TYPE_ORDER
        ])
        self.file.write(footer + len(footer).to_bytes(4, "little") + MAGIC)
        if self.own:
            self.file.close()


def _data_page(n: int, encoding: int, body: bytes) -> tuple[Struct, bytes]:
    """A data page (v1) of ``n`` rows: ``body`` is its levels (RLE/bit-packed) and values."""
    return ([(1, "i32", DATA_PAGE),
             (5, "struct", [(1, "i32", n), (2, "i32", encoding), (3, "i32", RLE),
                            (4, "i32", RLE)])], body)


def _dictionary_page(count: int, body: bytes) -> tuple[Struct, bytes]:
    """A dictionary page of ``count`` PLAIN values (its header fields, its body)."""
    return [(1, "i32", DICTIONARY_PAGE),
            (7, "struct", [(1, "i32", count), (2, "i32", PLAIN)])], body


@functools.lru_cache(maxsize=16)
def _kinds(schema: Any) -> list[_Kind]:
    """Each field's :class:`_Kind` (the same for every file of a schema; only read)."""
    return [_Kind(f.type) for f in schema]


@functools.lru_cache(maxsize=16)
def _schema_elements(schema: Any) -> list[bytes]:
    """The footer's schema, encoded (once for the files of one schema: a partitioned export
    writes thousands)."""
    kinds = _kinds(schema)
    return [encode_struct([(4, "bin", "schema"), (5, "i32", len(schema))])] + [
        encode_struct([(1, "i32", k.physical), (3, "i32", OPTIONAL), (4, "bin", f.name),
                       (6, "i32", k.converted), (10, "struct", k.logical)])
        for f, k in zip(schema, kinds, strict=True)]


@functools.lru_cache(maxsize=64)
def _null_page(n: int) -> tuple[bytes, bytes]:
    """The data page of a column chunk of ``n`` null rows (its header, its body): one run of
    definition level 0 and no values, uncompressed."""
    header, body = _data_page(n, PLAIN, _levels(_run(n, 0, 1)))
    assert len(body) < SMALL_CHUNK  # a few bytes: never worth compressing
    return _page_header(header, len(body), len(body)), body


def _chunk_bytes(c: _Chunk, name: str, kind: _Kind, n: int) -> bytes:
    """A ColumnChunk, encoded: ``encode_struct`` of [(2, i64, its first page's offset),
    (3, struct, ColumnMetaData [(1, i32, type), (2, list:i32, encodings), (3, list:bin,
    [name]), (4, i32, codec), (5, i64, n), (6, i64, uncompressed), (7, i64, compressed),
    (9, i64, data page offset), (11, i64, dictionary page offset), (12, struct,
    statistics)])], made directly: the first four fields of a column's metadata are
    encoded once (a file holds a chunk per column per row group, thousands in a
    partitioned export)."""
    head = _chunk_head(kind.physical, tuple(c.encodings), name, c.codec)
    i64 = (1 << 4) | _I64
    meta = [head, bytes([i64]), _zigzag(n), bytes([i64]), _zigzag(c.uncompressed),
            bytes([i64]), _zigzag(c.compressed), bytes([(2 << 4) | _I64]),
            _zigzag(c.data_offset)]
    last = 9
    if c.dictionary_offset is not None:
        meta += [bytes([(2 << 4) | _I64]), _zigzag(c.dictionary_offset)]
        last = 11
    if c.statistics is not None:
        meta += [bytes([((12 - last) << 4) | _STRUCT]), encode_struct(c.statistics)]
    first = c.dictionary_offset if c.dictionary_offset is not None else c.data_offset
    return b"".join([bytes([(2 << 4) | _I64]), _zigzag(first), bytes([(1 << 4) | _STRUCT]),
                     *meta, b"\x00\x00"])


@functools.lru_cache(maxsize=4096)
def _chunk_head(physical: int, encodings: tuple[int, ...], name: str, codec: int) -> bytes:
    """The first four fields of a column's ColumnMetaData, encoded (without the struct's
    end)."""
    return encode_struct([(1, "i32", physical), (2, "list:i32", list(encodings)),
                          (3, "list:bin", [name]), (4, "i32", codec)])[:-1]


def _stats(nulls: int, low: bytes | None, high: bytes | None) -> Struct:
    return [(3, "i64", nulls), (5, "bin", high), (6, "bin", low)]


def _number_stats(present: np.ndarray, kind: _Kind, nulls: int) -> Struct:
    """Null count, and min and max (PLAIN bytes of the physical type) of the values."""
    if not len(present):
        return _stats(nulls, None, None)
    if kind.boolean:
        low, high = bool(present.min()), bool(present.max())
        return _stats(nulls, bytes([low]), bytes([high]))
    if kind.physical == DOUBLE and np.isnan(present).any():
        return _stats(nulls, None, None)  # no order with NaN: readers must not prune by it
    low, high = present.min(), present.max()  # unsigned order for unsigned sources
    dtype = kind.dtype if kind.physical != DOUBLE else np.dtype("<f8")
    as_bytes = np.array([low, high]).astype(kind.source).astype(dtype, copy=False) \
        if kind.physical != DOUBLE else np.array([low, high], dtype)
    return _stats(nulls, as_bytes[:1].tobytes(), as_bytes[1:].tobytes())

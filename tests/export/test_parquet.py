"""ibwire's Parquet writer, read back by pyarrow, DuckDB and Polars: values, types, statistics
and every encoding it writes (PLAIN, dictionaries of text and of one value, DELTA_BINARY_PACKED,
definition levels as a run or bit-packed), uncompressed and zstd column chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ibwire.export import arrays
from ibwire.export.parquet import (
    ParquetError,
    ParquetWriter,
    _Chunk,
    _chunk_bytes,
    _Kind,
    _page_header,
    _stats,
    bit_lengths,
    delta_binary_packed,
    encode_struct,
    hybrid,
    pack_bits,
)

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

INTEGERS = {"uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
            "uint64": (0, 2**64 - 1), "int32": (-2**31, 2**31 - 1),
            "int64": (-2**63, 2**63 - 1)}
TEXTS = ["", "ACK", "RDMA WRITE First", "192.0.2.1", "é", "zz"]


@st.composite
def columns(draw: st.DrawFn, n: int) -> tuple[str, object, list[object]]:
    """(Arrow type name, array, its values as Python objects) of n rows."""
    kind = draw(st.sampled_from([*INTEGERS, "bool", "float64", "text", "dictionary"]))
    nulls = draw(st.sampled_from(["none", "some", "all"]))
    valid = np.ones(n, bool) if nulls == "none" else np.zeros(n, bool) if nulls == "all" \
        else np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    if kind in INTEGERS:
        low, high = INTEGERS[kind]
        pick = st.sampled_from([low, high, 0 if low < 0 else low + 1]) \
            if draw(st.booleans()) else st.integers(low, high)
        if draw(st.booleans()):  # one value: the dictionary path
            pick = st.just(draw(pick))
        values = draw(st.lists(pick, min_size=n, max_size=n))
        array = arrays.numeric(np.array(values, np.dtype(kind)), getattr(pa, kind)(), valid)
    elif kind == "bool":
        values = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        array = arrays.numeric(np.array(values, bool), pa.bool_(), valid)
    elif kind == "float64":
        values = draw(st.lists(st.floats(allow_nan=False), min_size=n, max_size=n))
        array = pa.array([v if ok else None for v, ok in zip(values, valid, strict=True)],
                         pa.float64())
    else:
        indices = draw(st.lists(st.integers(0, len(TEXTS) - 1), min_size=n, max_size=n))
        array = arrays.pick(TEXTS, np.array(indices, np.int64), valid, kind == "dictionary")
    return kind, array, array.to_pylist()


@st.composite
def tables(draw: st.DrawFn) -> tuple[object, list[int]]:
    """A table of a few columns and the row counts it is written in (row groups)."""
    n = draw(st.integers(0, 300))
    cols = [draw(columns(n)) for _ in range(draw(st.integers(1, 4)))]
    table = pa.table({f"c{i}": array for i, (_, array, _) in enumerate(cols)})
    cuts = sorted(set(draw(st.lists(st.integers(0, n), max_size=3))) | {0, n})
    return table, cuts


def _write(path: Path, table: object, cuts: list[int], **options: object) -> None:
    writer = ParquetWriter(path, table.schema, **options)
    for a, b in zip(cuts, cuts[1:], strict=False):
        writer.write_table(table.slice(a, b - a))
    writer.close()


def _expected_type(t: object) -> object:
    return t.value_type if pa.types.is_dictionary(t) else t


@settings(max_examples=150, deadline=None)
@given(tables())
def test_pyarrow_reads_back_values_types_statistics(tmp_path_factory: pytest.TempPathFactory,
                                                    case: tuple[object, list[int]]) -> None:
    table, cuts = case
    path = tmp_path_factory.mktemp("pq") / "t.parquet"
    deltas = [f.name for f in table.schema if f.type in (pa.int64(), pa.int32())]
    _write(path, table, cuts, statistics=table.column_names, deltas=deltas,
           metadata={"ibwire.schema_version": "1"})
    back = pq.read_table(path)
    assert back.num_rows == table.num_rows
    assert back.schema.metadata[b"ibwire.schema_version"] == b"1"
    for name in table.column_names:
        assert back.schema.field(name).type == _expected_type(table.schema.field(name).type)
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == len([1 for a, b in zip(cuts, cuts[1:], strict=False) if b > a])
    rows = 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        part = table.slice(rows, group.num_rows)
        rows += group.num_rows
        for i, name in enumerate(table.column_names):
            stats = group.column(i).statistics
            values = [v for v in part.column(name).to_pylist() if v is not None]
            assert stats.null_count == part.num_rows - len(values)
            assert stats.has_min_max == bool(values)
            if values:
                key = (lambda v: v.encode()) if isinstance(values[0], str) else None
                assert (stats.min, stats.max) == (min(values, key=key), max(values, key=key))


@pytest.mark.parametrize("values", [
    [5], [5, 7], list(range(2048)), list(range(2049)), list(range(2049, 0, -1)),
    [2**63 - 1, -2**63, 2**63 - 1, 0, -1], [0] * 5000,
    [(2**64 - 4000 + 3 * k) % 2**64 - 2**63 for k in range(3000)],  # one delta, past the wrap
    list(np.cumsum(np.random.default_rng(3).integers(0, 1 << 40, 7000))),
])
def test_delta_binary_packed_round_trip(tmp_path: Path, values: list[int]) -> None:
    table = pa.table({"x": pa.array(values, pa.int64())})
    _write(tmp_path / "d.parquet", table, [0, len(values)], deltas=["x"])
    meta = pq.ParquetFile(tmp_path / "d.parquet").metadata.row_group(0).column(0)
    assert "DELTA_BINARY_PACKED" in meta.encodings
    assert pq.read_table(tmp_path / "d.parquet").column("x").to_pylist() == values


def test_encodings_that_the_readers_meet(tmp_path: Path) -> None:
    """The export's shapes, read by DuckDB and Polars as by pyarrow, filters by statistics
    too: a text dictionary, a number column of one value, unsigned values past the signed
    range, a column mostly null, a growing one, text and number columns all null."""
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    n = 20000
    rng = np.random.default_rng(5)
    some = rng.random(n) > 0.4
    table = pa.table({
        "record": arrays.numeric(np.arange(n, dtype=np.int64), pa.int64()),
        "ip.src": arrays.pick(["192.0.2.1", "192.0.2.2"], rng.integers(0, 2, n), None, True),
        "bth.tver": arrays.numeric(np.zeros(n, np.uint8), pa.uint8()),
        "reth.va": arrays.numeric(rng.integers(0, 2**64 - 1, n, dtype=np.uint64), pa.uint64(),
                                  some),
        "icrc": arrays.numeric(rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
                               pa.uint32()),
        "icrc_ok": arrays.numeric(rng.random(n) > 0.5, pa.bool_(), some),
        "error": arrays.nulls(n, pa.dictionary(pa.int32(), pa.string())),
        "grh.hoplmt": arrays.nulls(n, pa.uint8()),
    })
    path = tmp_path / "t.parquet"
    _write(path, table, [0, 7000, 14000, n], statistics=table.column_names, deltas=["record"])
    meta = pq.ParquetFile(path).metadata
    assert meta.row_group(0).column(2).encodings == ("PLAIN", "RLE", "RLE_DICTIONARY")
    assert meta.row_group(0).column(2).compression == "UNCOMPRESSED"
    assert meta.row_group(0).column(4).compression == "ZSTD"
    va = [v for v in table.column("reth.va").to_pylist() if v is not None]
    icrc = table.column("icrc").to_pylist()
    src = table.column("ip.src").to_pylist()
    where = "\"reth.va\" > 9223372036854775808 AND icrc > 2147483648"
    want = sum(1 for v, c, ok in zip(table.column("reth.va").to_pylist(), icrc,
                                     some, strict=True)
               if ok and v > 2**63 and c > 2**31)
    assert duckdb.sql(f"SELECT count(*) FROM '{path}' WHERE {where}").fetchall()[0][0] == want
    assert duckdb.sql(f"SELECT count(*) FROM '{path}' WHERE \"ip.src\" = '192.0.2.2' "
                      "AND \"bth.tver\" = 0").fetchall()[0][0] == src.count("192.0.2.2")
    assert duckdb.sql(f"SELECT sum(record), max(\"reth.va\"), count(icrc_ok) "
                      f"FROM '{path}'").fetchall()[0] == (n * (n - 1) // 2, max(va), len(va))
    assert meta.row_group(0).column(6).encodings == ("PLAIN", "RLE")  # all null: no values
    assert duckdb.sql(f"SELECT count(error), count(*) FROM '{path}' WHERE \"grh.hoplmt\" IS "
                      "NULL AND error IS NULL").fetchall()[0] == (0, n)
    frame = pl.read_parquet(path)
    for name in table.column_names:
        assert frame[name].to_list() == table.column(name).to_pylist(), name
    lazy = pl.scan_parquet(path).filter(pl.col("reth.va") > 2**63).select(pl.len())
    assert lazy.collect().item() == sum(1 for v in va if v > 2**63)


@pytest.mark.parametrize("width", range(1, 17))
def test_pack_bits_is_the_bit_stream(width: int) -> None:
    """Each value's ``width`` bits in turn, least significant first, bytes filled from
    their low bit, the last padded with zeros."""
    rng = np.random.default_rng(width)
    for n in (1, 7, 8, 9, 63, 64, 100, 1001):
        values = rng.integers(0, 1 << width, n).astype(np.uint64)
        bits = [(v >> b) & 1 for v in values.tolist() for b in range(width)]
        bits += [0] * (-len(bits) % 8)
        want = bytes(sum(bits[i + j] << j for j in range(8)) for i in range(0, len(bits), 8))
        assert pack_bits(values, width) == want, n


def test_bit_lengths_are_pythons() -> None:
    edges = [0, 1, 2, 3, 255, 256, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**63, 2**64 - 1]
    rng = np.random.default_rng(9)
    randoms = [int(x) >> int(s) for x, s in zip(rng.integers(0, 2**63, 500, np.uint64),
                                                 rng.integers(0, 64, 500), strict=True)]
    values = edges + randoms
    assert bit_lengths(np.array(values, np.uint64)).tolist() == \
        [v.bit_length() for v in values]


def test_hybrid_runs_and_bit_packing() -> None:
    assert hybrid(np.array([3] * 10, np.uint64), 2) == bytes([20, 3])
    # 0..7 bit-packed at width 3: one group of 8 values in 3 bytes, LSB first
    assert hybrid(np.arange(8, dtype=np.uint64), 3) == bytes([3, 0b10001000, 0b11000110,
                                                              0b11111010])
    assert delta_binary_packed(np.array([], np.int64))[-1:] == b"\x00"


def test_what_it_does_not_take(tmp_path: Path) -> None:
    with pytest.raises(ParquetError, match="no Parquet column"):
        ParquetWriter(tmp_path / "x.parquet", pa.schema([("t", pa.timestamp("ns"))]))
    with pytest.raises(ParquetError, match="integer columns"):
        ParquetWriter(tmp_path / "x.parquet", pa.schema([("t", pa.string())]), deltas=["t"])
    writer = ParquetWriter(tmp_path / "x.parquet", pa.schema([("a", pa.int64())]))
    with pytest.raises(ParquetError, match="schema"):
        writer.write_table(pa.table({"b": pa.array([1], pa.int64())}))
    writer.close()
    assert pq.read_table(tmp_path / "x.parquet").num_rows == 0


@pytest.mark.parametrize("index", ["int8", "int16", "int32", "int64"])
def test_dictionaries_of_any_index_type(tmp_path: Path, index: str) -> None:
    words = pa.array(["a", "bb", "c"])
    codes = pa.array([2, None, 0, 1, 2], getattr(pa, index)())
    table = pa.table({"t": pa.DictionaryArray.from_arrays(codes, words)})
    _write(tmp_path / "d.parquet", table, [0, 2, 5], statistics=["t"])
    assert pq.read_table(tmp_path / "d.parquet").column("t").to_pylist() == [
        "c", None, "a", "bb", "c"]


def test_a_page_too_big_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ibwire.export.parquet.PAGE_MAX", 1000)
    table = pa.table({"x": pa.array(range(1000), pa.int64())})
    writer = ParquetWriter(tmp_path / "big.parquet", table.schema)
    with pytest.raises(ParquetError, match="smaller row groups"):
        writer.write_table(table)
    writer.write_table(table.slice(0, 100))
    writer.close()
    assert pq.read_table(tmp_path / "big.parquet").column("x").to_pylist() == list(range(100))


def test_float_statistics_leave_out_min_max_with_nan(tmp_path: Path) -> None:
    table = pa.table({"f": pa.array([1.5, float("nan"), None, -2.0]),
                      "g": pa.array([1.5, None, -2.0, 3.0])})
    _write(tmp_path / "f.parquet", table, [0, 4], statistics=["f", "g"])
    meta = pq.ParquetFile(tmp_path / "f.parquet").metadata.row_group(0)
    assert not meta.column(0).statistics.has_min_max
    assert meta.column(0).statistics.null_count == 1
    assert (meta.column(1).statistics.min, meta.column(1).statistics.max) == (-2.0, 3.0)
    back = pq.read_table(tmp_path / "f.parquet").column("f").to_pylist()
    assert back[0] == 1.5 and back[1] != back[1] and back[2:] == [None, -2.0]


@pytest.mark.parametrize("page", [
    [(1, "i32", 0), (5, "struct", [(1, "i32", 57000), (2, "i32", 8), (3, "i32", 3),
                                   (4, "i32", 3)])],
    [(1, "i32", 2), (7, "struct", [(1, "i32", 300), (2, "i32", 0)])],
])
@pytest.mark.parametrize("sizes", [(5, 3), (123456, 99999), (0, 0)])
def test_page_headers_are_the_thrift_encoders(page: list, sizes: tuple[int, int]) -> None:
    """The page header's fast path writes what the general Thrift encoder writes."""
    size, packed = sizes
    assert _page_header(page, size, packed) == encode_struct(
        [(1, "i32", page[0][2]), (2, "i32", size), (3, "i32", packed), *page[1:]])


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 1 << 40), sizes=st.tuples(*[st.integers(0, 1 << 40)] * 2),
       offsets=st.tuples(st.integers(4, 1 << 40), st.none() | st.integers(4, 1 << 40)),
       encodings=st.lists(st.sampled_from([0, 2, 3, 5, 8]), min_size=1, max_size=3),
       codec=st.sampled_from([0, 6]), name=st.text(max_size=20),
       stats=st.none() | st.tuples(st.integers(0, 1 << 40), st.none() | st.binary(max_size=9),
                                   st.none() | st.binary(max_size=9)),
       arrow_type=st.sampled_from(["int8", "uint32", "int64", "string", "bool_", "float64"]))
def test_column_chunks_encode_as_thrift_says(n, sizes, offsets, encodings, codec, name, stats,
                                             arrow_type):
    """``_chunk_bytes`` (made directly, its head cached) is ``encode_struct`` of the
    ColumnChunk as the Parquet format declares it."""
    kind = _Kind(getattr(pa, arrow_type)())
    chunk = _Chunk()
    chunk.uncompressed, chunk.compressed = sizes
    chunk.data_offset, chunk.dictionary_offset = offsets
    chunk.encodings, chunk.codec = encodings, codec
    chunk.statistics = None if stats is None else _stats(*stats)
    meta = [(1, "i32", kind.physical), (2, "list:i32", encodings), (3, "list:bin", [name]),
            (4, "i32", codec), (5, "i64", n), (6, "i64", sizes[0]), (7, "i64", sizes[1]),
            (9, "i64", offsets[0]), (11, "i64", offsets[1]), (12, "struct", chunk.statistics)]
    first = offsets[1] if offsets[1] is not None else offsets[0]
    expected = encode_struct([(2, "i64", first), (3, "struct", meta)])
    assert _chunk_bytes(chunk, name, kind, n) == expected
    assert _chunk_bytes(chunk, name, kind, n) == expected  # from the cached head

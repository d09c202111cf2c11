"""Text columns as dictionary arrays: the dictionary's values distinct (else Arrow's Parquet
writer drops the dictionary and writes each row's text), the rows' values unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tools.mixed_capture import write_ethernet

from ibwire.export import arrays
from tests.export.helpers import run

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


@given(st.lists(st.sampled_from(["", "ACK", "NAK", "RDMA WRITE First"]), min_size=1,
                max_size=20).flatmap(lambda texts: st.tuples(
                    st.just(texts),
                    st.lists(st.integers(0, len(texts) - 1), max_size=50),
                    st.booleans())))
def test_dictionary_of_distinct_values_same_rows(case: tuple[list[str], list[int], bool]
                                                 ) -> None:
    texts, picked, with_nulls = case
    indices = np.array(picked, np.int64)
    valid = (indices % 2 == 0) if with_nulls else None
    got = arrays.pick(texts, indices, valid, dictionary=True)
    values = got.dictionary.to_pylist()
    assert len(set(values)) == len(values)
    want = [texts[i] if valid is None or valid[k] else None for k, i in enumerate(picked)]
    assert got.to_pylist() == want
    assert arrays.pick(texts, indices, valid).to_pylist() == want


def test_export_text_columns_are_dictionary_encoded(tmp_path: Path) -> None:

    capture = tmp_path / "every-kind.pcap"
    write_ethernet(capture, 2000)
    out = tmp_path / "ds"
    status, _, err = run("export", "--all", "-o", str(out), str(capture))
    assert status in (0, 1), err
    meta = pq.ParquetFile(out / "packets" / "every-kind.pcap.parquet").metadata
    schema = meta.schema.to_arrow_schema()
    texts = [i for i, f in enumerate(schema) if pa.types.is_string(f.type)]
    assert {"bth.opcode.name", "aeth.syndrome.type", "encapsulation", "link"} <= {
        schema[i].name for i in texts}
    parquet = pq.ParquetFile(out / "packets" / "every-kind.pcap.parquet")
    seen = set()
    for g in range(meta.num_row_groups):
        rows = parquet.read_row_group(g)
        for i in texts:
            if rows.column(i).null_count == rows.num_rows:
                continue
            seen.add(schema[i].name)
            assert "RLE_DICTIONARY" in meta.row_group(g).column(i).encodings, schema[i].name
    assert "bth.opcode.name" in seen


@pytest.mark.parametrize("kind", ["uint8", "uint16", "uint32", "uint64", "int32", "int64",
                                  "bool", "string", "dictionary", "dictionary64"])
@pytest.mark.parametrize("n", [0, 1, 9, 70000])
def test_nulls_are_pyarrows_without_the_memory(kind: str, n: int) -> None:
    arrow_type = pa.bool_() if kind == "bool" else pa.string() if kind == "string" \
        else pa.dictionary(pa.int32(), pa.string()) if kind == "dictionary" \
        else pa.dictionary(pa.int64(), pa.string()) if kind == "dictionary64" \
        else getattr(pa, kind)()
    before = pa.total_allocated_bytes()
    made = [arrays.nulls(n, arrow_type) for _ in range(20)]
    grown = pa.total_allocated_bytes() - before
    for got in made:
        got.validate(full=True)
        assert got.type == arrow_type and got.null_count == n
        assert got.equals(pa.nulls(n, arrow_type))
    # twenty arrays of n rows: their buffers one shared zero buffer, not twenty
    assert grown <= max(1 << 16, 8 * (n + 1)) + 4096

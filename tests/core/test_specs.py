"""The tables in specs/ are what the code uses, and they agree with the reference facts."""

from __future__ import annotations

import csv
import os

import pytest

from ibwire import headers, tables
from tests.corpus import DATA


def _rows(name: str) -> list[dict[str, str]]:
    with open(os.path.join(tables.specs_dir(), f"{name}.tsv"), encoding="utf-8") as fh:
        return list(csv.DictReader((ln for ln in fh if not ln.startswith("#")), delimiter="\t"))


@pytest.mark.parametrize("name", sorted(f[:-4] for f in os.listdir(tables.specs_dir())
                                         if f.endswith(".tsv")))
def test_tables_read_as_csv_reads_them(name):
    """``read_table`` splits on tabs without the csv module: the same rows, none dropped."""
    assert tables.read_table(name) == _rows(name)
    assert all(None not in row and None not in row.values() for row in _rows(name))


def test_a_row_with_a_field_too_many_is_refused(tmp_path, monkeypatch):
    (tmp_path / "opcodes.tsv").write_text("# note\na\tb\n1\t2\n\n3\t4\t5\n", encoding="utf-8")
    monkeypatch.setattr(tables, "specs_dir", lambda: str(tmp_path))
    with pytest.raises(ValueError, match="line 5: 3 fields"):
        tables.read_table("opcodes")


def test_loaded_opcode_table_equals_the_file():
    rows = _rows("opcodes")
    assert len(rows) == 86
    loaded = tables.opcodes()
    assert sorted(loaded) == sorted(int(r["opcode"], 16) for r in rows)
    for row in rows:
        op = loaded[int(row["opcode"], 16)]
        assert op.name == row["name"]
        assert op.transport == row["transport"]
        assert (",".join(op.headers) or "-") == row["headers"]
        assert op.payload == (row["payload"] == "yes")
        assert op.source == row["source"] and op.source


def test_opcode_table_matches_the_reference_header_lengths():
    with open(DATA / "opcodes.tsv", encoding="utf-8") as fh:
        reference = list(csv.DictReader(fh, delimiter="\t"))
    checked = 0
    for row in reference:
        op = tables.opcodes()[int(row["value_hex"], 16)]
        assert op.name == row["name"]
        if row["hdr_bytes_incl_bth"]:
            assert op.hdr_bytes == int(row["hdr_bytes_incl_bth"]), op.name
            assert ["BTH", *op.headers] == row["headers_in_order"].split(","), op.name
            assert op.payload == (row["has_payload"] == "yes")
            checked += 1
    assert checked == 85  # all but RD_FLUSH, whose chain the reference leaves open


@pytest.mark.parametrize("value,status", [
    (0x00, "known"), (0x81, "known"), (0x1D, "known"), (0x15, "reserved"), (0x80, "reserved"),
    (0xDF, "reserved"), (0xE0, "manufacturer"), (0xFF, "manufacturer"),
])
def test_opcode_status(value, status):
    assert tables.opcode_status(value) == status


def test_header_sizes_table_matches_declarations():
    sizes = tables.header_sizes()
    for title, size in sizes.items():
        if title in ("ICRC", "VCRC"):
            declared = {"ICRC": headers.ICRC, "VCRC": headers.VCRC}[title].sizeof()
        else:
            declared = {h.title: h for h in headers.ALL.values()}[title].size
        assert declared == size, title


def test_other_tables_load_with_their_values():
    assert tables.aeth_types() == {0: "ACK", 1: "RNR_NAK", 2: "RESERVED", 3: "NAK"}
    assert tables.nak_codes()[0] == "PSN_SEQUENCE_ERROR"
    assert tables.lnh_names() == {0: "RAW", 1: "IP", 2: "IBA_LOCAL", 3: "IBA_GLOBAL"}
    assert tables.mad_classes()[0x03] == ("SUBN_ADM", True)
    assert tables.mad_classes()[0x81] == ("SUBN_DIRECTED_ROUTE", False)
    assert tables.mad_methods()[0x81] == "GET_RESP"
    assert tables.well_known_qps() == {0: "QP0", 1: "QP1"}
    assert tables.constants()["GRH_NEXT_HEADER_IBA"] == 0x1B
    assert tables.link_types()[("pcap", 247)] == ("INFINIBAND", "infiniband")
    for name in ("aeth_syndromes", "lnh", "mad_classes", "mad_methods", "constants",
                 "well_known_qps", "link_types", "headers"):
        assert all(row["source"] for row in _rows(name)), name

"""The scanner's program follows the declarations and the specs tables."""

from __future__ import annotations

import pytest

from ibwire.headers import ALL, EXTENDED
from ibwire.scan import program
from ibwire.tables import opcodes


def test_opcode_chains_are_the_specs_table():
    chain, length, flags = program.opcode_chains()
    for value in range(256):
        op = opcodes().get(value)
        if op is None:
            assert length[value] == program.NO_OPCODE
            continue
        names = [program.SLOTS[s].name for s in chain[value, :length[value]]]
        assert names == [EXTENDED[h].name for h in op.headers], op.name
        assert bool(flags[value] & 1) == (op.transport == "UD")


def test_one_column_per_declared_field():
    names = [c.name for c in program.columns()]
    assert len(names) == len(set(names))
    for header in program.SLOTS:
        for f in header.fields:
            assert header.key(f.name) in names
    headers = [h for i, h in enumerate(program.SLOTS) if i not in program.VIEW_SLOTS]
    assert {h.name for h in headers} <= set(ALL)
    assert program.VIEW_SLOTS == set(range(len(headers), len(program.SLOTS)))
    assert not set(names) & {name for name, _, _ in program.FIXED}


def test_the_slots_are_the_declarations_layouts():
    """``program.SLOTS`` (read from ``_layout.py``, no Construct) has each declared header's
    and view's name, title, size, keys and fields at their bits."""
    from ibwire.scan import declared

    assert len(program.SLOTS) == len(declared.slots())
    for mine, theirs in zip(program.SLOTS, declared.slots(), strict=True):
        assert (mine.name, mine.title, mine.size, mine.full_keys, mine.fields) == (
            theirs.name, theirs.title, theirs.size, theirs.full_keys, theirs.fields)
        assert mine.keys == theirs.keys
    assert program.SLOTS[program.SLOT["bth"]].key("psn") == "bth.psn"
    assert program.SLOTS[program.SLOT["cm.req"]].key("cm.req.localqpn") == "cm.req.localqpn"


def test_instructions_read_inside_the_header():
    for ins in program.instructions():
        size = program.SLOTS[ins.slot].size
        assert 0 <= ins.at and ins.at + ins.load <= size
        assert ins.load in (1, 2, 4, 8, 16)


def test_every_site_has_a_name():
    assert program.site_name(program.SITE_PADCNT) == ("BTH", "padcnt")
    assert program.site_name(program.SITE_SLOT_BASE + program.SLOT["reth"]) == ("RETH", "header")
    assert program.site_name(10_000) == ("", "")


def test_the_c_engine_assumes_the_specs_well_known_qps():
    from ibwire.tables import well_known_qps

    assert program.WELL_KNOWN_QPS == tuple(sorted(well_known_qps())) == (0, 1)


@pytest.mark.parametrize("rows", [1 << 12, 1 << 16, 65_536 * 3])
def test_columns_do_not_all_map_to_the_same_cache_sets(rows):
    """Every column is written at each row: with sizes of n * 2**k bytes, columns packed back
    to back would start in the same L1 set (64 sets of 64-byte lines) and evict each other.
    Skewed, no set holds the start of more than a few columns, fewer than an L1's 8 ways."""
    from collections import Counter

    cols = program.empty_columns(rows, program.select(None))
    sets = Counter((col.__array_interface__["data"][0] // 64) % 64 for col in cols.values())
    assert max(sets.values()) <= 4, sets.most_common(3)
    assert len(cols) > 64


def test_views_read_their_attributes_fields_at_the_declared_bits():
    """Each view column is a field of each of its attributes' records, at the same bits
    (the view is built from the records: a declaration that moved a field would fail)."""
    from ibwire.mads import RECORDS
    from ibwire.scan.views import VIEWS

    for view in VIEWS:
        assert view.attributes()
        for record_name, picks in view.sources.items():
            record = RECORDS[record_name]
            assert view.size == record.size
            for key, source in picks.items():
                mine, theirs = view.by_name[key], record.by_name[source]
                assert (mine.bits, mine.shift) == (theirs.bits, theirs.shift)
    keys = {key: program.SLOTS[slot].name for key, slot in program.mad_views()}
    assert keys[0x70010] in ("cm.local", "cm.req")
    assert sorted(program.SLOTS[s].name for k, s in program.mad_views() if k == 0x70013) == [
        "cm.local", "cm.remote", "cm.rep"]


@pytest.mark.parametrize("collide", [False, True])
def test_distinct_pairs_groups_equal_rows_only(collide):
    """16-byte columns (GIDs, IPv6 addresses) are grouped by one number mixed from their two
    halves; rows that mix to the same number but differ stay apart (the checked fallback)."""
    import numpy as np

    from ibwire.scan.batch import _MIX, distinct_pairs

    rng = np.random.default_rng(7)
    pool = rng.integers(0, 2**63, (6, 2), dtype=np.uint64)
    if collide:  # (0, 5) and (1, MIX ^ 5) both mix to 5
        pool[0], pool[1] = (0, 5), (1, int(_MIX) ^ 5)
    halves = pool[rng.integers(0, len(pool), 500)]
    halves[:2] = pool[:2]
    first, inverse = distinct_pairs(halves)
    assert len(first) == len({tuple(row) for row in halves.tolist()})
    assert np.array_equal(halves[first][inverse], halves)  # each row maps to its own value
    assert inverse[0] != inverse[1]
    assert distinct_pairs(halves[:0])[0].size == 0

"""The scanner's program follows the declarations and the specs tables."""

from __future__ import annotations

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
    assert set(program.SLOTS) <= set(ALL.values())
    assert not set(names) & {name for name, _, _ in program.FIXED}


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

"""The pieces of ibwire fuzz that need no target: generation, comparison, bisection and
shrinking (with plain Python predicates standing in for a target)."""

from __future__ import annotations

import time

from ibwire import crc, parse
from ibwire.fuzz.compare import Reference, diffs, same
from ibwire.fuzz.generate import Shape, apply_edits, draw_examples, strategy
from ibwire.fuzz.minimise import Budget, bisect, delta_debug, shrink


def test_bisect_finds_the_packet_that_fails_alone():
    calls = []

    def fails(items):
        calls.append(list(items))
        return 13 in items

    assert bisect(list(range(40)), fails) == 13
    assert len(calls) <= 2 * 6
    calls.clear()
    assert bisect(list(range(40)), fails, first_guess=13) == 13 and len(calls) == 1
    assert bisect(list(range(8)), lambda items: 2 in items and 6 in items) is None


def test_delta_debug_cuts_bytes_that_do_not_matter():
    example = draw_examples(strategy("bytes", Shape()), 1, 7)[0]
    frame = example.frame[:10] + b"\xab" + example.frame[10:]
    small = delta_debug(example.__class__(frame, example.link, "bytes", example.encapsulation,
                                          example.opcode, example.what),
                        lambda e: b"\xab" in e.frame, True, Budget(500, time.monotonic() + 60))
    assert small.frame == b"\xab"


def test_shrink_reaches_the_boundary_of_the_condition():
    """hypothesis shrinks the choices behind a packet: the smallest DestQP over 16 bits."""
    def big_qp(e):
        return parse(e.frame, e.link).fields()["bth.destqp"] >= 0x10000

    first = next(e for e in draw_examples(strategy("valid", Shape()), 50, 3) if big_qp(e))
    small = shrink(first, big_qp, Shape(), Budget(200, time.monotonic() + 60), seed=1)
    assert parse(small.frame, small.link).fields()["bth.destqp"] == 0x10000
    assert len(small.frame) <= len(first.frame)
    assert (small.encapsulation, small.opcode) == (first.encapsulation, first.opcode)


def test_modes_are_deterministic_and_keep_crcs_placed():
    for mode in ("invalid", "bytes"):
        one = draw_examples(strategy(mode, Shape(247)), 15, 11)
        assert one == draw_examples(strategy(mode, Shape(247)), 15, 11)
        assert {e.mode for e in one} == {mode} and all(e.link == "infiniband" for e in one)
    for e in draw_examples(strategy("invalid", Shape()), 25, 5):
        assert e.what and not e.what.startswith("crc")
        try:
            verdict = crc.verify(e.frame, e.link, lenient=True)
        except Exception:  # nothing placed: nothing to seal
            continue
        assert verdict.icrc_ok is not False, e.describe()


def test_apply_edits():
    assert apply_edits(b"abcd", [("set", 0, 0x7A)]) == b"zbcd"
    assert apply_edits(b"abcd", [("insert", 0xFFFF, 0x7A)]) == b"abcdz"
    assert apply_edits(b"abcd", [("delete", 0x8000, 0)]) == b"abd"
    assert apply_edits(b"", [("delete", 0, 0), ("set", 0, 1)]) == b""


def test_comparison_rules():
    assert same(5, "0x5") and same(5, 5) and not same(5, "6") and not same(5, True)
    assert same(b"\x01\xab", "01AB") and same((1, 2), [1, 2]) and not same((1, 2), [1])
    assert same("fe80::1", "FE80:0:0:0:0:0:0:1") and same("aa:bb:cc:dd:ee:ff", "AABBCCDDEEFF")
    clean = Reference({"bth.psn": 7}, True)
    assert diffs(clean, {}) == []
    assert [d.field for d in diffs(clean, {"bth.psn": 8, "reth.va": 1, "x": None})] == \
        ["bth.psn", "reth.va"]
    broken = Reference({"bth.psn": 7}, False, "truncated")
    assert [d.field for d in diffs(broken, {"bth.psn": 8, "reth.va": 1})] == ["bth.psn"]

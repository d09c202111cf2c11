"""The text filler (``ibwire.scan.text``): both twins write the same bytes for every op, each
op writes what Python's own formatting writes, and bad input is refused, never read."""

from __future__ import annotations

import random
import subprocess
import sys
from types import ModuleType

import numpy as np
import pytest

from ibwire.cli.show import field_text
from ibwire.scan import _text_python
from ibwire.scan.text import (
    HEX,
    LITERAL,
    NUMBER,
    PREFIX,
    SECONDS,
    SMALL,
    TEXT,
    Block,
    Templates,
    number_op,
)
from tests.crc.conftest import built_or_skip

try:
    from ibwire.scan import _text
except ImportError:
    _text = None


@pytest.fixture(scope="module", params=["python", "c"])
def filler(request: pytest.FixtureRequest) -> ModuleType:
    return _text_python if request.param == "python" else built_or_skip(_text, "ibwire.scan._text")


def _fill(module: ModuleType, templates: Templates, template: list[int], ints: list[np.ndarray],
          strs: list[list[str]], end: str = "\n") -> str:
    starts, ops, pool = templates.flat()
    return module.fill(np.array(template, np.int32), starts, ops, pool, ints, strs,
                       end).decode("utf-8")


EDGES = [0, 1, 9, 10, 15, 16, 255, 256, 999_999, 1_000_000, (1 << 32) - 1, 1 << 32,
         (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


@pytest.mark.parametrize("fmt", ["{}", "{:6d}", "{:#08x}", "0x{:x}", "0x{:08x}", "{:04x}",
                                 "LID {:#x}", "QP={:#08x} →", "{:#x}"])
def test_a_number_format_writes_what_python_formats(filler, fmt):
    values = EDGES + [random.Random(fmt).getrandbits(64) for _ in range(200)]
    templates = Templates()
    templates.add(list(number_op(fmt, "v")))
    out = _fill(filler, templates, [0] * len(values), [np.array(values, np.uint64)], [])
    assert out == "".join(fmt.format(v) + "\n" for v in values)


def test_small_writes_what_the_tree_shows_of_a_number(filler):
    values = EDGES + list(range(40))
    templates = Templates()
    templates.add([(SMALL, "v", 0, 0)])
    out = _fill(filler, templates, [0] * len(values), [np.array(values, np.uint64)], [], "|")
    assert out.split("|")[:-1] == [field_text(v) for v in values]


def test_seconds_are_what_python_writes_of_ns_over_1e9(filler):
    """Exactly, also where the microseconds tie (ns ending in 500), past 2**52 ns, and
    negative: the C engine's integer shortcut must never differ from the double's rounding."""
    rng = np.random.default_rng(17)
    values = np.concatenate([
        rng.integers(0, 1 << 53, 3000), rng.integers(-(1 << 40), 1 << 40, 3000),
        np.arange(-400, 400) * 500, np.arange(-400, 400) * 499,
        np.array([(1 << 52) - 500, (1 << 52) - 1, 1 << 52, (1 << 52) + 500, (1 << 63) - 1,
                  -(1 << 63), 999_999_500, 1_999_999_999, 86_400_000_000_500])]).astype(np.int64)
    for width in (0, 7, 11, 24):
        templates = Templates()
        templates.add([(SECONDS, "t", width, 0)])
        out = _fill(filler, templates, [0] * len(values), [values], [])
        assert out == "".join(f"{v / 1e9:{width}.6f}\n" for v in values.tolist()), width


def test_twins_agree_on_mixed_templates_rows_and_texts():
    built_or_skip(_text, "ibwire.scan._text")
    rng = random.Random(4791)
    kinds = [(NUMBER, 6, 0), (NUMBER, 0, 0), (HEX, 0, 0), (HEX, 8, PREFIX), (HEX, 4, 0),
             (SMALL, 0, 0), (SECONDS, 11, 0)]
    templates = Templates()
    block = Block([(LITERAL, "\n  shared ", 0, 0), (TEXT, "s1", 0, 0), (HEX, "i0", 2, 0)])
    for _ in range(30):
        ops: list = []
        for _ in range(rng.randrange(0, 12)):
            pick = rng.randrange(4)
            if pick == 0:
                ops.append((LITERAL, rng.choice(["a", " → ", "{x}", "", "é%s"]), 0, 0))
            elif pick == 1:
                ops.append((TEXT, f"s{rng.randrange(3)}", 0, 0))
            elif pick == 2:
                ops.append(block)
            else:
                kind, width, flags = rng.choice(kinds)
                ops.append((kind, f"i{rng.randrange(3)}", width, flags))
        templates.add(ops)
    rows = 500
    ints = [np.array([rng.getrandbits(63) >> rng.randrange(63) for _ in range(rows)], np.int64)
            for _ in templates.ints]
    strs = [[rng.choice(["", "10.0.0.1", "fe80::1", "→é"]) for _ in range(rows)]
            for _ in templates.strs]
    template = [rng.randrange(30) for _ in range(rows)]
    ours = _fill(_text, templates, template, ints, strs, "\n\n")
    assert ours == _fill(_text_python, templates, template, ints, strs, "\n\n")
    assert ours.count("\n\n") >= rows


def test_literals_merge_and_blocks_compile_once():
    templates = Templates()
    block = Block([(LITERAL, "x", 0, 0), (NUMBER, "n", 0, 0)])
    first = templates.add([(LITERAL, "a", 0, 0), (LITERAL, "b", 0, 0), block, block])
    pool_after_first = bytes(templates.pool)
    second = templates.add([block, (LITERAL, "ab", 0, 0)])
    starts, ops, pool = templates.flat()
    # the block is compiled when first met ("x" first in the pool), then "a" + "b" as one
    assert ops[starts[first]:starts[first + 1]].tolist() == [
        [LITERAL, 1, 2, 0], [LITERAL, 0, 1, 0], [NUMBER, 0, 0, 0], [LITERAL, 0, 1, 0],
        [NUMBER, 0, 0, 0]]
    assert pool == pool_after_first == b"xab"  # "ab" and "x" were already in the pool
    assert ops[starts[second + 1] - 1].tolist() == [LITERAL, 1, 2, 0]
    assert templates.columns_of([first]) == ({"n"}, set())


def test_an_unsupported_number_format_is_refused():
    for fmt in ("{:.2f}", "{:>6}", "{} {}", "no field", "{:08d}"):
        with pytest.raises(ValueError):
            number_op(fmt, "v")


def _bad_inputs() -> list[tuple[str, dict]]:
    templates = Templates()
    templates.add([(LITERAL, "ab", 0, 0), (NUMBER, "n", 0, 0), (TEXT, "s", 0, 0)])
    starts, ops, pool = templates.flat()
    good = {"template": np.zeros(3, np.int32), "starts": starts, "ops": ops, "pool": pool,
            "ints": [np.arange(3, dtype=np.int64)], "strs": [["a", "b", "c"]]}
    past_pool = ops.copy()
    past_pool[0] = (LITERAL, 1, 5, 0)
    unknown = ops.copy()
    unknown[1, 0] = 99
    bad_column = ops.copy()
    bad_column[2, 1] = 7
    return [
        ("a row names no template", {**good, "template": np.array([0, 1, 0], np.int32)}),
        ("a negative template", {**good, "template": np.array([0, -1, 0], np.int32)}),
        ("starts past the ops", {**good, "starts": np.array([0, 9], np.int32)}),
        ("a literal past the pool", {**good, "ops": past_pool}),
        ("an unknown op", {**good, "ops": unknown}),
        ("a text column that is not there", {**good, "ops": bad_column}),
        ("a text column too short", {**good, "strs": [["a"]]}),
        ("a text column not a list", {**good, "strs": [("a", "b", "c")]}),
        ("an integer column too short", {**good, "ints": [np.arange(2, dtype=np.int64)]}),
        ("an integer column of 4-byte values", {**good, "ints": [np.arange(3, dtype=np.int32)]}),
        ("no integer column", {**good, "ints": [None]}),
    ]


@pytest.mark.parametrize(("why", "given"), _bad_inputs(), ids=[w for w, _ in _bad_inputs()])
def test_bad_input_is_refused_not_read(why, given):
    from ibwire.scan.text import fill

    engines = [fill]
    if _text is not None:
        engines.append(_text.fill)
    for engine in engines:
        with pytest.raises(ValueError):
            engine(given["template"], given["starts"], given["ops"], given["pool"],
                   given["ints"], given["strs"], "\n")


def test_a_text_that_is_not_a_str_raises_a_type_error(filler):
    templates = Templates()
    templates.add([(TEXT, "s", 0, 0)])
    with pytest.raises(TypeError):
        _fill(filler, templates, [0, 0], [], [["a", 5]])


def test_a_column_is_read_as_the_op_reads_it_whatever_its_signedness(filler):
    """Numbers are uint64 and seconds int64 (the module's contract), from a column of either
    kind: the twin once wrote a signed column's -5 as "-5" where the C engine writes
    18446744073709551611, and 2**63 ns of an unsigned column as +9.2e9 s (found by
    tools/fuzzing/asan_loop.py)."""
    templates = Templates()
    templates.add([(NUMBER, "v", 0, 0), (LITERAL, " ", 0, 0), (HEX, "v", 0, PREFIX),
                   (LITERAL, " ", 0, 0), (SECONDS, "v", 0, 0)])
    signed = np.array([-5, 1], np.int64)
    out = _fill(filler, templates, [0, 0], [signed], [])
    assert out == "18446744073709551611 0xfffffffffffffffb -0.000000\n1 0x1 0.000000\n"
    unsigned = np.array([1 << 63], np.uint64)
    out = _fill(filler, templates, [0], [unsigned], [])
    assert out == f"{1 << 63} {1 << 63:#x} {-(1 << 63) / 1e9:.6f}\n"


OVERRUN = """
import numpy as np
from ibwire.scan import _text
from ibwire.scan.text import LITERAL, TEXT, Templates
templates = Templates()
templates.add([(TEXT, "s", 0, 0), (LITERAL, "x" * 4000, 0, 0)])
starts, ops, pool = templates.flat()
out = _text.fill(np.zeros(3, np.int32), starts, ops, pool, [], [["y" * 4000] * 3], "\\n")
print(out == (b"y" * 4000 + b"x" * 4000 + b"\\n") * 3)
"""


def test_a_text_does_not_use_up_the_room_the_ops_after_it_write_into():
    """A row's text was written into the room reserved for the row's other ops, which then
    wrote past the end of the output: a heap overflow (glibc aborted at the final realloc;
    found by tools/fuzzing/asan_loop.py under ASan). In a child process: it crashed."""
    built_or_skip(_text, "ibwire.scan._text")
    done = subprocess.run([sys.executable, "-c", OVERRUN], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr[-2000:]

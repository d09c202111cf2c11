"""``ibwire qp``'s table never drops a column silently: in a narrow terminal (or a pipe,
80 columns) the long addresses are shortened, then the columns left out are named on a last
line; ``--wide`` shows every column and whole addresses, ``--columns`` picks them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ibwire.analysis import analyse
from ibwire.cli.main import main
from ibwire.cli.qp import NAMES, table

SAMPLE = str(Path(__file__).resolve().parents[2] / "captures" / "sample-rocev2.pcap")
TITLES = ["#", "requester", "responder", "tr", "data", "retx", "nak/to/rnr", "dup", "gaps",
          "msgs", "bytes", "rdretx", "good%", "naks", "cnps", "ce", "rtt us", "stall ms",
          "cm", "find"]


def _connections() -> list[dict[str, Any]]:
    return analyse(SAMPLE).as_dicts()


def _long(dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The connections with GIDs for addresses (39 characters)."""
    out = []
    for d in dicts:
        d = {**d, "requester": {**d["requester"], "address": "fe80:1111:2222:3333:4444:5555:6666:7777"},
             "responder": {**d["responder"], "address": "fe80:1111:2222:3333:4444:5555:6666:8888"}}
        out.append(d)
    return out


def _titles(head: str) -> list[str]:
    return [t.strip() for t in head.split("  ") if t.strip()]


@pytest.mark.parametrize("width", [40, 60, 80, 100, 200])
def test_what_a_narrow_table_leaves_out_it_names(width: int) -> None:
    lines = table(_connections(), width)
    shown = _titles(lines[0])
    missing = [t for t in TITLES if t not in shown]
    if missing:
        assert lines[-1] == (f"(to fit {width} columns: left out "
                             f"{', '.join(t.split()[0] for t in missing)}; --wide shows all, "
                             f"--columns picks)")
        assert all(len(line) <= width for line in lines[:-1]) or \
            shown == ["#", "requester", "responder", "data", "retx", "find"]
    else:
        assert len(lines) == 1 + len(_connections())
    assert {"#", "requester", "responder", "data", "retx", "find"} <= set(shown)


def test_long_addresses_are_shortened_before_a_column_goes() -> None:
    dicts = _long(_connections())
    wide = table(dicts, None)
    full = max(len(line) for line in wide)
    lines = table(dicts, full - 1)
    assert lines[1].split()[1:3] == ["…:5555:6666:7777/0x11", "…:5555:6666:8888/0x22"]
    assert lines[-1].startswith(f"(to fit {full - 1} columns: addresses shortened;")
    assert _titles(lines[0]) == TITLES  # nothing else was needed


def test_wide_shows_every_column_and_whole_address(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    assert main(["qp", "--wide", SAMPLE]) == 0
    out = capsys.readouterr().out.splitlines()
    assert _titles(out[0]) == TITLES and not out[-2].startswith("(")
    assert main(["qp", SAMPLE]) == 0
    narrow = capsys.readouterr().out.splitlines()
    assert narrow[-2].startswith("(to fit 60 columns: left out ")


def test_columns_picks_and_orders(capsys) -> None:
    assert main(["qp", "--columns", "responder,naks,rtt,find", SAMPLE]) == 0
    out = capsys.readouterr().out.splitlines()
    assert _titles(out[0]) == ["responder", "naks", "rtt us", "find"]
    assert out[1].split() == ["10.0.0.2/0x22", "2", "1.5", "0"]


def test_an_unknown_column_is_exit_two_naming_them(capsys) -> None:
    assert main(["qp", "--columns", "data,rrt", SAMPLE]) == 2
    err = capsys.readouterr().err
    assert "no column 'rrt'" in err and ", ".join(NAMES) in err


def test_stall_ms_sets_the_threshold(capsys) -> None:
    import json

    assert main(["qp", "--json", SAMPLE]) == 0
    default = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["qp", "--json", "--stall-ms", "0", SAMPLE]) == 0
    every = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sum(d["stalls"] for d in every) > sum(d["stalls"] for d in default)
    assert all(d["stall_ns"] <= d["last_ns"] - d["first_ns"] for d in every)
    assert main(["qp", "--stall-ms", "-1", SAMPLE]) == 2
    assert "--stall-ms -1" in capsys.readouterr().err


def test_cm_state_and_service_id_in_the_text(generated, capsys) -> None:
    from ibwire.gen import QpSpec, Scenario

    path, manifest = generated(Scenario(qps=(QpSpec(iters=3, size=3000),), cm=True, seed=5))
    (q,) = manifest["qps"]
    assert main(["qp", "--wide", path]) == 0
    out = capsys.readouterr().out.splitlines()
    titles = _titles(out[0])
    assert out[1].split()[titles.index("cm")] == "disconnected" == q["cm"]["state"]
    assert f"CM service ID 0x{q['cm']['service_id']:016x}: #0 disconnected" in out
    assert main(["qp", "--wide", SAMPLE]) == 0   # no CM: no line, "-" in the column
    out = capsys.readouterr().out.splitlines()
    assert not any(line.startswith("CM ") for line in out)
    assert out[1].split()[_titles(out[0]).index("cm")] == "-"

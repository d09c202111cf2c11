"""``--where``: the subset of Wireshark's display-filter language (``ibwire.where``), on
field mappings and through the verbs (``show``, ``check``, ``stats``) on the corrupt sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from ibwire.cli.main import main
from ibwire.filter_fields import is_known, known_fields
from ibwire.inspect import inspect
from ibwire.pcap import read_capture
from ibwire.strategies import packets
from ibwire.where import FilterError, compile_where

SAMPLES = Path(__file__).resolve().parents[2] / "captures"
CORRUPT = SAMPLES / "sample-corrupt.pcap"

PACKET = {"frame": 3, "bth.destqp": 0x12, "bth.opcode": 17, "bth.psn": 7, "icrc_ok": False,
          "vcrc_ok": None, "ip.src": "10.77.0.2", "ip.dst": "10.77.1.9",
          "eth.src": "02:00:00:00:00:01", "aeth.syndrome.type": "NAK", "vlan.id": (5, 7),
          "reth.va": 5, "grh.sgid": "fe80::1", "error": "ICRC mismatch (wire 0x1)",
          "bth.opcode.name": "RC_ACKNOWLEDGE"}


def keeps(text: str, fields: dict | None = None) -> bool:
    return compile_where(text)(PACKET if fields is None else fields)


@pytest.mark.parametrize("text, kept", [
    # comparisons, both spellings
    ("bth.destqp == 0x12", True), ("bth.destqp == 18", True), ("bth.destqp != 18", False),
    ("bth.opcode > 16", True), ("bth.opcode >= 18", False), ("bth.opcode < 18", True),
    ("bth.opcode <= 16", False), ("bth.opcode eq 17", True), ("bth.opcode ne 17", False),
    ("bth.opcode gt 17", False), ("bth.opcode ge 17", True), ("bth.opcode lt 17", False),
    ("bth.opcode le 17", True), ("16 < bth.opcode", True), ("frame == -1", False),
    # and, or, not, parentheses (and before or)
    ("bth.destqp == 0x12 && bth.opcode == 17", True), ("bth.destqp == 0x12 and bth.psn == 8",
                                                        False),
    ("bth.psn == 8 || bth.opcode == 17", True), ("bth.psn == 8 or bth.opcode == 16", False),
    ("!(bth.opcode == 17)", False), ("not bth.opcode == 16", True), ("! ! reth", True),
    ("bth.psn == 8 && bth.opcode == 16 || frame == 3", True),
    ("bth.psn == 8 && (bth.opcode == 16 || frame == 3)", False),
    # true/false and the verdicts
    ("icrc_ok == false", True), ("icrc_ok != true", True), ("icrc_ok == true", False),
    ("icrc_ok == 0", True), ("!icrc_ok", True), ("icrc_ok", False),
    ("vcrc_ok == false", False), ("vcrc_ok != true", False),  # no VCRC: neither
    ("true", True), ("false", False), ("true && !false", True),
    # addresses and networks, unquoted
    ("ip.src == 10.77.0.2", True), ("ip.src == 10.77.0.0/24", True),
    ("ip.dst == 10.77.0.0/24", False), ("ip.dst != 10.77.0.0/24", True),
    ("ip.src != 10.77.0.2", False), ("ip.src > 10.77.0.1", True), ('ip.src == "10.77.0.2"', True),
    ("grh.sgid == fe80::1", True), ("grh.sgid == fe80:0:0::1", True),
    ("grh.sgid == fe80::/64", True), ("grh.sgid == 10.77.0.0/8", False),
    ("eth.src == 02:00:00:00:00:01", True), ("eth.src == 02-00-00-00-00-01", True),
    ("eth.src == 02:00:00:00:00:02", False),
    # sets
    ("bth.opcode in {4 5 17}", True), ("bth.opcode in {4, 5, 0x11}", True),
    ("bth.opcode in {4 5}", False), ("bth.opcode in {10..20}", True),
    ("bth.opcode in {1..16 18..20}", False), ("bth.opcode not in {4 5}", True),
    ("ip.src in {10.0.0.1 10.77.0.0/16}", True), ("aeth.syndrome.type in {ACK NAK}", True),
    # Wireshark's prefix and names
    ("infiniband.bth.destqp == 0x12", True), ("frame.number == 3", True),
    # text, presence, several values
    ("aeth.syndrome.type == NAK", True), ('aeth.syndrome.type == "ACK"', False),
    ("bth.opcode.name == RC_ACKNOWLEDGE", True), ('error contains "mismatch"', True),
    ("reth", True), ("atomiceth", False), ("reth.va", True), ("deth.srcqp == 1", False),
    ("vlan.id == 7", True), ("vlan.id != 7", False), ("vlan.id != 6", True),
    ("bth.psn < bth.destqp", True), ("bth.psn == bth.destqp", False),
])
def test_the_language(text: str, kept: bool) -> None:
    assert keeps(text) is kept, text


def test_a_missing_field_is_false_either_way() -> None:
    for text in ("bth.psn == 1", "bth.psn != 1", "ip.src == 10.0.0.0/8", "bth.psn in {1}",
                 "icrc_ok == false", "icrc_ok != true"):
        assert not keeps(text, {"frame": 1, "icrc_ok": None}), text


@pytest.mark.parametrize("text, said", [
    ("bth.nosuch == 1", "unknown field 'bth.nosuch'"),
    ("bth.opkode == 1", "did you mean bth.opcode"),
    ("infiniband.bth.destq == 1", "did you mean bth.destqp"),
    ("foo == bar", "unknown field 'foo'"),
    ("foo", "unknown field 'foo'"),
    ("bth.opcode == NAK", "bth.opcode holds a number, not 'NAK'"),
    ("icrc_ok == 5", "icrc_ok holds true or false"),
    ("ip.src == 5", "ip.src holds an address"),
    ("aeth.syndrome.type == 3", "holds a text"),
    ("ip.src < 10.0.0.0/8", "a network (10.0.0.0/8) takes"),
    ("(bth.opcode == 1", "expected ')'"), ("bth.opcode ==", "unexpected end"),
    ("bth.opcode in {}", "empty set"), ("bth.opcode in {bth.psn}", "a set holds values"),
    ("bth.opcode in (1, 2)", "expected '{'"), ("== 1", "expected a field or value"),
    ("bth.psn +", "cannot read filter"), ("a[0] == 1", "cannot read filter"),
    ("__import__('os')", "unknown field '__import__'"), ("", "empty filter"),
    ("1 == 1", "neither side"), ("bth.psn 1", "unexpected '1'"),
])
def test_what_is_refused_says_why(text: str, said: str) -> None:
    with pytest.raises(FilterError, match=None) as caught:
        compile_where(text)
    assert said in str(caught.value), str(caught.value)


def _json(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert main(["show", "--json", str(path)]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_every_key_show_json_prints_is_known(capsys: pytest.CaptureFixture[str]) -> None:
    for path in sorted(SAMPLES.glob("*.pcap")):
        for fields in _json(path, capsys):
            assert [k for k in fields if not is_known(k)] == [], path.name


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(packets())
def test_every_key_of_any_packet_is_known(generated) -> None:
    import ibwire

    fields = ibwire.parse(generated.frame, generated.link).fields()
    assert [k for k in fields if not is_known(k)] == []


def test_the_catalog_holds_kinds() -> None:
    fields = known_fields()
    assert fields["bth.destqp"] == "number" and fields["ip.src"] == "address"
    assert fields["icrc_ok"] == "verdict" and fields["aeth.syndrome.type"] == "text"
    assert "reth" in fields and "cm.req.localqpn" in fields


def _numbers(capsys: pytest.CaptureFixture[str], *argv: str) -> list[int]:
    assert main(["show", "--json", *argv, str(CORRUPT)]) == 0
    return [json.loads(ln)["frame"] for ln in capsys.readouterr().out.splitlines()]


def test_show_keeps_what_the_filter_says(capsys: pytest.CaptureFixture[str]) -> None:
    records = [inspect(r).fields() for r in read_capture(CORRUPT)]
    bad = [f["frame"] for f in records if f["icrc_ok"] is False]
    assert bad and _numbers(capsys, "--where", "icrc_ok == false") == bad
    assert _numbers(capsys, "--where", "icrc_ok != true") == bad
    v6 = [f["frame"] for f in records if "ipv6.src" in f]
    assert v6 and _numbers(capsys, "--where", "ipv6.src == fd00::/16") == v6
    assert _numbers(capsys, "--where", "infiniband.bth.destqp in {0x11 0x33}") == [
        f["frame"] for f in records if f.get("bth.destqp") in (0x11, 0x33)]


@pytest.mark.parametrize("verb", ["show", "check", "stats"])
def test_an_unknown_field_is_exit_two_and_one_line(verb: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main([verb, "--where", "bth.nosuch == 1", str(CORRUPT)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert f"ibwire {verb}: unknown field 'bth.nosuch'" in err and "did you mean" in err

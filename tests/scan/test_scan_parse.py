"""The scanner agrees with ``ibwire.parse`` (the Construct layer) and ``crc.verify``, field by
field, on generated packets of every opcode and encapsulation and on broken ones."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ibwire.strategies import ENCAPSULATIONS, mutated, packets
from ibwire.tables import opcodes
from tests.scan.expect import compare, scan_one

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("encapsulation", ENCAPSULATIONS)
@pytest.mark.parametrize("opcode", sorted(opcodes()))
def test_every_opcode_in_every_encapsulation(scanner, encapsulation, opcode):
    @given(packets(encapsulation, opcode))
    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
    def check(generated):
        assert compare(scanner, generated.frame, generated.link) == []
        row = scan_one(scanner, generated.frame, generated.link)
        assert row["error"] == 0 and row["icrc_ok"] == 1
        assert row["bth.opcode"] == opcode

    check()


@SETTINGS
@given(packets())
def test_generated_packets(scanner, generated):
    assert compare(scanner, generated.frame, generated.link) == []


@SETTINGS
@given(mutated())
def test_broken_packets(scanner, mutation):
    assert compare(scanner, mutation.frame, mutation.link) == [], mutation


@SETTINGS
@given(st.binary(max_size=200), st.sampled_from(["ethernet", "infiniband", "ip", "grh"]))
def test_random_bytes(scanner, frame, link):
    assert compare(scanner, frame, link) == []


def test_a_bad_icrc_is_seen(scanner):
    @given(packets())
    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    def check(generated):
        frame = bytearray(generated.frame)
        row = scan_one(scanner, bytes(frame), generated.link)
        frame[row["offset.icrc"]] ^= 1
        broken = scan_one(scanner, bytes(frame), generated.link)
        assert (row["icrc_ok"], broken["icrc_ok"]) == (1, 0)
        assert broken["icrc"] == row["icrc"] ^ 1

    check()

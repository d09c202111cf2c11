"""Differential test against tshark 4.0.17: every field tshark decodes equals ibwire's.

On the shared real captures, the project's sample captures, and generated frames of every
opcode in every encapsulation, tshark's JSON output (one run per file) is compared field by
field with ibwire's dissection. ``FIELDS`` maps each tshark field to ibwire's value (with
the conversions: ICRC/VCRC byte order, header lengths in words, bit fields packed into
bytes); ``NOT_COMPARED`` lists, with a reason, what tshark shows that has no ibwire
counterpart; ``DIVERGENCES`` are tshark's known mistakes (``shared/reference/wireshark.md``),
each modelled: where one applies, the test expects tshark's wrong output, so a fixed tshark
fails here and names the entry to remove.

Without tshark the module is skipped, unless ``IBWIRE_REQUIRE_TSHARK=1`` (CI), then it fails.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

import ibwire
from ibwire import IbwireError, Packet
from ibwire.fuzz.wireshark.compare import (
    Mismatch,
    Tables,
    Tally,
    View,
    compare,
    computed,
)
from ibwire.fuzz.wireshark.dissection import (
    Dissection,
    TsharkError,
    run_many,
    run_tshark,
)
from ibwire.fuzz.wireshark.divergences import DIVERGENCES, TABLES
from ibwire.fuzz.wireshark.fields import EXPERTS, FIELDS, NOT_COMPARED, PAYLOAD_DISSECTORS
from ibwire.pcap import PcapWriter, infiniband_to_erf, read_capture
from ibwire.tables import opcodes
from tests import corpus
from tests.corpus import ROOT
from tests.diff.generate import LINKTYPE_INFINIBAND, VARIANTS, all_packets, write_captures

# The mapping and the known mistakes: ibwire.fuzz.wireshark.fields and .divergences
# (shared with `ibwire fuzz --target wireshark`).


# -- running -----------------------------------------------------------------------------

def compare_file(path: Path, dissections: Sequence[Dissection], labels: Sequence[str] = (),
                 tables: Tables | None = None) -> Tally:
    """Compare every frame of ``path`` as ibwire reads it with tshark's dissections (those
    tshark printed: it runs with ``-Y infiniband``, so a missing frame has no IB layer)."""
    tables = tables or TABLES
    by_number = {d.number: d for d in dissections}
    tally = Tally()
    history: list[View] = []
    count = 0
    for i, record in enumerate(read_capture(path)):
        count += 1
        where = f"{path.name} #{i + 1}"
        assert record.error is None, f"{where}: {record.error}"
        dissection = by_number.pop(i + 1, None)
        packet: Packet | None = None
        error = None
        try:
            packet = ibwire.parse(bytes(record.frame), record.link, wire=record.orig_len)
        except IbwireError as exc:
            error = f"ibwire: {exc}"
        ib = packet is not None and packet.encapsulation != "other"
        if not ib and dissection is None:
            continue
        label = f"{where} {labels[i] if labels else _label(packet)}"
        if dissection is None or not dissection.has_ib:
            tally.packets += 1
            tally.mismatches.append(Mismatch(label, "infiniband", ["an IB packet"],
                                             ["tshark shows none"]))
            continue
        view = View(packet, tuple(history)) if packet is not None and ib else None
        tally.add(compare(view, dissection, tables, label, error))
        if view is not None:
            history.append(view)
    assert not by_number, f"{path.name}: tshark frames {sorted(by_number)} beyond ibwire's {count}"
    return tally


def _label(packet: Packet | None) -> str:
    if packet is None:
        return "(ibwire error)"
    name = packet.opcode.name if packet.opcode else (packet.unknown or "")
    return f"{packet.encapsulation} {name}"


def report(tally: Tally, limit: int = 60) -> str:
    lines = [str(m) for m in tally.mismatches[:limit]]
    if len(tally.mismatches) > limit:
        lines.append(f"... and {len(tally.mismatches) - limit} more")
    return f"{len(tally.mismatches)} mismatches with tshark:\n" + "\n".join(lines)


@dataclass
class Run:
    """One capture file: what ibwire reads, what tshark showed, and the comparison."""

    name: str
    path: Path
    dissections: list[Dissection]
    labels: list[str] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)


def _capture_files() -> list[Path]:
    """The shared real captures, then the project's sample captures."""
    return corpus.captures() + sorted((ROOT / "captures").glob("*.pcap"))


def _captures() -> list[Path]:
    """:func:`_capture_files`; the comparisons (``test_tables_are_all_used``) need the
    shared ones."""
    if not corpus.PRESENT:
        corpus.skip_missing()
    return _capture_files()


def _first_linktype(path: Path) -> int:
    return next(iter(read_capture(path))).linktype


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """tshark on every file, once, two processes at a time; then every comparison."""
    work = tmp_path_factory.mktemp("tshark")
    files: dict[str, tuple[Path, list[str]]] = {}
    for capture in _captures():
        path = capture
        if _first_linktype(capture) == LINKTYPE_INFINIBAND:  # tshark rejects 247: use ERF
            path = work / f"{capture.stem}-erf.pcap"
            infiniband_to_erf(capture, path, strict=True)
        files[capture.name] = (path, [])
    generated = all_packets()
    written = write_captures(generated, work)
    for linktype, link in ((1, "ethernet"), (101, "ip"), (197, "infiniband")):
        files[f"generated:{link}"] = (written[linktype],
                                      [g.label for g in generated if g.link == link])
    outputs = run_many([path for path, _ in files.values()], extra=("-Y", "infiniband"))
    out = {}
    for name, (path, labels) in files.items():
        run = Run(name, path, outputs[os.fspath(path)], labels)
        run.tally = compare_file(path, run.dissections, labels)
        out[name] = run
    return out


def _provenance() -> dict[str, int]:
    """local_name -> IB/RoCE packet count, from the captures' PROVENANCE.tsv."""
    return {r["local_name"]: int(r["ib_roce_packets"]) for r in corpus.provenance_rows()}


CAPTURE_NAMES = [p.name for p in _capture_files()]


# -- tests -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_capture_matches_tshark(runs: dict[str, Run], name: str):
    run = runs[name]
    assert not run.tally.mismatches, report(run.tally)
    assert run.tally.packets > 0 and run.tally.values > 0
    expected = _provenance().get(name)
    if expected is not None:  # every IB/RoCE frame of the capture was compared
        assert run.tally.packets == expected


@pytest.mark.parametrize("link", ["ethernet", "ip", "infiniband"])
def test_generated_frames_match_tshark(runs: dict[str, Run], link: str):
    run = runs[f"generated:{link}"]
    assert not run.tally.mismatches, report(run.tally)
    assert run.tally.packets == len(run.labels)


def test_every_opcode_in_every_encapsulation_is_generated():
    made = {(g.variant, g.opcode) for g in all_packets() if not g.note}
    assert made == {(v.name, op) for v in VARIANTS for op in opcodes()}


def test_tables_are_all_used(runs: dict[str, Run]):
    """Every mapped field was compared, every divergence happened, every not-compared pattern
    and every expert and payload-dissector entry was needed: a stale entry fails here."""
    total = Tally()
    for run in runs.values():
        total.add(run.tally)
    assert [k for k in FIELDS if not total.per_field[k]] == []
    assert [d.name for d in DIVERGENCES if not total.divergences[d.name]] == []
    needed = {next(p for p in NOT_COMPARED if fnmatch.fnmatchcase(k, p))
              for k in total.not_compared}
    assert [p for p in NOT_COMPARED if p not in needed] == []
    seen_experts = {e for run in runs.values() for d in run.dissections for e in d.experts}
    assert set(EXPERTS) <= seen_experts
    seen_inner = {n for run in runs.values() for d in run.dissections
                  for n in d.layers[d.layers.index("infiniband") + 1:] if d.has_ib}
    assert set(PAYLOAD_DISSECTORS) <= seen_inner


def test_linktype_247_is_rejected_by_tshark_and_read_by_ibwire(tmp_path: Path):
    """The divergence ibwire exists for: tshark cannot open LINKTYPE_INFINIBAND."""
    frames = [g.frame for g in all_packets() if g.link == "infiniband"][:20]
    path = tmp_path / "native.pcap"
    with PcapWriter(path, LINKTYPE_INFINIBAND) as writer:
        for i, frame in enumerate(frames):
            writer.write(frame, i * 1000)
    with pytest.raises(TsharkError) as info:
        run_tshark(path)
    assert "network type 247 unknown or unsupported" in info.value.stderr
    records = list(read_capture(path))
    assert [bytes(r.frame) for r in records] == frames
    assert all(ibwire.parse(bytes(r.frame), r.link).verify().icrc_ok for r in records)
    erf = tmp_path / "native-erf.pcap"  # what `ibwire convert` gives tshark instead
    infiniband_to_erf(path, erf, strict=True)
    assert len(run_tshark(erf)) == len(frames)


def test_bad_crcs_look_like_good_ones_to_tshark(tmp_path: Path):
    """tshark shows the CRCs, never checks them: a frame with a corrupted ICRC (or VCRC)
    dissects exactly like the good one, CRC value aside; ibwire flags it."""
    pairs = []
    for g in all_packets():
        if g.note or g.opcode != 0x0A or g.variant not in ("rocev2_ipv4", "rocev2_ipv6@ip",
                                                            "rocev1", "ib_global"):
            continue
        bad = bytearray(g.frame)
        packet = ibwire.parse(g.frame, g.link)
        bad[packet.icrc_offset] ^= 0x5A
        if packet.vcrc_offset is not None:
            bad[packet.vcrc_offset] ^= 0xA5
        pairs.append((g, bytes(bad)))
    assert len(pairs) == 4
    dissections = {}
    for link in ("ethernet", "ip", "infiniband"):
        chosen = [(g, bad) for g, bad in pairs if g.link == link]
        linktype = {"ethernet": 1, "ip": 101, "infiniband": LINKTYPE_INFINIBAND}[link]
        path = tmp_path / f"{link}.pcap"
        with PcapWriter(path, linktype) as writer:
            for i, (g, bad) in enumerate(chosen):
                writer.write(g.frame, i * 1000)
                writer.write(bad, i * 1000)
        if linktype == LINKTYPE_INFINIBAND:
            infiniband_to_erf(path, tmp_path / "ib-erf.pcap", strict=True)
            path = tmp_path / "ib-erf.pcap"
        dissections[link] = run_tshark(path)
    crc_keys = ("infiniband/infiniband.invariant.crc", "infiniband/infiniband.variant.crc",
                "udp/udp.payload")
    for link, shown in dissections.items():
        chosen = [(g, bad) for g, bad in pairs if g.link == link]
        for (g, bad), good_d, bad_d in zip(chosen, shown[::2], shown[1::2], strict=True):
            assert bad_d.experts == good_d.experts and not bad_d.malformed  # no word on CRCs
            same = {k: v for k, v in good_d.fields.items() if k not in crc_keys}
            assert {k: v for k, v in bad_d.fields.items() if k not in crc_keys} == same
            packet = ibwire.parse(bad, g.link)
            assert packet.icrc is not None
            shown = bad_d.fields["infiniband/infiniband.invariant.crc"]
            assert shown != good_d.fields["infiniband/infiniband.invariant.crc"]
            assert [int(shown[0], 16)] == [int.from_bytes(packet.icrc, "big")]
            assert ibwire.parse(g.frame, g.link).verify().icrc_ok
            verdict = packet.verify()
            assert verdict.icrc_ok is False
            assert verdict.vcrc_ok is (False if link == "infiniband" else None)


def test_comparison_catches_planted_mismatches(runs: dict[str, Run]):
    """The comparison can fail: a changed, a missing and an unmapped tshark value, a changed
    ibwire value, a divergence that no longer happens -- each is reported."""
    run = runs["generated:ethernet"]
    index = next(i for i, label in enumerate(run.labels) if "RC_RDMA_WRITE_ONLY" in label)
    original = run.dissections[index]

    def planted(change: Callable[[dict[str, list[str]]], None],
                tables: Tables = TABLES) -> list[str]:
        fields = {k: list(v) for k, v in original.fields.items()}
        change(fields)
        dissections = list(run.dissections)
        dissections[index] = replace(original, fields=fields)
        tally = compare_file(run.path, dissections, run.labels, tables)
        return [m.key for m in tally.mismatches]

    def bump_psn(f: dict[str, list[str]]) -> None:
        psn = "infiniband.bth/infiniband.bth.psn"
        f[psn] = [str(int(f[psn][0]) + 1)]

    assert planted(bump_psn) == ["infiniband.bth/infiniband.bth.psn <- bth.psn"]
    assert planted(lambda f: f.pop("infiniband.reth/infiniband.reth.va")) == \
        ["infiniband.reth/infiniband.reth.va <- reth.va"]
    assert planted(lambda f: f.update({"infiniband.bth/infiniband.bth.new": ["1"]})) == \
        ["infiniband.bth/infiniband.bth.new"]
    wrong_va = {**FIELDS, "infiniband.reth/infiniband.reth.va": computed(
        "reth.va + 1", "int", lambda v: v.fields["reth.va"] + 1 if "reth" in v else None)}
    keys = planted(lambda f: None, replace(TABLES, fields=wrong_va))
    assert keys and set(keys) == {"infiniband.reth/infiniband.reth.va <- reth.va + 1"}
    no_pad = [d for d in DIVERGENCES if d.name != "pad in payload"]
    keys = planted(lambda f: None, replace(TABLES, divergences=no_pad))
    assert keys and set(keys) == {"data/data.data <- payload", "data/data.len <- len(payload)",
                                  "infiniband/infiniband.payload <- payload "
                                  "(EtherType-encapsulated)"}


def test_cm_connection_fields_are_compared_on_the_real_capture(runs: dict[str, Run]):
    """The CM fields that pair a connection were compared on the RDMA-CM capture, and a changed
    tshark value of one of them is reported."""
    run = runs["linlinw5-rdma_ib_tutorial_rdma_cm.pcap"]
    parent = "infiniband.smplid.smpdata/infiniband."
    for name in ("cm.req.localqpn", "cm.req.startpsn", "cm.rep.localqpn", "cm.rep.startpsn",
                 "cm.req.serviceid", "cm.req.pppmtu", "cm.rtu.localcommid"):
        assert run.tally.per_field[parent + name] >= 2, name
    assert run.tally.per_field["infiniband.cm.req.ip_cm/infiniband.cm.req.ip_cm.sip4"] == 2
    index = next(i for i, d in enumerate(run.dissections)
                 if parent + "cm.req.localqpn" in d.fields)
    fields = {k: list(v) for k, v in run.dissections[index].fields.items()}
    fields[parent + "cm.req.localqpn"] = [hex(int(fields[parent + "cm.req.localqpn"][0], 16) + 1)]
    dissections = list(run.dissections)
    dissections[index] = replace(run.dissections[index], fields=fields)
    tally = compare_file(run.path, dissections)
    assert [m.key for m in tally.mismatches] == [
        "infiniband.smplid.smpdata/infiniband.cm.req.localqpn <- cm.req.localqpn"]

"""``ibwire fuzz --target wireshark``: Wireshark's InfiniBand dissector, one tshark run per batch.

pyshark finds tshark and its version (``pyshark.tshark.tshark``); tshark then runs once per
batch (``-r BATCH -n -T json``, under the same limits as any command target) and its JSON is
read with every repeated key kept (:mod:`.dissection`): pyshark's own packet objects merge
repeated keys such as the two ``infiniband.reserved`` of a BTH, which the field mapping needs
apart. Each frame ibwire dissects cleanly is compared field by field with
:func:`.compare.compare` under the mapping of :mod:`.fields`; Wireshark's known mistakes
(:data:`.divergences.DIVERGENCES`) are the default allow-list, each applied as its model.
tshark 4.0.17 cannot open LINKTYPE_INFINIBAND (247), so native IB batches are handed to it as
ERF (:func:`ibwire.pcap.infiniband_to_erf`).
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import replace

from ibwire.dissect import parse
from ibwire.errors import IbwireError
from ibwire.fuzz.compare import Allowed, Diff, allowed, plain, reference
from ibwire.fuzz.generate import LINKTYPE_INFINIBAND, Example
from ibwire.fuzz.targets import Limits, Run, TargetError, run_command, write_batch
from ibwire.fuzz.wireshark.compare import View, compare
from ibwire.fuzz.wireshark.dissection import TSHARK_ARGS, dissections_of
from ibwire.fuzz.wireshark.divergences import DIVERGENCES, TABLES
from ibwire.fuzz.wireshark.fields import FUZZ_NOT_COMPARED

EXTRA = "fuzz"
ROCEV2_PORT = 4791
"""The UDP port IANA assigned to RoCEv2 (IBA Annex A17)."""


def default_allow() -> list[Allowed]:
    """Every modelled Wireshark mistake."""
    return [Allowed(reason=d.reason, divergence=d.name) for d in DIVERGENCES]


class WiresharkTarget:
    kind = "wireshark"

    def __init__(self, linktype: int, limits: Limits) -> None:
        try:
            from pyshark.tshark import tshark as pyshark_tshark
        except ImportError as exc:
            raise TargetError(f"--target wireshark needs pyshark: pip install "
                              f"'ibwire[{EXTRA}]'") from exc
        try:
            self.tshark = pyshark_tshark.get_process_path()
            self.version: str | None = str(pyshark_tshark.get_tshark_version(self.tshark))
        except Exception as exc:  # pyshark's TSharkNotFoundException and the like
            raise TargetError(f"tshark not found: {exc}") from exc
        self.linktype = linktype
        self.limits = limits
        self.command = f"tshark {self.version}"

    def check(self) -> None:
        pass

    def argv(self, pcap: str) -> list[str]:
        return [self.tshark, "-r", pcap, *TSHARK_ARGS]

    def repro_command(self, pcap: str) -> str:
        if self.linktype == LINKTYPE_INFINIBAND:
            erf = pcap[:-len(".pcap")] + "-erf.pcap"
            return f"ibwire convert {shlex.quote(pcap)} {shlex.quote(erf)} --to erf && " + \
                shlex.join(self.argv(erf))
        return shlex.join(self.argv(pcap))

    def run(self, examples: Sequence[Example]) -> Run:
        from ibwire.pcap import infiniband_to_erf

        with tempfile.TemporaryDirectory(prefix="ibwire-fuzz-") as work:
            path = os.path.join(work, "batch.pcap")
            write_batch(examples, path, self.linktype)
            if self.linktype == LINKTYPE_INFINIBAND:
                erf = os.path.join(work, "batch-erf.pcap")
                infiniband_to_erf(path, erf, strict=True)
                path = erf
            failure, out, err = run_command(self.argv(path), self.limits)
        claims = []
        if failure is None:
            try:
                claims = dissections_of(out)
            except ValueError:
                claims = []
        return Run(failure, claims, err.decode(errors="replace")[-4000:])

    def diffs(self, examples: Sequence[Example], run: Run,
              allow: Sequence[Allowed]) -> list[list[Diff]]:
        names = {a.divergence for a in allow if a.divergence is not None}
        tables = replace(TABLES, divergences=tuple(d for d in DIVERGENCES if d.name in names),
                         not_compared={**TABLES.not_compared, **FUZZ_NOT_COMPARED})
        by_number = {d.number: d for d in run.claims}
        history: list[View] = []
        out: list[list[Diff]] = []
        for number, example in enumerate(examples, 1):
            ref = reference(example)
            dissection = by_number.get(number)
            found: list[Diff] = []
            if ref.clean and run.failure is None:
                try:
                    packet = parse(example.frame, example.link)
                except IbwireError:  # pragma: no cover - clean means it parsed
                    packet = None
                sport = ref.fields.get("udp.srcport")
                if dissection is not None and not dissection.has_ib and \
                        isinstance(sport, int) and sport < ROCEV2_PORT:
                    # packet-udp.c decode_udp_ports(): the lower port's dissector goes first
                    run.skipped["UDP source port below 4791: tshark tries that port's "
                                "dissector first"] += 1
                elif dissection is None or not dissection.has_ib:
                    found.append(Diff("infiniband", "an IB packet", "none"))
                elif packet is not None:
                    view = View(packet, tuple(history))
                    history.append(view)
                    tally = compare(view, dissection, tables, f"#{number}")
                    run.skipped.update(tally.skipped)
                    for m in tally.mismatches:
                        name = m.key.split(" <- ", 1)[0]
                        found.append(Diff(name, plain(m.expected), plain(list(m.actual))))
            out.append([d for d in found
                        if allowed(allow, "diff", d.field, example, ref) is None])
        return out

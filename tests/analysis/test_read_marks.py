"""CE marks on READ responses: the requester is their notification point and sends CNPs to
the responder's QP; the manifest and ``ibwire qp`` agree, the CNPs are where the pacing rule
puts them (recounted here from the frames), and the CNP check holds them to it."""

from __future__ import annotations

import pytest

import ibwire
from ibwire.analysis import analyse
from ibwire.gen import Fault, QpSpec, Scenario, ScenarioError, generate
from tests.analysis.test_generated import check_against_manifest

READ_RESPONSES = range(0x0D, 0x11)
CNP = 0x81


def scenario(tap: str, scope: str = "qp", interval: float = 1.0) -> Scenario:
    return Scenario(qps=(QpSpec("read", 8192, iters=6, mtu=1024),
                         QpSpec("write", 4096, iters=8)),
                    faults=(Fault("ecn_resp", rate=0.5), Fault("ecn", rate=0.3)), tap=tap,
                    seed=4, cnp_interval_us=interval, cnp_scope=scope)


@pytest.mark.parametrize("scope", ["qp", "ip-pair", "port"])
@pytest.mark.parametrize("tap", ["requester", "responder"])
def test_marked_read_responses_draw_cnps_to_the_responder(generated, tap, scope):
    path, manifest = generated(scenario(tap, scope))
    results = check_against_manifest(path, manifest, cnp_scope=scope, cnp_interval_us=1.0)
    assert all(not r["findings"] for r in results.values())
    read = manifest["qps"][0]
    records, _ = generate(scenario(tap, scope))
    rows = [(t, ibwire.parse(f).fields()) for t, f in records]
    to_responder = [(t, f) for t, f in rows if f["bth.opcode"] == CNP
                    and f["bth.destqp"] == read["responder"]["qpn"]]
    assert to_responder and all(f["ip.src"] == "192.0.2.1" and f["ip.dsfield.dscp"] == 48
                                and f["bth.becn"] == 1 for _, f in to_responder)
    marked = [t for t, f in rows if f["bth.opcode"] in READ_RESPONSES
              and f["ip.dsfield.ecn"] == 3]
    if tap == "requester":
        # the requester's tap sees a mark when it arrives: the pacing rule, recounted
        expected, last = 0, None
        for t in marked:
            if last is None or t - last >= 1000:
                expected, last = expected + 1, t
        assert len(to_responder) == expected and len(marked) > expected > 1
        assert read["ecn_ce_packets"] == len(marked)
    else:
        assert marked == []                       # marked on the way, after this tap
    cnps_back = sum(1 for _, f in rows if f["bth.opcode"] == CNP
                    and f["bth.destqp"] == read["requester"]["qpn"])
    assert read["cnps"] == len(to_responder) + cnps_back


def test_the_cnp_check_sees_a_missing_cnp_for_a_read_response(generated, tmp_path):
    """Take the requester's CNPs out: each mark that was due one is cnp_missing. (The
    check waits for a CNP as long as a round trip from the tap to the requester could be:
    the capture goes on past that, with a READ response sent again.)"""
    from tests.analysis.conftest import write_frames

    records, manifest = generate(scenario("requester"))
    qpn = manifest["qps"][0]["responder"]["qpn"]
    kept = [(t, f) for t, f in records
            if not (ibwire.parse(f).fields()["bth.opcode"] == CNP
                    and ibwire.parse(f).fields()["bth.destqp"] == qpn)]
    assert len(kept) < len(records)
    last = next(f for _, f in reversed(records)
                if ibwire.parse(f).fields()["bth.opcode"] in READ_RESPONSES)
    kept.append((records[-1][0] + 20_000, last))
    results = analyse(write_frames(tmp_path / "cut.pcap", kept), cnp_interval_us=1.0)
    read = next(r for r in results.as_dicts() if r["responder"]["qpn"] == qpn)
    assert {f["kind"] for f in read["findings"]} == {"cnp_missing"}
    assert len(read["findings"]) == len(records) - len(kept) + 1 == 4


@pytest.mark.parametrize("faults, encapsulation, message", [
    ((Fault("ecn_resp", 1, 0),), "rocev2_ipv4", "QP 1 does write, not read"),
    ((Fault("ecn_resp", 0, 3),), "ib_global", "RoCEv2"),
])
def test_impossible_read_marks_are_refused(faults, encapsulation, message):
    with pytest.raises(ScenarioError, match=message):
        generate(Scenario(qps=scenario("requester").qps, faults=faults,
                          encapsulation=encapsulation))


def test_a_targeted_mark_hits_that_response_psn():
    s = Scenario(qps=(QpSpec("read", 4096, iters=2, mtu=1024),),
                 faults=(Fault("ecn_resp", 0, 6),), tap="requester")
    records, manifest = generate(s)
    (fault,) = manifest["faults"]
    f = ibwire.parse(records[fault["record"] - 1][1]).fields()  # records from 1
    assert f["bth.opcode"] in READ_RESPONSES and f["ip.dsfield.ecn"] == 3
    assert f["bth.psn"] == (manifest["qps"][0]["start_psn"] + 6) & 0xFFFFFF
    assert manifest["qps"][0]["cnps"] == 1

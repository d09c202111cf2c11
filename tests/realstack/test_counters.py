"""rxe's own counters (``/sys/class/infiniband/rxe0/ports/1/hw_counters``) against what
ibwire reads off the captures.

Guest 1 runs the servers (the responder of WRITE/SEND/READ/atomic), guest 2 the clients
(the requester). Counter meanings from Linux's ``drivers/infiniband/sw/rxe``:

- ``sent_pkts`` (``rxe_net.c``, ``rxe_xmit_packet``): every packet handed to the IP layer,
  CM MADs on QP1 included; the bridge capture sees each once, before any drop on the bridge.
  netem's ``duplicate`` copies a frame below rxe, so there each copy is one more on the wire;
- ``rcvd_pkts`` (``rxe_recv.c``, ``rxe_rcv``): every packet that passed the header checks;
  the tap's outgoing capture sees each delivered frame;
- ``out_of_seq_request``, ``duplicate_request`` (``rxe_resp.c``, ``check_psn``) and
  ``rcvd_seq_err`` (``rxe_comp.c``, ``check_ack``): see the models in ``wire.py``;
- ``completer_retry_err`` (``rxe_comp.c``, ``COMPST_ERROR_RETRY``): one per retry round the
  completer starts (a NAK or a timeout, not while a round it started is under way), each
  of which makes the requester go back (``req_retry`` in ``rxe_req.c``).
"""

from __future__ import annotations

import re

import pytest

from tests.realstack.conftest import SCENARIOS, Runs
from tests.realstack.test_runs import NAMES, ran
from tests.realstack.wire import (
    by_source,
    completer_model,
    connections,
    is_nak_sequence,
    packets,
    responder_model,
    rewinds,
    source,
)

#: Scenarios with an RC data QP between the perftest/pingpong peers (the models apply).
RC = [n for n in NAMES if "UC" not in SCENARIOS[n].client and "UD" not in SCENARIOS[n].client
      and "ud_" not in n and not SCENARIOS[n].unsupported]
FAULTY = [n for n in RC if not SCENARIOS[n].clean]
#: netem ``duplicate``: copies below rxe, on the wire but not in sent_pkts.
DUPLICATING = {n for n in NAMES if any("duplicate" in a for _, a in SCENARIOS[n].faults.netem)}
#: netem delay with jitter: frames leave the requester out of order, before the bridge.
REORDERING = {n for n in NAMES if any(len(a.split()) > 2 and a.startswith("delay")
                                      for _, a in SCENARIOS[n].faults.netem)}
#: Ping-pongs over N QPs whose loop ends on completions counted over all QPs together
#: (rdma-core's srq_pingpong.c: ``while (rcnt < iters || scnt < iters)``, a send posted per
#: QP while ``scnt < iters``): a side may close its QPs with up to N - 1 sends unanswered,
#: and the answers that come after find no QP and are dropped before rcvd_pkts counts them.
TOTALS = {n: int(m.group(1)) for n in RC
          if "srq_pingpong" in SCENARIOS[n].client
          and (m := re.search(r"-q (\d+)", SCENARIOS[n].client))}
#: Losses that make the responder NAK (a lost READ request does; lost READ responses make
#: the requester time out and ask again, without a NAK).
NAKING = ("write_loss", "send_loss", "write_drops", "write_drops_small")


def _view(rig_runs: Runs, name: str) -> tuple[dict, dict, list[dict], list[dict], list[dict]]:
    """(responder's deltas, requester's deltas, bridge packets, delivered to the responder,
    delivered to the requester)."""
    ran(rig_runs, name)
    outcome = rig_runs[name]
    counters = outcome.counters()
    d = outcome.directory
    return (counters["guest1"]["delta"], counters["guest2"]["delta"], packets(d / "full.pcap"),
            packets(d / "to-guest1.pcap"), packets(d / "to-guest2.pcap"))


def _addresses(rig_runs: Runs, name: str, index: int) -> tuple[str, str]:
    guest = rig_runs[name].record["guests"][index]
    return guest["ipv4"], guest["ipv6"]


def _pmtu(rig_runs: Runs, name: str) -> int:
    found = [q["pmtu"] for q in connections(rig_runs[name].full) if q.get("pmtu")]
    return max(found) if found else 4096  # no FIRST/MIDDLE packet: every message fits one


@pytest.mark.parametrize("name", NAMES)
def test_sent_pkts_equal_each_guests_packets_on_the_bridge(rig_runs: Runs, name: str):
    responder, requester, bridge, _, _ = _view(rig_runs, name)
    sent = by_source(bridge)
    for index, delta in ((0, responder), (1, requester)):
        on_wire = sum(sent[a] for a in _addresses(rig_runs, name, index))
        if name in DUPLICATING and index == 1:
            # a netem copy is the same IP datagram again (same IPv4 ID; a retransmission by
            # rxe is a new datagram with the next ID): the copies are the difference, and
            # each reaches the responder as a duplicate request
            seen: set[tuple] = set()
            copies = 0
            for p in bridge:
                if p.get("ip.src") == _addresses(rig_runs, name, 1)[0]:
                    key = (p["ip.id"], p["bth.psn"], p["bth.opcode"])
                    copies += key in seen
                    seen.add(key)
            assert on_wire - delta["sent_pkts"] == copies > 0
            assert copies <= responder["duplicate_request"]
        else:
            assert delta["sent_pkts"] == on_wire


@pytest.mark.parametrize("name", NAMES)
def test_rcvd_pkts_equal_each_guests_delivered_packets(rig_runs: Runs, name: str):
    """Exact where every packet is answered (RC): rxe_recv.c counts a packet once its
    headers passed (hdr_check: a QP that exists and is ready). Bounded for UC and UD: their
    senders complete without an answer, so a receiver may destroy its QP while the last
    packets are still on their way, and those are dropped uncounted; and for a ping-pong
    that ends on totals over several QPs (``TOTALS``), whose last answers may come late."""
    responder, requester, bridge, to_responder, to_requester = _view(rig_runs, name)
    if name in TOTALS:  # up to N - 1 late answers, each after that side's last packet sent
        for index, delta, to in ((0, responder, to_responder), (1, requester, to_requester)):
            mine = set(_addresses(rig_runs, name, index))
            last = max(p["timestamp_ns"] for p in bridge if source(p) in mine)
            after = sum(p["timestamp_ns"] > last for p in to)
            assert 0 <= len(to) - delta["rcvd_pkts"] <= min(TOTALS[name] - 1, after)
    elif name in RC:
        assert responder["rcvd_pkts"] == len(to_responder)
        assert requester["rcvd_pkts"] == len(to_requester)
    else:
        assert responder["rcvd_pkts"] <= len(to_responder)
        assert requester["rcvd_pkts"] <= len(to_requester)
    dropped = sum(rig_runs[name].record["nft_dropped"])
    assert len(bridge) - len(to_responder) - len(to_requester) == dropped


@pytest.mark.parametrize("name", RC)
def test_naks_in_capture_equal_responders_out_of_seq_request(rig_runs: Runs, name: str):
    """Exact: rxe_resp.c counts out_of_seq_request exactly when it sends a NAK (PSN
    sequence error); the bridge sees each NAK, dropped or not. ibwire qp's figure and the
    packets' own syndromes must both say so."""
    responder, _, bridge, _, _ = _view(rig_runs, name)
    server = set(_addresses(rig_runs, name, 0))
    naks = sum(1 for p in bridge if is_nak_sequence(p) and
               (p.get("ip.src") or p.get("ipv6.src")) in server)
    by_qp = sum(c["naks_psn_seq_error"] for c in connections(rig_runs[name].full)
                if c["responder"]["address"] in server)
    assert by_qp == naks == responder["out_of_seq_request"]
    if name in NAKING:
        assert naks > 0


@pytest.mark.parametrize("name", RC)
def test_responder_counters_follow_from_what_it_received(rig_runs: Runs, name: str):
    """Exact: rxe_resp.c's check_psn replayed over the requests delivered to the responder
    gives its out_of_seq_request and duplicate_request."""
    responder, _, bridge, to_responder, _ = _view(rig_runs, name)
    model = responder_model(bridge, to_responder, _pmtu(rig_runs, name))
    assert model["out_of_seq_request"] == responder["out_of_seq_request"]
    assert model["duplicate_request"] == responder["duplicate_request"]


@pytest.mark.parametrize("name", RC)
def test_requesters_rcvd_seq_err(rig_runs: Runs, name: str):
    """Exact: rxe_comp.c counts a NAK (PSN sequence error) that arrives beyond the
    completer's PSN; bounded by the NAKs delivered (one dropped on the bridge never counts,
    one naming PSNs already acknowledged does not either)."""
    _, requester, bridge, _, to_requester = _view(rig_runs, name)
    delivered_naks = sum(1 for p in to_requester if is_nak_sequence(p))
    pairs = connections(rig_runs[name].full)
    assert requester["rcvd_seq_err"] == completer_model(bridge, to_requester, pairs)
    assert requester["rcvd_seq_err"] <= delivered_naks


@pytest.mark.parametrize("name", [n for n in RC if n not in DUPLICATING | REORDERING])
def test_completer_retry_err_equals_go_back_n_rounds(rig_runs: Runs, name: str):
    """Exact: each completer_retry_err makes the requester resend from the completer's PSN,
    below the next never-sent one; the test counts such rewinds of the requester on the
    bridge. (netem's duplicates and reordering, below rxe and before the bridge, look like
    rewinds: those runs are left out.)"""
    _, requester, bridge, _, _ = _view(rig_runs, name)
    client = rig_runs[name].record["guests"][1]
    address = client["ipv6"] if SCENARIOS[name].ipv6 else client["ipv4"]
    rounds = rewinds(bridge, address, _pmtu(rig_runs, name))
    assert requester["completer_retry_err"] == rounds
    if name in (*NAKING, "read_loss"):
        assert rounds > 0


@pytest.mark.parametrize("name", FAULTY)
def test_duplicate_request_against_qps_retransmissions(rig_runs: Runs, name: str):
    """Bounded: a request ibwire qp calls a duplicate (resent below a PSN the responder had
    already answered) is a duplicate_request at the responder if it was delivered; every
    duplicate_request is a retransmission qp saw, or a netem copy. Not exact: the responder
    also counts resent packets it had received but not yet answered (rxe ACKs at message
    ends), which qp cannot tell from the wire."""
    responder, requester, bridge, to_responder, _ = _view(rig_runs, name)
    client = set(_addresses(rig_runs, name, 1))
    qps = [c for c in connections(rig_runs[name].full)
           if c["requester"]["address"] in client and c["transport"] == "RC"]
    from_client = sum(n for a, n in by_source(bridge).items() if a in client)
    lost = from_client - sum(n for a, n in by_source(to_responder).items() if a in client)
    copies = from_client - requester["sent_pkts"]
    duplicates = sum(c["duplicates"] for c in qps)
    resent = sum(c["retransmitted_packets"] for c in qps)
    assert duplicates - lost <= responder["duplicate_request"] <= resent + copies

"""What the truth tests read off a capture, through ibwire's own command line (``show --json``,
``qp --json``), and the two small models of rxe they need.

The models follow Linux's soft-RoCE driver (``drivers/infiniband/sw/rxe``), read for this:

- responder (``rxe_resp.c``, ``check_psn``): an RC request whose PSN is beyond the expected
  one counts ``out_of_seq_request`` and is answered by a NAK (PSN sequence error) only the
  first time (``sent_psn_nak``; an in-order request clears it), later ones are dropped
  silently; a request below the expected PSN counts ``duplicate_request``. The expected PSN
  moves on by one per request, by the number of response packets for an RDMA READ
  (ceil(length / PMTU), at least 1);
- completer (``rxe_comp.c``, ``check_psn``/``check_ack``): a NAK with PSN sequence error
  counts ``rcvd_seq_err`` only when its PSN is beyond the completer's PSN (``comp.psn``,
  one past what has been acknowledged), which it then becomes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from functools import cache
from pathlib import Path

ROCE = ("rocev2_ipv4", "rocev2_ipv6")
#: RC responses (IBA 1.4 §9.2 Table 38): RDMA READ RESPONSE FIRST..ONLY, ACKNOWLEDGE,
#: ATOMIC ACKNOWLEDGE.
RESPONSES = frozenset(range(0x0D, 0x13))
READ_REQUEST = 0x0C
ACKNOWLEDGE = 0x11
NAK_PSN_SEQUENCE_ERROR = 0x60
PSN_MOD = 1 << 24


def ibwire(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ibwire.cli.main", *args], capture_output=True,
                          text=True, check=check)


def packets(path: Path) -> list[dict]:
    """The RoCE packets of a capture, as ``ibwire show --json`` gives them (read once)."""
    return _packets(str(path))


@cache
def _packets(path: str) -> list[dict]:
    out = ibwire("show", "--json", path).stdout
    return [p for p in map(json.loads, out.splitlines()) if p.get("encapsulation") in ROCE]


def connections(path: Path) -> list[dict]:
    """``ibwire qp --json``'s connections of a capture (computed once)."""
    return _connections(str(path))


@cache
def _connections(path: str) -> list[dict]:
    out = ibwire("qp", "--json", path, check=False)
    assert out.returncode in (0, 1), out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def source(packet: dict) -> str:
    return packet.get("ip.src") or packet["ipv6.src"]


def destination(packet: dict) -> str:
    return packet.get("ip.dst") or packet["ipv6.dst"]


def by_source(found: Iterable[dict]) -> Counter:
    return Counter(source(p) for p in found)


def is_rc_request(packet: dict) -> bool:
    op = packet["bth.opcode"]
    return op < 0x20 and op not in RESPONSES


def is_nak_sequence(packet: dict) -> bool:
    return (packet["bth.opcode"] == ACKNOWLEDGE
            and packet.get("aeth.syndrome") == NAK_PSN_SEQUENCE_ERROR)


def _ahead(a: int, b: int) -> int:
    """a - b in the 24-bit PSN space, as rxe's psn_compare: positive when a is after b."""
    d = (a - b) % PSN_MOD
    return d - PSN_MOD if d >= PSN_MOD // 2 else d


def _first_psns(sent: list[dict]) -> dict[tuple[str, int], int]:
    """(destination address, QPN) -> the QP's first request PSN: the lowest of all its
    requests (no request goes below it; the first one on the wire may not be the first sent
    when netem reorders the requester's frames)."""
    first: dict[tuple[str, int], int] = {}
    for p in sent:
        if is_rc_request(p):
            key = (destination(p), p["bth.destqp"])
            if key not in first or _ahead(p["bth.psn"], first[key]) < 0:
                first[key] = p["bth.psn"]
    return first


def responder_model(sent: list[dict], delivered: list[dict], pmtu: int) -> Counter:
    """``out_of_seq_request`` and ``duplicate_request`` of the responder that received
    ``delivered`` (its RC requests, in arrival order); each QP's first expected PSN is that of
    its first request in ``sent`` (the bridge capture, which has it even if it was dropped
    before the responder)."""
    expected = _first_psns(sent)
    nak_sent: dict[tuple[str, int], bool] = {}
    counts: Counter = Counter()
    for p in delivered:
        key = (destination(p), p["bth.destqp"])
        if not is_rc_request(p) or key not in expected:
            continue
        psn = p["bth.psn"]
        d = _ahead(psn, expected[key])
        if d > 0:
            if not nak_sent.get(key):
                nak_sent[key] = True
                counts["out_of_seq_request"] += 1
        elif d < 0:
            counts["duplicate_request"] += 1
        else:
            nak_sent[key] = False
            expected[key] = (psn + _span(p, pmtu)) % PSN_MOD
    return counts


def completer_model(sent: list[dict], delivered: list[dict], pairs: list[dict]) -> int:
    """``rcvd_seq_err`` of the requester that received ``delivered`` (its responses, in
    arrival order). ``pairs`` are ``ibwire qp``'s connections: a response goes to the
    requester's QP, whose requests went to the responder's; the completer's PSN starts at
    the first of those requests in ``sent``."""
    first = _first_psns(sent)
    comp: dict[tuple[str, int], int] = {}
    for c in pairs:
        to = (c["responder"]["address"], c["responder"]["qpn"])
        if to in first:
            comp[(c["requester"]["address"], c["requester"]["qpn"])] = first[to]
    count = 0
    for p in delivered:
        key = (destination(p), p["bth.destqp"])
        if p["bth.opcode"] not in RESPONSES or key not in comp:
            continue
        psn = p["bth.psn"]
        if is_nak_sequence(p):
            if _ahead(psn, comp[key]) > 0:
                count += 1
                comp[key] = psn
        elif p["bth.opcode"] != ACKNOWLEDGE or p.get("aeth.syndrome", 0) >> 5 == 0:
            if _ahead(psn + 1, comp[key]) > 0:
                comp[key] = (psn + 1) % PSN_MOD
    return count


def _span(packet: dict, pmtu: int) -> int:
    """PSNs a request takes: one, or an RDMA READ's response packets."""
    if packet["bth.opcode"] == READ_REQUEST:
        return max(1, -(-packet["reth.dmalen"] // pmtu))
    return 1


def rewinds(sent: list[dict], requester: str, pmtu: int) -> int:
    """Go-back-N rounds the requester began, per QP, in bridge order: a request below the
    next never-sent PSN that does not continue the previous request (an RDMA READ resumed
    after part of its response starts beyond its own first PSN, inside its span)."""
    fresh: dict[int, int] = {}
    follows: dict[int, int] = {}
    count = 0
    for p in sent:
        if source(p) != requester or not is_rc_request(p):
            continue
        qp, psn = p["bth.destqp"], p["bth.psn"]
        end = (psn + _span(p, pmtu)) % PSN_MOD
        if qp in fresh and _ahead(psn, fresh[qp]) < 0 and psn != follows[qp]:
            count += 1
        if qp not in fresh or _ahead(end, fresh[qp]) > 0:
            fresh[qp] = end
        follows[qp] = end
    return count

"""The fault plan of ``ibwire impair``: rules spelled as ``ibwire gen`` spells its faults.

A rule is a fault kind and its selectors, parsed by gen's SPEC parser
(:func:`ibwire.cli.gen.parse_spec`) with more keys. gen's keys keep gen's meaning: ``qp=K``
the K-th connection (from 0, in the order their first request crossed), ``psn=P`` the offset
from that connection's first PSN seen, ``rate=R`` a seeded fraction of the frames the rule
applies to. More selectors: ``qpn=N`` (the QP number requests are sent to), ``psn-abs=N``
(a PSN as on the wire), ``opcode=NAME|N``, ``dir=a2b|b2a``, ``nth=N`` (the N-th frame the
other selectors match, from 1), ``tx=N`` (the N-th transmission of its PSN: 1 the first
send, 2 the first retransmission; 0 any), ``count=N`` (the rule fires at most N times).

What a rule applies to by default is what gen's fault of the same name hits: request packets
(``drop``, ``corrupt``, ``ecn``, ``dup``, ``reorder``, ``delay`` and the forged ``nak``,
``rnr`` and ``cnp``), answers (``lose_ack``: ACKs, NAKs, READ responses, atomic ACKs) or
READ responses (``ecn_resp``); ``opcode=`` replaces that class. As in gen, a rule with a PSN
hits first transmissions only unless ``tx=`` says otherwise, and fires once unless ``count=``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ibwire.errors import IbwireError

#: (kind, option name) of each fault flag: gen's (ibwire.cli.gen.FAULT_OPTIONS), then impair's.
FAULT_OPTIONS = (("drop", "drop"), ("corrupt", "corrupt"), ("lose_ack", "lose-ack"),
                 ("rnr", "rnr"), ("ecn", "ecn-mark"), ("ecn_resp", "ecn-mark-resp"),
                 ("dup", "dup"), ("reorder", "reorder"), ("delay", "delay"),
                 ("nak", "nak"), ("cnp", "cnp"))
KINDS = tuple(kind for kind, _ in FAULT_OPTIONS)
#: Kinds that hit answers (ACK, NAK, READ response, atomic ACK) unless ``opcode=`` is given.
ANSWER_KINDS = frozenset({"lose_ack"})
#: Kinds that hit READ responses unless ``opcode=`` is given.
READ_RESPONSE_KINDS = frozenset({"ecn_resp"})
#: Kinds that send a packet ibwire builds (on the connection's live state).
FORGED_KINDS = frozenset({"nak", "rnr", "cnp"})
#: NAK codes ``--nak`` forges (AETH syndrome NAK values, IBA 9.7.5.2.4 / Table 44).
NAK_CODES = {"psn-seq-err": 0, "invalid-request": 1, "remote-access": 2, "remote-op": 3,
             "invalid-rd": 4}
DIRECTIONS = {"a2b": 0, "b2a": 1}


class PlanError(IbwireError):
    """A fault SPEC that cannot be applied (an unknown key, a value out of range ...)."""


@dataclass
class Rule:
    """One fault: its kind, selectors (None: any) and parameters; counts as it runs."""

    kind: str
    text: str = ""
    qp: int | None = None
    qpn: int | None = None
    psn: int | None = None
    psn_abs: int | None = None
    opcode: int | None = None
    direction: int | None = None
    rate: float | None = None
    nth: int | None = None
    tx: int | None = None
    count: int | None = None
    timer: int = 1
    us: int = 1000
    by: int = 1
    copies: int = 1
    code: str = "psn-seq-err"
    matched: int = 0
    fired: int = 0
    seen_qp: bool = field(default=False, repr=False)

    def spent(self) -> bool:
        return self.count is not None and self.fired >= self.count

    def transmission(self) -> int:
        """The transmission of a PSN the rule hits: ``tx=`` or, when it names a PSN, the
        first (gen's faults hit first transmissions); 0: any."""
        if self.tx is not None:
            return self.tx
        return 1 if (self.psn is not None or self.psn_abs is not None) else 0


def _number(text: str) -> int:
    return int(text, 0)


def _opcode(text: str) -> int:
    from ibwire.tables import opcodes_by_name

    try:
        return int(text, 0)
    except ValueError:
        pass
    names = opcodes_by_name()
    upper = text.upper()
    if upper in names:
        return names[upper].value
    raise KeyError(text)


def _direction(text: str) -> int:
    return DIRECTIONS[text.lower()]


def _nak_code(text: str) -> str:
    if text not in NAK_CODES:
        raise KeyError(text)
    return text


KEYS: dict[str, Any] = {"rate": float, "qp": _number, "psn": _number, "qpn": _number,
                        "psn-abs": _number, "opcode": _opcode, "dir": _direction,
                        "nth": _number, "tx": _number, "count": _number}
EXTRA_KEYS: dict[str, dict[str, Any]] = {
    "rnr": {"timer": _number}, "delay": {"us": _number, "ms": _number},
    "reorder": {"by": _number}, "dup": {"copies": _number}, "nak": {"code": _nak_code}}
#: The key a bare first value of a SPEC stands for (``--nak psn-seq-err``, ``--rnr 14``,
#: ``--delay 500``: microseconds).
BARE = {"nak": "code", "rnr": "timer", "delay": "us"}


def parse_rule(kind: str, text: str) -> Rule:
    """``text`` (a SPEC) as a :class:`Rule` of ``kind``; PlanError saying what is wrong."""
    from ibwire.cli.gen import parse_spec

    if kind not in KINDS:
        raise PlanError(f"fault {kind!r} is not one of {', '.join(KINDS)}")
    spec = text.strip()
    parts = [p for p in spec.split(",") if p.strip()] if spec else []
    if parts and "=" not in parts[0] and kind in BARE:
        parts[0] = f"{BARE[kind]}={parts[0]}"
    values = parse_spec(kind, ",".join(parts), {**KEYS, **EXTRA_KEYS.get(kind, {})}) if parts \
        else {}
    names = {"psn-abs": "psn_abs", "dir": "direction"}
    rule = Rule(kind, text=spec, **{names.get(k, k): v for k, v in values.items()
                                    if k != "ms"})
    if "ms" in values:
        rule.us = values["ms"] * 1000
    _check(rule)
    return rule


def _check(rule: Rule) -> None:
    where = f"--{dict(FAULT_OPTIONS)[rule.kind]} {rule.text!r}"
    if rule.rate is not None and not 0 <= rule.rate <= 1:
        raise PlanError(f"{where}: rate must be 0..1")
    for name in ("qp", "qpn", "psn", "psn_abs", "nth", "tx", "count", "timer", "us", "by",
                 "copies"):
        value = getattr(rule, name)
        if value is not None and value < 0:
            raise PlanError(f"{where}: {name} must not be negative")
    if rule.psn is not None and rule.psn_abs is not None:
        raise PlanError(f"{where}: give psn= (an offset) or psn-abs= (as on the wire), not both")
    if rule.psn_abs is not None and rule.psn_abs > 0xFFFFFF:
        raise PlanError(f"{where}: a PSN is 24 bits (0..0xFFFFFF)")
    if rule.timer > 31:
        raise PlanError(f"{where}: the RNR timer code is 5 bits (0..31, IBA Table 45)")
    if rule.nth == 0 or rule.copies == 0 or rule.by == 0:
        raise PlanError(f"{where}: nth, copies and by count from 1")
    if rule.opcode is not None and not 0 <= rule.opcode <= 0xFF:
        raise PlanError(f"{where}: an opcode is 8 bits")
    if rule.count is None and (rule.psn is not None or rule.psn_abs is not None
                               or rule.nth is not None):
        rule.count = 1


@dataclass
class Plan:
    """The rules, in the order given (a frame meets them in that order), and the seed of
    their ``rate=`` draws."""

    rules: list[Rule] = field(default_factory=list)
    seed: int = 0

    @classmethod
    def of(cls, specs: dict[str, list[str]] | list[tuple[str, str]], seed: int = 0) -> Plan:
        """A plan from (kind, SPEC) pairs, or kind -> SPECs."""
        pairs = ([(k, t) for k, texts in specs.items() for t in texts]
                 if isinstance(specs, dict) else list(specs))
        return cls([parse_rule(kind, text) for kind, text in pairs], seed)

    def __bool__(self) -> bool:
        return bool(self.rules)

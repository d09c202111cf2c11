"""Scenario files: a YAML mapping with a list of flows (the shape of an OTG flow list) in,
a checked :class:`ibwire.gen.Scenario` out. Every error names the file and the key.

.. code-block:: yaml

    seed: 7
    encapsulation: rocev2_ipv4     # rocev2_ipv6, rocev1, ib_local, ib_global
    tap: requester                 # responder, switch
    link: {gbps: 100, delay_ns: 1000}
    cm: true                       # RC/UC/XRC set up by the CM (REQ/REP/RTU, DREQ/DREP); false:
                                   # out of band (ibwire gen --no-cm)
    dscp: 26
    ecn: 2
    vlans: [{id: 100, priority: 3}]
    cnp: {interval_us: 4, scope: qp, dscp: 48}
    endpoints:
      requester: {mac: "02:00:00:00:00:01", ip: 192.0.2.1, ip6: "fe80::1", lid: 1}
      responder: {mac: "02:00:00:00:00:02", ip: 192.0.2.2, ip6: "fe80::2", lid: 2}
    flows:                         # each flow: `qps` queue pairs alike (QP numbers in order)
      - {name: bulk, verb: write, size: 65536, iters: 100, qps: 2, mtu: 4096}
      - {verb: read, size: 3000, iters: 10, transport: rc, start_psn: 0xFFFFF0}
      - {verb: send, size: 256, iters: 50, transport: ud}
      - {verb: write, size: 8192, iters: 20, transport: xrc, xrc_srq: 0x40}
    faults:                        # qp counts queue pairs from 0 across the flows
      - {kind: drop, qp: 0, psn: 3}    # drop, corrupt, lose_ack, rnr, ecn, ecn_resp
      - {kind: ecn, rate: 0.05}
      - {kind: rnr, qp: 2, psn: 0, timer: 3}

PyYAML is the optional extra ``gen`` (``pip install 'ibwire[gen]'``).
"""

from __future__ import annotations

import os
from dataclasses import fields as dataclass_fields
from typing import Any

from ibwire.gen.scenario import Endpoint, Fault, Link, QpSpec, Scenario, ScenarioError
from ibwire.transport.verbs import TransportError

TOP = ("version", "seed", "encapsulation", "tap", "link", "dscp", "ecn", "vlans", "cnp",
       "endpoints", "flows", "faults", "pkey", "cm")
FLOW = ("name", "verb", "size", "iters", "qps", "transport", "mtu", "start_psn", "ack_every",
        "timeout", "retry_cnt", "rnr_retry", "window", "q_key", "requester_qpn",
        "responder_qpn", "xrc_srq")
FAULT = ("kind", "qp", "psn", "rate", "timer")


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """The scenario in the YAML file at ``path``, checked; ScenarioError naming the key."""
    try:
        import yaml
    except ImportError:
        raise ScenarioError("scenario files need PyYAML: pip install 'ibwire[gen]'") from None
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{name}: not YAML: {' '.join(str(exc).split())}") from None
    return scenario_from(data, name)


def _where(name: str, key: str) -> str:
    return f"{name}: {key}" if key else name


def _mapping(value: Any, name: str, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{_where(name, key)}: expected a mapping, not {value!r}")
    for k in value:
        if k not in allowed:
            raise ScenarioError(f"{_where(name, f'{key}.{k}' if key else str(k))}: unknown key "
                                f"(one of {', '.join(allowed)})")
    return value


def _int(value: Any, name: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{name}: {key}: expected an integer, not {value!r}")
    return value


def _number(value: Any, name: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(f"{name}: {key}: expected a number, not {value!r}")
    return float(value)


def _text(value: Any, name: str, key: str) -> str:
    if not isinstance(value, str):
        raise ScenarioError(f"{name}: {key}: expected text, not {value!r}")
    return value


def _list(value: Any, name: str, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ScenarioError(f"{name}: {key}: expected a list, not {value!r}")
    return value


def _checked(scenario: Scenario, name: str, key: str) -> None:
    try:
        scenario.check()
    except (ScenarioError, TransportError, ValueError) as exc:
        raise ScenarioError(f"{name}: {key}: {exc}") from None


def _flow(value: Any, name: str, key: str) -> list[QpSpec]:
    flow = _mapping(value, name, key, FLOW)
    kwargs: dict[str, Any] = {}
    for k, v in flow.items():
        at = f"{key}.{k}"
        if k in ("name",):
            _text(v, name, at)
        elif k in ("verb", "transport"):
            kwargs[k] = _text(v, name, at).lower() if k == "verb" else _text(v, name, at).upper()
        elif k != "qps":
            kwargs[k] = _int(v, name, at)
    count = _int(flow.get("qps", 1), name, f"{key}.qps")
    if count < 1:
        raise ScenarioError(f"{name}: {key}.qps: must be at least 1, not {count}")
    spec = QpSpec(**kwargs)
    for k in ("size", "iters"):
        if getattr(spec, k) < 0:
            raise ScenarioError(f"{name}: {key}.{k}: must not be negative")
    _checked(Scenario(qps=(spec,)), name, key)
    if count > 1 and (spec.requester_qpn is not None or spec.responder_qpn is not None):
        raise ScenarioError(f"{name}: {key}: QP numbers given for {count} queue pairs")
    return [spec] * count


def _fault(value: Any, name: str, key: str) -> Fault:
    fault = _mapping(value, name, key, FAULT)
    if "kind" not in fault:
        raise ScenarioError(f"{name}: {key}.kind: missing")
    kwargs: dict[str, Any] = {"kind": _text(fault["kind"], name, f"{key}.kind")}
    for k in ("qp", "psn", "timer"):
        if k in fault:
            kwargs[k] = _int(fault[k], name, f"{key}.{k}")
    if "rate" in fault:
        kwargs["rate"] = _number(fault["rate"], name, f"{key}.rate")
    return Fault(**kwargs)


def _endpoint(value: Any, name: str, key: str, default: Endpoint) -> Endpoint:
    allowed = tuple(f.name for f in dataclass_fields(Endpoint))
    given = _mapping(value, name, key, allowed)
    kwargs = {k: (_int(v, name, f"{key}.{k}") if k == "lid" else _text(v, name, f"{key}.{k}"))
              for k, v in given.items()}
    return Endpoint(**{**default.__dict__, **kwargs})


def scenario_from(data: Any, name: str = "scenario") -> Scenario:
    """The scenario a parsed YAML document describes (see the module docstring)."""
    top = _mapping(data, name, "", TOP)
    if "version" in top and top["version"] != 1:
        raise ScenarioError(f"{name}: version: only 1 is known, not {top['version']!r}")
    if "flows" not in top:
        raise ScenarioError(f"{name}: flows: missing (a list of flows)")
    qps: list[QpSpec] = []
    for i, flow in enumerate(_list(top["flows"], name, "flows")):
        qps += _flow(flow, name, f"flows[{i}]")
    if not qps:
        raise ScenarioError(f"{name}: flows: empty")
    kwargs: dict[str, Any] = {"qps": tuple(qps), "cm": True}
    if "cm" in top:
        if not isinstance(top["cm"], bool):
            raise ScenarioError(f"{name}: cm: expected true or false, not {top['cm']!r}")
        kwargs["cm"] = top["cm"]
    for k in ("seed", "dscp", "ecn", "pkey"):
        if k in top:
            kwargs[k] = _int(top[k], name, k)
    for k in ("encapsulation", "tap"):
        if k in top:
            kwargs[k] = _text(top[k], name, k)
    if "link" in top:
        link = _mapping(top["link"], name, "link", ("gbps", "delay_ns"))
        kwargs["link"] = Link(
            gbps=_number(link.get("gbps", Link.gbps), name, "link.gbps"),
            delay_ns=_int(link.get("delay_ns", Link.delay_ns), name, "link.delay_ns"))
    if "cnp" in top:
        cnp = _mapping(top["cnp"], name, "cnp", ("interval_us", "scope", "dscp"))
        if "interval_us" in cnp:
            kwargs["cnp_interval_us"] = _number(cnp["interval_us"], name, "cnp.interval_us")
        if "scope" in cnp:
            kwargs["cnp_scope"] = _text(cnp["scope"], name, "cnp.scope")
        if "dscp" in cnp:
            kwargs["cnp_dscp"] = _int(cnp["dscp"], name, "cnp.dscp")
    if "vlans" in top:
        tags = []
        for i, tag in enumerate(_list(top["vlans"], name, "vlans")):
            tag = _mapping(tag, name, f"vlans[{i}]", ("id", "priority"))
            if "id" not in tag:
                raise ScenarioError(f"{name}: vlans[{i}].id: missing")
            tags.append((_int(tag["id"], name, f"vlans[{i}].id"),
                         _int(tag.get("priority", 0), name, f"vlans[{i}].priority")))
        kwargs["vlans"] = tuple(tags)
    if "endpoints" in top:
        ends = _mapping(top["endpoints"], name, "endpoints", ("requester", "responder"))
        for side in ends:
            kwargs[side] = _endpoint(ends[side], name, f"endpoints.{side}",
                                     getattr(Scenario, side))
    base = Scenario(**kwargs)
    _checked(base, name, "scenario")
    faults = []
    for i, value in enumerate(_list(top.get("faults", []), name, "faults")):
        fault = _fault(value, name, f"faults[{i}]")
        _checked(Scenario(**{**kwargs, "faults": (fault,)}), name, f"faults[{i}]")
        faults.append(fault)
    scenario = Scenario(**{**kwargs, "faults": tuple(faults)})
    _checked(scenario, name, "faults")
    return scenario

"""``--where`` filters: simple comparisons of packet fields, e.g.
``bth.destqp == 0x12 and bth.opcode == 17`` or ``aeth.syndrome.type == "NAK" or not icrc_ok``.

The expression is parsed with Python's grammar, but only names, dotted field keys, constants,
comparisons, ``and``/``or``/``not`` and ``in`` are accepted; nothing is evaluated by Python.
A field a packet lacks makes its comparison false.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from ibwire.errors import IbwireError

_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_MISSING = object()
Predicate = Callable[[Mapping[str, Any]], bool]


class FilterError(IbwireError):
    """A --where expression that is not a simple field comparison."""


def compile_where(text: str) -> Predicate:
    """A predicate over a ``fields()`` mapping (plus ``icrc_ok``, ``vcrc_ok``, ``error``...)."""
    try:
        tree = ast.parse(text.replace("&&", " and ").replace("||", " or "), mode="eval")
    except SyntaxError as exc:
        raise FilterError(f"cannot read filter {text!r}: {exc.msg}") from exc
    return _compile(tree.body, text)


def _key(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _key(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _value(node: ast.expr, text: str) -> Callable[[Mapping[str, Any]], Any]:
    key = _key(node)
    if key is not None:
        return lambda fields: fields.get(key, _MISSING)
    if isinstance(node, ast.Constant):
        constant = node.value
        return lambda fields: constant
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_value(e, text) for e in node.elts]
        return lambda fields: tuple(item(fields) for item in items)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            isinstance(node.operand, ast.Constant):
        negative = -node.operand.value
        return lambda fields: negative
    raise FilterError(f"unsupported term {ast.unparse(node)!r} in filter {text!r}")


def _compile(node: ast.expr, text: str) -> Predicate:
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v, text) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda fields: all(p(fields) for p in parts)
        return lambda fields: any(p(fields) for p in parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _compile(node.operand, text)
        return lambda fields: not inner(fields)
    if isinstance(node, ast.Compare):
        left = _value(node.left, text)
        pairs = []
        for op, right in zip(node.ops, node.comparators, strict=True):
            if type(op) not in _COMPARE:
                raise FilterError(f"unsupported comparison in filter {text!r}")
            pairs.append((_COMPARE[type(op)], _value(right, text)))

        def compare(fields: Mapping[str, Any]) -> bool:
            current = left(fields)
            for fn, right_value in pairs:
                other = right_value(fields)
                if current is _MISSING or other is _MISSING:
                    return False
                try:
                    if not fn(current, other):
                        return False
                except TypeError:
                    return False
                current = other
            return True
        return compare
    key = _key(node)
    if key is not None:  # a bare field: true when present and truthy (``icrc_ok``, ``reth``)
        return lambda fields: bool(fields.get(key, False)) or any(
            k.startswith(key + ".") for k in fields)
    raise FilterError(f"unsupported expression {ast.unparse(node)!r} in filter {text!r}")

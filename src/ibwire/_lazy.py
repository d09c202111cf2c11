"""Names a package exports but loads on first use, so that importing one of its modules costs
only what that module needs (``ibwire check`` starts without numpy or Construct)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], where: dict[str, str]
                 ) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: name ``n`` is ``where[n]``'s attribute ``n``,
    imported and kept in ``namespace`` (the package's globals) on first use."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__

"""``python -m ibwire.fuzz.child MODULE:FUNCTION PCAP``: the child process of a
``python:MODULE:FUNCTION`` fuzz target.

Calls ``FUNCTION(frame_bytes)`` on every frame of PCAP and prints what it returns as one JSON
object per line (bytes as hex, tuples as lists). An exception ends the run with a traceback
and exit status 1, as any command target that fails. ``--check`` only imports the callable.
A callable that cannot be loaded (no such module or name, an error while importing, not
callable) is one line on stderr, ``cannot load MODULE:FUNCTION: ...``, and exit status 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def load(spec: str) -> Callable[[bytes], Any]:
    module, _, name = spec.partition(":")
    function = getattr(import_module(module), name)
    if not callable(function):
        raise TypeError(f"{spec} is not callable")
    return function


def main(argv: list[str]) -> int:
    try:
        function = load(argv[0])
    except Exception as exc:  # whatever the module raises while it is imported
        print(f"cannot load {argv[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if argv[1] == "--check":
        return 0
    from ibwire.pcap import read_capture

    out = sys.stdout
    for record in read_capture(argv[1]):
        claims = function(bytes(record.frame))
        out.write(json.dumps(_plain(claims if isinstance(claims, dict) else {})) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Coverage-guided fuzzing of ibwire's Cython modules straight, each against its Python twin
(``tools/fuzzing/cython_targets.py``): atheris, without instrumenting any Python, so the
coverage is the C edges of the extensions (built with ``-fsanitize=fuzzer-no-link`` by
``tools/fuzz_native.sh``, which runs this with ``FUZZ_SCRIPT``) and an input costs one call
of each twin: thousands a second where the whole-capture targets of ``fuzz_atheris.py`` ran
tens.

    FUZZ_SCRIPT=tools/fuzz_cython.py tools/fuzz_native.sh TARGET [libFuzzer options] [CORPUS]
    python tools/fuzz_cython.py TARGET ...      (the installed, uninstrumented build)

TARGET: tally, text, kernel, streams, observer, engine. A finding (a sanitizer report, a
twin disagreement: ``Finding``, any other exception) stops the run and saves the input;
replay it with ``python -m tools.fuzzing.cython_targets TARGET FILE``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tools.fuzzing (and tests, for the rewrite option sets)
    sys.path.insert(0, str(ROOT))

import atheris  # noqa: E402
from tools.fuzzing.cython_targets import TARGETS  # noqa: E402


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in TARGETS:
        sys.exit(__doc__)
    name = argv.pop(1)
    target = TARGETS[name]
    for warm in (b"", bytes(64), os.urandom(256)):  # import what the target reaches
        try:
            target(warm)
        except Exception:  # libFuzzer meets it again, and reports it
            pass
    if not any(a.startswith("-timeout=") for a in argv):
        argv.append("-timeout=20")
    if not any(a.startswith("-max_len=") for a in argv):
        argv.append("-max_len=8192")
    atheris.Setup(argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)

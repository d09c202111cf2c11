"""Coverage-guided fuzzing of ibwire's entry points with atheris (libFuzzer over Python and
the C extensions).

    python tools/fuzz_atheris.py TARGET [libFuzzer options...] [CORPUS_DIR...]

TARGET is one of parse, scan, rewrite, show, check (``tools/fuzzing/targets.py`` says what
each runs and checks). The Python code of ibwire is instrumented for coverage; the C
extensions are too when built with ``-fsanitize=fuzzer-no-link`` (``tools/fuzz_native.sh``
builds them so, with ASan and UBSan, and runs this). libFuzzer's options pass through:
``-max_total_time=60``, ``-runs=N``, ``-timeout=S`` (a hang: default 20 s here),
``-print_final_stats=1``. A finding stops the run with a non-zero status and leaves the input
as ``crash-*`` (or ``timeout-*``) in the working directory, or under ``-artifact_prefix``.

``--plant=exception|segv`` is the harness's own test double: the target raises a non-ibwire
exception, or dereferences NULL, on one input in 64; a run must report it
(``tests/fuzz/test_atheris_smoke.py``).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tools.fuzzing, run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import atheris  # noqa: E402


def planted(target: Callable[[bytes], None], kind: str) -> Callable[[bytes], None]:
    """``target`` with a fault planted on one input in 64 (those whose CRC-32 is 0 mod 64:
    a fixed set, so the input libFuzzer saves brings the fault back)."""

    def run(data: bytes) -> None:
        if zlib.crc32(data) % 64 == 0:
            if kind == "segv":
                import ctypes

                ctypes.string_at(0)  # a read at NULL: SIGSEGV, as a bad pointer in C would give
            raise RuntimeError("planted: a non-ibwire exception")
        target(data)

    return run


def main(argv: list[str]) -> None:
    plant = next((a.split("=", 1)[1] for a in argv if a.startswith("--plant=")), None)
    argv = [a for a in argv if not a.startswith("--plant=")]
    if len(argv) < 2 or argv[1].startswith("-"):
        sys.exit(__doc__)
    name = argv.pop(1)
    with atheris.instrument_imports(include=["ibwire", "tools.fuzzing"]):
        from tools.fuzzing import targets

        if name not in targets.TARGETS:
            sys.exit(f"unknown target {name!r}: one of {', '.join(targets.TARGETS)}")
        target = targets.TARGETS[name]
        for seed in targets.seeds():  # load every module the target reaches, instrumented
            try:
                target(seed)
            except Exception:  # libFuzzer runs the seeds again, and reports it
                pass
    if plant:
        target = planted(target, plant)
    if not any(a.startswith("-timeout=") for a in argv):
        argv.append("-timeout=20")
    if not any(a.startswith("-max_len=") for a in argv):
        argv.append("-max_len=4096" if name == "parse" else "-max_len=65536")
    dirs = [Path(a) for a in argv[1:] if not a.startswith("-") and Path(a).is_dir()]
    if not any(a for a in argv[1:] if not a.startswith("-")):  # no corpus: a new one
        dirs = [targets.WORK / f"corpus-{name}"]
        dirs[0].mkdir(exist_ok=True)
        argv.append(str(dirs[0]))
    if dirs and not any(dirs[0].iterdir()):  # an empty corpus starts from the seeds
        for i, seed in enumerate(targets.seeds()):
            (dirs[0] / f"seed-{i}").write_bytes(seed)
    atheris.Setup(argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)

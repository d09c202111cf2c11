"""Build hook: copies specs/ into the package and compiles the optional C engines.

IBWIRE_NO_EXTENSIONS=1 skips the C extensions; so does a machine without a working
compiler (the build then warns and installs the pure-Python twins).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
SPECS = HERE / "specs"

# (module name, sources) for every optional C engine; missing sources are skipped.
EXTENSIONS = [
    ("ibwire.crc._engine", ["src/ibwire/crc/_engine.pyx", "src/ibwire/crc/kernel.c"]),
    ("ibwire.scan._engine", ["src/ibwire/scan/_engine.pyx", "src/ibwire/scan/scan.c",
                             "src/ibwire/crc/kernel.c"]),
    ("ibwire.scan._tally", ["src/ibwire/scan/_tally.pyx", "src/ibwire/scan/scan.c",
                            "src/ibwire/crc/kernel.c"]),
    ("ibwire.pcap._engine", ["src/ibwire/pcap/_engine.pyx", "src/ibwire/pcap/pcapng_walk.c"]),
    ("ibwire.pcap._filemap", ["src/ibwire/pcap/_filemap.pyx", "src/ibwire/pcap/filemap.c"]),
    ("ibwire.scan._text", ["src/ibwire/scan/_text.pyx"]),
    ("ibwire.rewrite._kernel", ["src/ibwire/rewrite/_kernel.pyx", "src/ibwire/crc/kernel.c"]),
    ("ibwire.analysis._streams", ["src/ibwire/analysis/_streams.pyx"]),
    ("ibwire.transport._observer", ["src/ibwire/transport/_observer.pyx"]),
    ("ibwire.impair._fast", ["src/ibwire/impair/_fast.pyx", "src/ibwire/impair/relay.c",
                            "src/ibwire/impair/pump.c", "src/ibwire/impair/ring.c"]),
]


class BuildPyWithSpecs(build_py):
    """Ship specs/*.tsv inside the package as ibwire/_specs/."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "ibwire" / "_specs"
        target.mkdir(parents=True, exist_ok=True)
        for tsv in SPECS.glob("*.tsv"):
            shutil.copy2(tsv, target / tsv.name)


class OptionalBuildExt(build_ext):
    """Compile the engines, but fall back to the pure-Python twins if that fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any compiler failure means "use the twin"
            print(f"ibwire: C extensions not built ({exc}); using the pure-Python twin",
                  file=sys.stderr)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"ibwire: {ext.name} not built ({exc}); using the pure-Python twin",
                  file=sys.stderr)


def extensions() -> list[Extension]:
    if os.environ.get("IBWIRE_NO_EXTENSIONS") == "1":
        return []
    try:
        import numpy
        from Cython.Build import cythonize
    except ImportError:
        return []
    exts = []
    for name, sources in EXTENSIONS:
        if not all((HERE / s).exists() for s in sources):
            continue
        exts.append(Extension(
            name, sources,
            depends=[*(f"src/ibwire/crc/{h}" for h in ("kernel.h", "crc_simd.h", "crc_tables.h")),
                     "src/ibwire/scan/scan.h", "src/ibwire/scan/_layout.pxi",
                     "src/ibwire/pcap/pcapng_walk.h", "src/ibwire/pcap/filemap.h", "src/ibwire/pcap/sequential.h",
                     "src/ibwire/impair/relay.h",
                     *(f"src/ibwire/rewrite/_kernel_{p}.pxi" for p in ("bytes", "plan", "icrc"))],
            include_dirs=[numpy.get_include(), "src/ibwire/crc", "src/ibwire/scan",
                          "src/ibwire/pcap", "src/ibwire/impair"],
            extra_compile_args=os.environ.get("IBWIRE_CFLAGS", "-O3").split(),
            extra_link_args=os.environ.get("IBWIRE_LDFLAGS", "").split(),
        ))
    if not exts:
        return []
    return cythonize(exts, language_level=3, quiet=True)


setup(
    ext_modules=extensions(),
    cmdclass={"build_py": BuildPyWithSpecs, "build_ext": OptionalBuildExt},
)

#!/usr/bin/env python3
"""Write src/ibwire/scan/_layout.py from ibwire.scan.declared.layout() (after a change to a
header declaration or to specs/opcodes.tsv or specs/mad_classes.tsv).

Usage: python tools/gen_scan_layout.py
"""

from __future__ import annotations

from pathlib import Path

from ibwire.pcap.writer import AtomicFile
from ibwire.scan.declared import layout_source

TARGET = Path(__file__).resolve().parent.parent / "src" / "ibwire" / "scan" / "_layout.py"


def main() -> None:
    atomic = AtomicFile(TARGET)
    try:
        atomic.file.write(layout_source().encode())
        atomic.commit()
    except BaseException:
        atomic.abort()
        raise
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()

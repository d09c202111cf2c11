"""``python tools/rxe_rig COMMAND``: see :mod:`rxe_rig.cli`."""

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a directory: make ``import rxe_rig`` work
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rxe_rig.cli import main

sys.exit(main())

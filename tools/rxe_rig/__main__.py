"""``python tools/rxe_rig COMMAND`` (or ``python -m tools.rxe_rig`` from the checkout's root,
or ``python -m rxe_rig`` with tools/ on the path): see :mod:`rxe_rig.cli`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rxe_rig.cli import main

sys.exit(main())

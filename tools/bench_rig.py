"""Times of the soft-RoCE rig: image build (cold, in an empty cache; warm, found in the
cache), boot of two guests to rxe0 ACTIVE, and each scenario (one attempt's seconds as the
runner records them, and the wall time with retries).

    python tools/bench_rig.py [--cold] [--scenarios write,read,...] [--json OUT]

``--cold`` builds into a fresh temporary cache (XDG_CACHE_HOME), downloading the kernel
package and running mmdebstrap; without it the build figure is the warm look-up. Needs root
and what the rig needs (see tools/rxe_rig/cli.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rxe_rig.image import build
from rxe_rig.rig import Rig
from rxe_rig.runner import run
from rxe_rig.scenarios import SCENARIOS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="build in an empty cache first")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    names = [n for n in args.scenarios.split(",") if n]
    figures: dict = {"host": platform.node(), "cpus": os.cpu_count(),
                     "load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="ibwire-bench-rig-") as scratch:
        if args.cold:
            os.environ["XDG_CACHE_HOME"] = scratch
            start = time.monotonic()
            image = build()
            figures["build_cold_s"] = time.monotonic() - start
            figures["build_cold_parts_s"] = image.manifest["timings_s"]
        start = time.monotonic()
        image = build()
        figures["build_warm_s"] = time.monotonic() - start
        scenarios: dict = {}
        with Rig(image=image) as rig:
            figures["accel"] = rig.accel
            figures["boot_s"] = rig.timings["boot"]
            for name in names:
                start = time.monotonic()
                outcome = run(rig, SCENARIOS[name], Path(scratch) / "out")
                scenarios[name] = {"wall_s": time.monotonic() - start,
                                   "attempt_s": outcome.record["seconds"],
                                   "attempts": len(outcome.record["attempts"]),
                                   "ok": outcome.ok or outcome.record["unsupported"],
                                   "frames": outcome.record["capture"].get("captured")}
        figures["scenarios"] = scenarios
        figures["scenarios_total_s"] = sum(s["wall_s"] for s in scenarios.values())
    figures["load_after"] = os.getloadavg()[0]
    print(f"build: cold {figures.get('build_cold_s', float('nan')):.1f} s, "
          f"warm {figures['build_warm_s']:.2f} s; boot ({figures['accel']}) "
          f"{figures['boot_s']:.1f} s; load {figures['load_before']:.1f} -> "
          f"{figures['load_after']:.1f}")
    for name, s in figures["scenarios"].items():
        print(f"  {name:16} {s['wall_s']:6.1f} s  attempts {s['attempts']}  "
              f"frames {s['frames']}{'' if s['ok'] else '  FAILED'}")
    print(f"  {'all':16} {figures['scenarios_total_s']:6.1f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

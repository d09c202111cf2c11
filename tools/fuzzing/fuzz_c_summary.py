#!/usr/bin/env python3
"""One run of a tools/fuzz_c.sh harness, from its libFuzzer log: a line on stdout, a row in
DIR/runs.jsonl, and DIR/summary.json (the totals per entry point over every row so far).

libFuzzer's figures: ``stat::number_of_executed_units`` (inputs run),
``stat::average_exec_per_sec``, the last status line's ``cov:`` (edges reached) and ``ft:``
(features), ``stat::new_units_added``; a run that stopped on a finding names its artifact and
the first report line (ASan, UBSan, a deadly signal, the harness's own oracle).

Usage: python tools/fuzzing/fuzz_c_summary.py DIR NAME LOG RC STARTED_EPOCH_S
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
           "ERROR: libFuzzer", "ibwire fuzz finding", "Finding", "Traceback")


def _stat(text: str, name: str) -> int | None:
    found = re.findall(rf"stat::{name}:\s+(\d+)", text)
    return int(found[-1]) if found else None


def parse(name: str, log: Path, rc: int, seconds: float) -> dict[str, Any]:
    text = log.read_text(errors="replace")
    status_lines = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)", text, re.M)
    inputs = _stat(text, "number_of_executed_units")
    if inputs is None:  # killed before its final stats: the last status line
        inputs = int(status_lines[-1][0]) if status_lines else 0
    done = re.findall(r"Done \d+ runs in (\d+) second", text)
    if done:  # libFuzzer's own time, without the build before it
        seconds = float(done[-1])
    row: dict[str, Any] = {
        "name": name, "log": str(log), "rc": rc, "seconds": round(seconds, 1),
        "inputs": inputs, "exec_per_s": _stat(text, "average_exec_per_sec"),
        "cov": int(status_lines[-1][1]) if status_lines else None,
        "ft": int(status_lines[-1][2]) if status_lines else None,
        "new_units": _stat(text, "new_units_added"), "peak_rss_mb": _stat(text, "peak_rss_mb"),
        "finding": None, "artifact": None,
    }
    if (row["exec_per_s"] is None or row["exec_per_s"] == 0) and seconds > 0:
        row["exec_per_s"] = int(inputs / seconds)
    if rc != 0:
        report = next((line.strip() for line in text.splitlines()
                       if any(r in line for r in REPORTS)), f"exit status {rc}")
        row["finding"] = report
        artifact = re.findall(r"Test unit written to (\S+)", text)
        row["artifact"] = artifact[-1] if artifact else None
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, dict[str, Any]] = {}
    for row in rows:
        s = per.setdefault(row["name"], {"runs": 0, "inputs": 0, "seconds": 0.0, "cov": 0,
                                         "ft": 0, "findings": []})
        s["runs"] += 1
        s["inputs"] += row["inputs"]
        s["seconds"] = round(s["seconds"] + row["seconds"], 1)
        s["cov"] = max(s["cov"], row["cov"] or 0)
        s["ft"] = max(s["ft"], row["ft"] or 0)
        if row["finding"]:
            s["findings"].append({"report": row["finding"], "artifact": row["artifact"],
                                  "log": row["log"]})
    for s in per.values():
        s["exec_per_s"] = int(s["inputs"] / s["seconds"]) if s["seconds"] else None
    return {"entry_points": per, "total_inputs": sum(s["inputs"] for s in per.values()),
            "findings": sum(len(s["findings"]) for s in per.values())}


def main() -> None:
    if len(sys.argv) != 6:
        sys.exit(__doc__.strip().splitlines()[-1])
    folder, name, log, rc = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    row = parse(name, log, rc, time.time() - float(sys.argv[5]))
    with (folder / "runs.jsonl").open("a") as out:
        out.write(json.dumps(row) + "\n")
    rows = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]
    (folder / "summary.json").write_text(json.dumps(summary(rows), indent=2) + "\n")
    verdict = "clean" if rc == 0 else f"FOUND: {row['finding']} ({row['artifact']})"
    print(f"{name:12} {row['inputs']:>11,} inputs {row['seconds']:>8.1f} s "
          f"{row['exec_per_s'] or 0:>7,}/s  cov {row['cov']}  ft {row['ft']}  {verdict}")


if __name__ == "__main__":
    main()

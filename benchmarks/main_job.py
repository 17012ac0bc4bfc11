"""The README's main job as a new user runs it: ``rbjax oracle --stores 1000 --days 180``, cold then warm.

    python benchmarks/main_job.py [--stores 1000] [--days 180]

Runs the command twice in fresh processes with a fresh compilation cache: cold (the cache empty: every
program compiles) and warm (the cache filled by the cold run). Prints and writes (benchmarks/out/main_job.md)
each run's wall time, peak resident memory and the opening and day phases from its progress lines, beside the
targets (60 s cold, 30 s warm, 2 GB).
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"
TARGETS = {"cold": 60.0, "warm": 30.0}
PEAK_TARGET_GB = 2.0


def run(args: list[str]) -> dict:
    """One CLI run in a fresh process: wall seconds, peak RSS (GB) and its progress phases."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    cli = "import sys; from rbjax.cli import main; main(sys.argv[1:])"
    out = subprocess.run([sys.executable, "-c", cli, *args], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"rbjax {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    opened = re.search(r"opened in ([\d.]+) s", out.stderr)
    rate = re.findall(r"([\d,]+) store-days/s", out.stderr)
    return dict(
        wall=wall,
        # ru_maxrss of children is the largest child so far: the warm run can only be read if it is larger
        peak_gb=max(peak, before) / 2**20 if peak > before else None,
        opened=float(opened.group(1)) if opened else float("nan"),
        rate=rate[-2] if len(rate) > 1 else "n/a",
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=1000)
    ap.add_argument("--days", type=int, default=180)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        cmd = ["--cache", cache, "oracle", "--stores", str(a.stores), "--days", str(a.days)]
        runs = {"cold": run(cmd), "warm": run(cmd)}
    lines = [
        f"# The main job: `rbjax oracle --stores {a.stores:,} --days {a.days}` (fresh processes, fresh cache)",
        "",
        "| run | wall (s) | target | peak RSS (GB) | opening: compile (cold) + worlds + history (s) | "
        "days (store-days/s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in runs.items():
        peak = f"{r['peak_gb']:.2f}" if r["peak_gb"] is not None else "<= cold"
        lines.append(
            f"| {name} | {r['wall']:.1f} | {TARGETS[name]:.0f} | {peak} (target {PEAK_TARGET_GB:.0f}) | "
            f"{r['opened']:.1f} | {r['rate']} |"
        )
    text = "\n".join(lines) + "\n"
    OUT.mkdir(exist_ok=True)
    (OUT / "main_job.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

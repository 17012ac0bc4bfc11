"""The test suite's wall time as CI runs it, beside this machine's speed measured in the same session.

    python benchmarks/suite_time.py [--lanes quick,full] [--before REV]

Runs ``rbjax bench --quick`` (a fresh process and cache: the machine's day rate and first call, each as a ratio
to the reference machine's, ``rbjax.perf.reference``), then each lane as the README runs it, with ``CI=true``
(an empty compilation cache per run, so every program compiles): the quick lane ``pytest -q -m "not slow"`` and
the full suite ``pytest -q``. Machines of CI's kind drift by a quarter or more from one stretch to the next, and
the suite is mostly compiling, so a lane's time means little without the first-call ratio beside it. Prints a
table; a run of both lanes keeps benchmarks/results/test_suite.json (commit, machine, date, command): the
README's "about N min" figures are its, and ``tests/test_recorded_results.py`` holds them to it. Run it on a
quiet machine: the full suite takes half an hour or more on 2 cores.

``--before REV`` also runs each lane on the tree of commit REV (a detached ``git worktree``, its ``src`` first on
the path), right after this tree's, so that a change's cost to the suite is two runs of one session on one
machine; the record keeps both.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorded import OUT, provenance, write  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LANES = {"quick": ["-m", "not slow"], "full": []}
TARGET_S = {"quick": 300, "full": 1500}  # the house's: 5 and 25 minutes on CI's kind


def machine_speed() -> dict:
    """``rbjax bench --quick`` in a fresh process with an empty cache: its row and the ratios to the reference
    (> 1: faster than the reference machine)."""
    from rbjax.perf import reference

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": os.path.join(tmp, "cache")}
        subprocess.run(
            [sys.executable, "-m", "rbjax", "bench", "--quick", "--out", tmp],
            check=True,
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        with open(os.path.join(tmp, "bench.csv")) as f:
            row = next(csv.DictReader(f))
    rate, first = float(row["store_days_per_s"]), float(row["first_call_s"])
    days, compiling = reference.ratios(rate, first)
    return dict(
        store_days_per_s=round(rate),
        first_call_s=round(first, 1),
        days_ratio=round(days, 2),
        compiling_ratio=round(compiling, 2),
    )


def run_lane(name: str, tree: str = ROOT, tag: str = "") -> dict:
    """One lane in a fresh pytest run (CI=true) of the repository at ``tree`` (its ``src`` first on the path):
    wall seconds and pytest's counts; exits on a failing run."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=25", *LANES[name]]
    path = os.pathsep.join(p for p in (os.path.join(tree, "src"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "CI": "true", "PYTHONPATH": path}
    start = time.perf_counter()
    out = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    OUT.mkdir(exist_ok=True)
    (OUT / f"suite_{name}{tag}.log").write_text(out.stdout + out.stderr)  # pytest's report, for a failing run
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected)", last)}
    if out.returncode != 0:  # timed all the same: the log says which test failed
        print(f"the {name} lane{tag} failed (exit {out.returncode}): {last}", flush=True)
    return dict(wall_s=round(wall), target_s=TARGET_S[name], **counts)


@contextlib.contextmanager
def worktree(rev: str):
    """A detached checkout of ``rev`` in a temporary folder (``git worktree``), removed afterwards."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if commit.returncode != 0:
        raise SystemExit(f"--before {rev}: not a commit of this repository")
    with tempfile.TemporaryDirectory() as tmp:
        where = os.path.join(tmp, "tree")
        subprocess.run(
            ["git", "worktree", "add", "--detach", where, commit.stdout.strip()], cwd=ROOT, check=True
        )
        try:
            yield where, commit.stdout.strip()
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", where], cwd=ROOT, check=False)


def report(lane: str, r: dict, which: str) -> None:
    print(
        f"{lane}{which}: {r['wall_s']:,} s ({r['wall_s'] / 60:.1f} min; target {r['target_s'] // 60} min)",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lanes", default="quick,full", help="comma-separated: quick, full")
    p.add_argument(
        "--before", default=None, metavar="REV", help="also run each lane on the tree of commit REV"
    )
    args = p.parse_args()
    lanes = [s.strip() for s in args.lanes.split(",") if s.strip()]
    if not lanes or set(lanes) - set(LANES):
        p.error(f"--lanes {args.lanes}: expected some of {', '.join(LANES)}")
    source = provenance(sys.argv, "benchmarks/suite_time.py")
    speed = machine_speed()
    print(
        f"this machine: {speed['store_days_per_s']:,} store-days/s ({speed['days_ratio']}x the reference's), "
        f"first call {speed['first_call_s']} s ({speed['compiling_ratio']}x as fast)",
        flush=True,
    )
    results, before = {}, {}
    with contextlib.ExitStack() as stack:
        old = stack.enter_context(worktree(args.before)) if args.before else None
        for lane in lanes:  # this tree, then the tree before, lane by lane: the same stretch of the machine
            results[lane] = run_lane(lane)
            report(lane, results[lane], "")
            if old is not None:
                before[lane] = run_lane(lane, old[0], "_before")
                report(lane, before[lane], f" (before, {old[1][:7]})")
    print(
        "\n| lane | tree | wall (s) | min | target (min) | passed | skipped |\n|---|---|---|---|---|---|---|"
    )
    for tree, rows in (("this", results), ("before", before)):
        for lane, r in rows.items():
            row = (
                lane,
                tree,
                f"{r['wall_s']:,}",
                f"{r['wall_s'] / 60:.1f}",
                r["target_s"] // 60,
                r.get("passed", 0),
            )
            print("| " + " | ".join(map(str, row)) + f" | {r.get('skipped', 0)} |")
    if set(results) != set(LANES):  # the record is one run of every lane: a part of one would mix two runs
        print("not written: benchmarks/results/test_suite.json keeps a run of every lane")
        return
    record = dict(**source, cores=os.cpu_count(), machine_speed=speed, lanes=results)
    if before:
        record["before"] = dict(commit=old[1], lanes=before)
    path = write("test_suite", record)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""The README's main job as a new user runs it: ``rbjax oracle --stores 1000 --days 180``, cold then warm.

    python benchmarks/main_job.py [--stores 1000] [--days 180]

Runs the command twice in fresh processes with a fresh compilation cache: cold (the cache empty: every
program compiles) and warm (the cache filled by the cold run): each run's wall time, peak resident memory and
the opening and day phases from its progress lines. Then the same job's phases, cold and warm, in two more
fresh processes that do what the command does step by step (``phases``): imports, tracing, lowering, compiling
and storing the programs (cold) or loading them (warm), opening the stores (the reset) and the days. Then
``rbjax bench --quick`` three times, each in a fresh process with a fresh cache (its medians: the figures
``bench --quick`` sets a user's machine beside). Prints and writes benchmarks/out/main_job.md, and keeps
benchmarks/results/main_job.json (with the commit, machine, date and command): the reference machine's record,
which ``rbjax.perf.reference`` and the README state and ``tests/test_recorded_results.py`` holds them to. For
the README's job (1,000 x 180), it then checks the README's stated range against this run and exits 1 on a
drift (``readme_drift``): run it on a quiet machine of CI's kind.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorded import OUT, provenance, write  # noqa: E402

QUICK_RUNS = 3


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
    opened = re.search(r"(?:compiled and opened|loaded from the cache\)) in ([\d.]+) s", out.stderr)
    rate = re.findall(r"([\d,]+) store-days/s", out.stderr)
    return dict(
        wall=wall,
        # ru_maxrss of children is the largest child so far: the warm run can only be read if it is larger
        peak_gb=max(peak, before) / 2**20 if peak > before else None,
        opened=float(opened.group(1)) if opened else float("nan"),
        rate=rate[-2] if len(rate) > 1 else "n/a",
    )


PHASES = r"""
import sys, time
clock = time.perf_counter()
import jax, jax.numpy as jnp
import rbjax
from rbjax.env import Env
from rbjax.policies import make
from rbjax.runners.placement import place, standing_in
from rbjax.runners.rollout_programs import compiled
t = {"imports": time.perf_counter() - clock}
stores, days, per_call, cache = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rbjax.setup(cache=cache)  # as the command: one device per core, the persistent cache
devices = tuple(jax.devices())
env = Env()
params = env.default_params()
policy, policy_params = make("oracle")
keys = jax.random.split(jax.random.key(0), stores + (-stores % len(devices)))
k_reset, k_run = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k))(keys), 1, 0)
params, policy_params = place(params, None, devices), place(policy_params, None, devices)
k_reset, k_run = place((k_reset, k_run), 0, devices)
reset, chunk = compiled(env, policy, "summary", None, None, devices)
# as the command: the reset compiles on the compiling thread while the day is traced from stand-ins of its
# outputs, the day compiles after it, and the stores open as soon as the reset is compiled
clock = time.perf_counter()
opening = reset.start(k_reset, params)
day = chunk.start(policy_params, params, *standing_in(opening.out_info, devices), k_run, jnp.int32(0), per_call)
made = time.perf_counter()
obs, state = opening.result()(k_reset, params)
run_days = day.result()
ready = time.perf_counter()
jax.block_until_ready(state)
for phase in ("trace", "lower", "store", "load"):
    t[phase] = reset.seconds[phase] + chunk.seconds[phase]
t["compile"] = ready - made  # what is left of compiling both once both are traced (wall time)
t["opening"] = time.perf_counter() - ready  # the reset's time not hidden behind the compiling
clock = time.perf_counter()
for day in range(0, days, per_call):
    (obs, state), rec = run_days(policy_params, params, obs, state, k_run, jnp.int32(day))
jax.block_until_ready(rec)
t["days"] = time.perf_counter() - clock
print(" ".join(f"{k}={v:.3f}" for k, v in t.items()))
"""
PHASE_NAMES = ("imports", "trace", "lower", "compile", "store", "load", "opening", "days")


def phases(stores: int, days: int, cache: str) -> dict:
    """The job's phases (seconds) in a fresh process: imports, the command's two programs traced, lowered and
    stored (cold) or loaded (warm; ``rbjax.runners.executables``), then compiled one after the other (wall time),
    opening the stores (the reset's time not hidden behind the compiling) and the days in calls of 30 days (as
    the command's progress chunks)."""
    out = subprocess.run(
        [sys.executable, "-c", PHASES, str(stores), str(days), str(min(30, days)), cache],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"the phases run failed:\n{out.stderr[-2000:]}")
    return {k: float(v) for k, v in (kv.split("=") for kv in out.stdout.split()[-len(PHASE_NAMES) :])}


def quick_runs(n: int) -> dict:
    """``rbjax bench --quick`` ``n`` times, each in a fresh process with a fresh cache: the medians of its day
    rate and first call, and every run's."""
    rows = []
    for _ in range(n):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
            cli = "import sys; from rbjax.cli import main; main(sys.argv[1:])"
            done = subprocess.run(
                [sys.executable, "-c", cli, "--cache", cache, "bench", "--quick", "--out", out],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise SystemExit(f"rbjax bench --quick failed:\n{done.stderr[-2000:]}")
            with open(os.path.join(out, "bench.csv")) as fh:
                row = next(csv.DictReader(fh))
            rows.append({k: float(row[k]) for k in ("store_days_per_s", "first_call_s")})
    median = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    return dict(**median, runs=rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=1000)
    ap.add_argument("--days", type=int, default=180)
    a = ap.parse_args()
    source = provenance(sys.argv, "benchmarks/main_job.py")
    with tempfile.TemporaryDirectory() as cache:
        cmd = ["--cache", cache, "oracle", "--stores", str(a.stores), "--days", str(a.days)]
        runs = {"cold": run(cmd), "warm": run(cmd)}
    with tempfile.TemporaryDirectory() as cache:
        split = {"cold": phases(a.stores, a.days, cache), "warm": phases(a.stores, a.days, cache)}
    lines = [
        f"# The main job: `rbjax oracle --stores {a.stores:,} --days {a.days}` (fresh processes, fresh cache)",
        "",
        "| run | wall (s) | peak RSS (GB) | opening: compile (cold) + worlds + history (s) | days (store-days/s) |",
        "|---|---|---|---|---|",
    ]
    for name, r in runs.items():
        peak = f"{r['peak_gb']:.2f}" if r["peak_gb"] is not None else "<= cold"
        lines.append(f"| {name} | {r['wall']:.1f} | {peak} | {r['opened']:.1f} | {r['rate']} |")
    lines += [
        "",
        "The same job step by step (fresh processes, a fresh cache; seconds):",
        "",
        "| run | " + " | ".join(PHASE_NAMES) + " | total |",
        "|---|" + "---:|" * (len(PHASE_NAMES) + 1),
    ]
    for name, p in split.items():
        lines.append(
            f"| {name} | " + " | ".join(f"{p[k]:.1f}" for k in PHASE_NAMES) + f" | {sum(p.values()):.1f} |"
        )
    quick = quick_runs(QUICK_RUNS) if (a.stores, a.days) == (1000, 180) else None
    if quick:
        lines += [
            "",
            f"`rbjax bench --quick`, {QUICK_RUNS} fresh processes with fresh caches (medians): "
            f"{quick['store_days_per_s']:,.0f} store-days/s, first call {quick['first_call_s']:.1f} s",
        ]
    text = "\n".join(lines) + "\n"
    OUT.mkdir(exist_ok=True)
    (OUT / "main_job.md").write_text(text)
    print(text)
    if quick:
        write("main_job", dict(**source, stores=a.stores, days=a.days, runs=runs, phases=split, quick=quick))
    if a.stores == 1000 and a.days == 180:  # the README's job: its stated times must still hold
        drift = readme_drift(runs)
        print("\n".join(drift) or "the README's times hold (a quiet machine of CI's kind)")
        if drift:
            raise SystemExit(1)


def readme_drift(runs: dict) -> list[str]:
    """The README's main-job times and memory (``rbjax.perf.reference.MAIN_JOB``, which a test holds equal to the
    README's text) against this run: a line per number outside its stated range (the memory within 10 %); []
    when all hold."""
    from rbjax.perf.reference import MAIN_JOB

    out = []
    for name in ("cold", "warm"):
        lo, hi = MAIN_JOB[f"{name}_s"]
        if not lo <= runs[name]["wall"] <= hi:
            out.append(
                f"README drift: the {name} run took {runs[name]['wall']:.1f} s, outside its {lo:.0f}-{hi:.0f} s"
            )
    peak, stated = runs["cold"]["peak_gb"], MAIN_JOB["peak_gb"]
    if peak is not None and abs(peak - stated) > 0.1 * stated:
        out.append(f"README drift: the peak memory was {peak:.2f} GB, not within 10 % of its {stated} GB")
    return out


if __name__ == "__main__":
    main()

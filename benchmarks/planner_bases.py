"""Policy iteration climbs: the planner with the shipped privileged student (``distilled``, round 2 of
``rbjax train distill``) as its base against the shipped planner (base: the oracle), paired.

    python benchmarks/planner_bases.py [--stores 64] [--days 180]

Both planners with the shipped settings (``rbjax.policies.PlanSettings()``: C = 9 candidates, M = 4 futures,
H = 14 days, every day) on the same ``--stores`` held-out stores (``planner.HELD_OUT_SEED``: no setting was
chosen and no student trained on them) and keys, each run once (compiling included). Keeps
benchmarks/results/planner_bases.json (each planner's main-table means and sds, per-store final net worth, the
paired difference with its 95 % interval, wall times, with the commit, machine, date and command), which
``tests/test_recorded_results.py`` holds docs/results.md to.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

import rbjax
from rbjax.policies import PlanSettings, make_planner
from rbjax.results import metrics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from planner import HELD_OUT_SEED, paired_row  # noqa: E402
from recorded import provenance, stat, write  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=64)
    ap.add_argument("--days", type=int, default=180)
    args = ap.parse_args()
    rbjax.setup(cache="none")  # one device per core, as the CLI; every program compiles in this run
    source = provenance(sys.argv, "benchmarks/planner_bases.py")
    env = rbjax.Env()
    params = env.default_params().replace(horizon=np.int32(args.days))
    keys = jax.random.split(jax.random.key(HELD_OUT_SEED), args.stores)
    student, student_params = rbjax.policies.make("distilled", env)
    planners = {
        "plan (base: oracle)": rbjax.policies.make("plan", env),
        "plan (base: distilled)": make_planner(env, PlanSettings(base=student), student_params),
    }
    tables, wall = {}, {}
    for name, (policy, policy_params) in planners.items():
        start = time.perf_counter()
        rec, _ = jax.device_get(
            rbjax.rollout(env, policy, policy_params, params, keys, days=args.days, progress=30)
        )
        wall[name] = time.perf_counter() - start
        tables[name] = metrics.store_metrics(rec)
        print(f"{name}: {tables[name]['final_net_worth'].mean():,.0f} in {wall[name]:.0f} s", flush=True)
    (base_name, base), (other_name, other) = tables.items()
    row = paired_row(base["final_net_worth"].to_numpy(), other["final_net_worth"].to_numpy())
    print(
        f"{other_name} - {base_name}: {row['diff']:+,.0f} ({row['low']:+,.0f} .. {row['high']:+,.0f}), "
        f"{row['relative']:+.1%}, wins {row['wins']:.0%}"
    )
    kept = {
        name: {m: stat(t[m]) for m in metrics.MAIN_TABLE}
        | {
            "survives": float((t["survival_days"] >= args.days).mean()),
            "final_net_worth_per_store": t["final_net_worth"].astype(float).tolist(),
            "wall_s": wall[name],
        }
        for name, t in tables.items()
    }
    paired = {k: float(v) for k, v in row.items()}
    write(
        "planner_bases",
        dict(**source, stores=args.stores, days=args.days, seed=HELD_OUT_SEED, policies=kept, paired=paired),
    )


if __name__ == "__main__":
    main()

"""Results table of the baselines: random, swept base-stock and (s, S), PPO, the oracle, the paper's LLM rows.

    python benchmarks/baselines.py --checkpoint runs/ppo [--seeds 128] [--sweep-seeds 32]

The classic policies' parameters are chosen by a sweep on ``--sweep-seeds`` seeds (survival first, then
net worth, as the paper selects its runs); every row is then
evaluated on the same ``--seeds`` fresh seeds (common random numbers, seeds disjoint from the sweep's).
Writes benchmarks/out/baselines.md and baselines.csv (one row per policy and store), and keeps
benchmarks/results/baselines.json (each row's main-table means and sds, the swept parameters, with the commit,
machine, date and command), which ``tests/test_recorded_results.py`` holds the README's PPO row and
docs/results.md's table to.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd

import rbjax
from rbjax import policies
from rbjax.results import metrics, paper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorded import provenance, stat, write  # noqa: E402

BASE_STOCK_GRID = rbjax.grid(
    cover_days=[6.0, 10.0, 16.0, 22.0, 30.0],
    shelf_size=[20, 30, 40],
    supplier=[policies.CHEAPEST, policies.BEST_RATED],
)
S_S_GRID = rbjax.grid(
    s_days=[2.0, 4.0, 8.0],
    S_days=[12.0, 20.0, 30.0],
    shelf_size=[30, 40],
    supplier=[policies.CHEAPEST, policies.BEST_RATED],
)
EVAL_KEY = 1_000_003  # the evaluation seeds' key, disjoint from the sweeps' (key 0)


def best_point(env, policy, defaults, params, points, seeds):
    """Survival first, as the paper selects its runs: the longest mean survival, then the best net worth
    (ranking by net worth alone picks stores that buy stock with all their cash and die rich in goods)."""
    result = rbjax.sweep(env, policy, defaults, params, points, seeds=seeds, batch_size=1024)
    rank = pd.DataFrame(
        {
            "days": result.summary[("survival_days", "mean")].round(1),
            "worth": result.summary[("final_net_worth", "mean")],
        }
    )
    top = rank.sort_values(["days", "worth"], ascending=False).index[0]
    best = dict(zip(result.names, top if len(result.names) > 1 else (top,)))
    best = {k: np.asarray(v).item() for k, v in best.items()}
    print(
        f"  swept {len(points)} points x {seeds} seeds in {result.seconds:.0f} s; best {best}: survival "
        f"{rank.loc[top, 'days']:.0f} days, net worth {rank.loc[top, 'worth']:,.0f}",
        file=sys.stderr,
    )
    return defaults.replace(
        **{k: np.asarray(v, np.asarray(getattr(defaults, k)).dtype) for k, v in best.items()}
    ), best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--checkpoint", default=str(rbjax.PPO_CHECKPOINT), help="PPO run folder (skipped if missing)"
    )
    ap.add_argument("--seeds", type=int, default=128)
    ap.add_argument("--sweep-seeds", type=int, default=32)
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args(argv)
    rbjax.setup()  # one device per core, as the CLI
    source = provenance(sys.argv if argv is None else ["", *argv], "benchmarks/baselines.py")
    env = rbjax.Env()
    params = env.default_params()
    keys = jax.random.split(jax.random.key(EVAL_KEY), args.seeds)
    rows = {}
    print("sweeping base-stock ...", file=sys.stderr)
    bs, bs_best = best_point(env, *policies.make("base_stock"), params, BASE_STOCK_GRID, args.sweep_seeds)
    print("sweeping (s, S) ...", file=sys.stderr)
    ss, ss_best = best_point(env, *policies.make("s_S"), params, S_S_GRID, args.sweep_seeds)
    runs = [
        ("random", *policies.make("random")),
        ("base-stock (best of sweep)", policies.base_stock, bs),
        ("(s, S) (best of sweep)", policies.s_S, ss),
    ]
    checkpoint = Path(args.checkpoint)
    if (checkpoint / "policy.msgpack").is_file():
        runs += [
            ("PPO (sampled actions)", *policies.make("ppo", env, checkpoint)),
            ("PPO (greedy)", *policies.make("ppo", env, checkpoint, greedy=True)),
        ]
    else:
        print(f"no PPO checkpoint at {checkpoint}: PPO rows skipped", file=sys.stderr)
    runs.append(("oracle (privileged)", *policies.make("oracle")))
    tables = []
    for name, policy, policy_params in runs:
        start = time.perf_counter()
        rec, _ = rbjax.rollout(env, policy, policy_params, params, keys, days=180)
        table = metrics.store_metrics(rec)
        print(
            f"  {name}: {time.perf_counter() - start:.0f} s, net worth {table.final_net_worth.mean():,.0f}",
            file=sys.stderr,
        )
        tables.append(table.assign(policy=name))
        rows[name] = table
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pd.concat(tables).to_csv(out / "baselines.csv", index_label="store")
    text = markdown(rows, args.seeds, bs_best, ss_best)
    (out / "baselines.md").write_text(text)
    print(text)
    kept = {
        name: {m: stat(t[m]) for m in metrics.MAIN_TABLE}
        | {"survives": float((t.survival_days >= 180).mean())}
        for name, t in rows.items()
    }
    swept = {"base_stock": bs_best, "s_S": ss_best}
    write(
        "baselines", dict(**source, seeds=args.seeds, days=180, eval_key=EVAL_KEY, swept=swept, policies=kept)
    )


def markdown(rows: dict, seeds: int, bs_best: dict, ss_best: dict) -> str:
    cols = metrics.MAIN_TABLE
    fmt = {
        "survival_days": "{:.0f}",
        "final_net_worth": "{:,.0f}",
        "total_sales": "{:,.0f}",
        "daily_sold_products": "{:.2f}",
        "return_ratio": "{:.4f}",
        "expired_ratio": "{:.4f}",
        "stockout_days": "{:.0f}",
    }
    lines = ["| policy | survives 180 d | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for name, t in rows.items():
        cells = [f"{fmt[c].format(t[c].mean())} ± {fmt[c].format(t[c].std())}" for c in cols]
        lines.append(
            f"| {name} | {100 * (t.survival_days >= 180).mean():.0f} % | " + " | ".join(cells) + " |"
        )
    for name, row in list(paper.LLM_ROWS.items()) + [("oracle (paper)", paper.ORACLE)]:
        lines.append(
            f"| {name}, paper's one run | | " + " | ".join(fmt[c].format(row[c]) for c in cols) + " |"
        )
    lines.append(
        f"\nrbjax rows: mean ± sd over {seeds} evaluation seeds x 180 days. Swept parameters: base-stock "
        f"{bs_best}, (s, S) {ss_best} (supplier 0 = cheapest, 1 = best-rated)."
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

"""``rbjax sweep``: a grid of oracle / env parameters times N seeds; CSV tables and a plot per metric."""

from __future__ import annotations

import os
import sys

import numpy as np

from rbjax.cli.common import fail, make_env, make_policy

OPTIONS = {  # CLI flag -> sweep parameter
    "products_per_category": "products_per_category",
    "multiplier": "multiplier",
    "window": "window",
    "fallback_demand": "fallback_demand",
    "shelf": "shelf_capacity",
    "capacity": "capacity",
    "rent": "rent",
    "initial_funds": "initial_funds",
    "news_scale": "news_scale",
}
PLOTTED = ("final_net_worth", "total_sales", "survival_days")


def parse_values(text: str, flag: str) -> list:
    """'2,4,6' -> [2, 4, 6] (whole numbers as int)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise fail(f"sweep: --{flag.replace('_', '-')} needs comma-separated numbers, got {text!r}") from None
    return [int(v) if v.is_integer() else v for v in values]


def main(args) -> None:
    from rbjax.runners import metrics
    from rbjax.runners.sweep import grid, sweep

    env, params = make_env(args)
    policy, policy_params = make_policy(args, env)
    values = {OPTIONS[k]: parse_values(v, k) for k, v in vars(args).items() if k in OPTIONS and v}
    if not values:
        raise fail("sweep: give at least one parameter to sweep, e.g. --multiplier 2,4,6")
    points = grid(**values)
    print(f"sweep: {len(points)} points x {args.seeds} seeds x {args.days} days", file=sys.stderr)
    try:
        result = sweep(
            env,
            policy,
            policy_params,
            params,
            points,
            seeds=args.seeds,
            days=args.days,
            key=args.seed,
            batch_size=args.batch_size,
            progress=True,
        )
    except ValueError as e:
        raise fail(f"sweep: {e}") from None
    result.table.to_csv(os.path.join(args.out, "sweep.csv"), index=False)
    flat = result.summary.copy()
    flat.columns = [f"{m}_{s}" for m, s in flat.columns]
    flat.to_csv(os.path.join(args.out, "summary.csv"))
    names = result.names
    for metric in PLOTTED:
        fig = result.plot(metric, x=names[0], y=names[1] if len(names) > 1 else None)
        fig.savefig(os.path.join(args.out, f"{metric}.png"), dpi=120)
    bad = metrics.non_finite_stores(result.table)
    if len(bad):
        points = sorted(set(result.table.point.iloc[bad].tolist()))
        raise fail(
            f"sweep: {len(bad)} stores at points {points[:8]} ended with a non-finite net worth or count; "
            f"the tables are written, but those points have no valid result"
        )
    best = result.summary[("final_net_worth", "mean")].idxmax()
    print(
        f"{result.store_days:,} store-days in {result.seconds:.1f} s "
        f"({result.store_days / result.seconds:,.0f} store-days/s, compilation included)"
    )
    print(
        f"best mean final net worth: {result.summary[('final_net_worth', 'mean')].max():,.0f} at "
        f"{ {n: getattr(v, 'item', lambda: v)() for n, v in zip(names, np.atleast_1d(best))} }"
    )
    print(f"wrote {args.out}/sweep.csv, summary.csv and {'/'.join(PLOTTED)}.png")

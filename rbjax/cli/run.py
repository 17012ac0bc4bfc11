"""``rbjax info``, ``rbjax oracle``, ``rbjax run`` and ``rbjax eval``: a policy on a batch of stores."""

from __future__ import annotations

import os
import time

from rbjax.cli.common import fail, make_env, make_policy


def info(args) -> None:
    from rbjax.data import load_catalog

    print(load_catalog(args.data))


def main(args) -> None:
    """Roll out --stores stores for --days days and print the main table beside the paper's row."""
    import jax

    from rbjax.runners.rollout import rollout

    env, params = make_env(args)
    policy, policy_params = make_policy(args, env)
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    start = time.perf_counter()
    records = "full" if getattr(args, "records", False) else "summary"
    rec, _ = rollout(
        env, policy, policy_params, params, keys, days=args.days, progress=args.progress, records=records
    )
    elapsed = time.perf_counter() - start
    print(
        f"{args.policy} policy, {args.stores} stores x {args.days} days, categories {env.config.grouping} "
        f"({elapsed:.1f} s including compilation, {args.stores * args.days / elapsed:,.0f} store-days/s)"
    )
    report(args, rec, params)


def save_records(path: str, rec) -> None:
    """Every per-day record field as an array [stores, days] (``DayInfo`` fields, or ``DaySummary``'s)."""
    import numpy as np

    np.savez_compressed(path, **{k: np.asarray(v) for k, v in vars(rec).items()})


def report(args, rec, params) -> None:
    """The main table beside the paper's row; with --out the per-store CSV (and the oracle's plot); a
    non-zero exit when a store's results are not finite."""
    from rbjax.runners import metrics, paper

    table = metrics.store_metrics(rec)
    reference = paper.ORACLE if args.policy == "oracle" else paper.LLM_ROWS[paper.BEST_LLM]
    print(metrics.format_compare(metrics.compare(table, reference)))
    if args.out:
        table.to_csv(os.path.join(args.out, f"{args.policy}_stores.csv"), index_label="store")
        if getattr(args, "records", False):
            save_records(os.path.join(args.out, "records.npz"), rec)
        if args.policy == "oracle":
            from rbjax.runners.plots import plot_net_worth

            fig = plot_net_worth(
                metrics.net_worth_paths(rec, float(params.initial_funds)), paper.ORACLE_NET_WORTH
            )
            fig.savefig(os.path.join(args.out, "oracle_net_worth.png"), dpi=120)
        print(f"wrote {args.out}")
    bad = metrics.non_finite_stores(table)
    if len(bad):
        raise fail(
            f"{len(bad)} of {args.stores} stores ended with a non-finite net worth or count "
            f"(stores {bad[:8].tolist()}): the results above are not valid"
        )

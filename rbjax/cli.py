"""Command line: ``rbjax info`` (catalogue summary) and ``rbjax run`` (a batched rollout with a baseline)."""
from __future__ import annotations

import argparse
import time

import numpy as np


def _info(args) -> None:
    from rbjax.data import load_catalog
    print(load_catalog(args.data))


def _run(args) -> None:
    import jax

    from rbjax.env import Env
    from rbjax.data import load_catalog
    from rbjax.policies import BaseStockParams, RandomParams, base_stock, random_policy
    from rbjax.rollout import rollout

    env = Env(catalog=load_catalog(args.data))
    params = env.check_params(env.default_params().replace(horizon=np.int32(args.days)))
    policy, policy_params = {"base_stock": (base_stock, BaseStockParams.default()),
                             "random": (random_policy, RandomParams.default())}[args.policy]
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    start = time.perf_counter()
    rec, _ = rollout(env, policy, policy_params, params, keys, days=args.days, progress=args.progress)
    rec = jax.tree.map(np.asarray, rec)
    elapsed = time.perf_counter() - start
    days = rec.alive.sum(1)
    rows = {
        "survival days": days,
        "final net worth": rec.net_worth[np.arange(args.stores), np.maximum(days - 1, 0)],
        "total sales": rec.sold.sum(1),
        "daily sold products": rec.products_sold.sum(1) / np.maximum(days, 1),
        "return ratio": rec.returned.sum(1) / np.maximum(rec.sold.sum(1), 1),
        "expired ratio": rec.expired.sum(1) / np.maximum(rec.sold.sum(1) + rec.expired.sum(1), 1),
        "stockout days": (rec.stockouts > 0).sum(1),
    }
    print(f"{args.policy} policy, {args.stores} stores x {args.days} days "
          f"({elapsed:.1f} s including compilation)")
    for name, v in rows.items():
        print(f"  {name:20s} {v.mean():12,.2f} ± {v.std():,.2f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="rbjax", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="print the catalogue summary")
    p.add_argument("--data", default=None, help="catalogue folder (default: the shipped data/hard_v2)")
    p.set_defaults(func=_info)
    p = sub.add_parser("run", help="run a baseline policy on a batch of stores and print the main metrics")
    p.add_argument("--policy", choices=["base_stock", "random"], default="base_stock")
    p.add_argument("--stores", type=int, default=64)
    p.add_argument("--days", type=int, default=180)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--progress", type=int, default=30, help="progress line every N days (0: none)")
    p.add_argument("--data", default=None)
    p.set_defaults(func=_run)
    args = ap.parse_args(argv)
    if getattr(args, "stores", 1) < 1 or getattr(args, "days", 1) < 1:
        ap.error("--stores and --days must be >= 1")
    args.func(args)


if __name__ == "__main__":
    main()

"""Command line.

  rbjax info                                   catalogue summary
  rbjax oracle --stores 1000 --days 180        the paper's oracle, main-table metrics beside the paper's row
  rbjax run --policy base_stock --stores 64    a baseline policy, same metrics
  rbjax train ppo --stores 2048 --steps 2000000 --out runs/ppo   PPO, one jit; checkpoint + learning curve
  rbjax eval --policy ppo --checkpoint runs/ppo --stores 128     a trained or shipped policy, same metrics
  rbjax sweep --multiplier 2,4,6 --shelf 30,40 --seeds 64 --out results/   CSV + PNG per metric
  rbjax bench [--quick]                        throughput profiler (tables and a plot in benchmarks/out)

Stores are sharded over all devices; on a CPU the host is split into one device per core (--devices).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

SWEEP_OPTIONS = {  # CLI flag -> sweep parameter
    "products_per_category": "products_per_category", "multiplier": "multiplier", "window": "window",
    "fallback_demand": "fallback_demand", "shelf": "shelf_capacity", "capacity": "capacity", "rent": "rent",
    "initial_funds": "initial_funds", "news_scale": "news_scale",
}


def _env(args):
    from rbjax.data import load_catalog
    from rbjax.env import Env
    from rbjax.config import EnvConfig

    catalog = load_catalog(args.data)
    env = Env(EnvConfig.from_catalog(catalog, grouping=args.grouping), catalog)
    return env, env.check_params(env.default_params().replace(horizon=np.int32(args.days)))


POLICIES = ("oracle", "base_stock", "s_S", "random", "ppo")


def _policy(args, env):
    from rbjax import policies
    if args.policy == "ppo":
        from rbjax.rl import ppo
        from rbjax.rl.train import load
        if not getattr(args, "checkpoint", None):
            raise SystemExit("rbjax: --policy ppo needs --checkpoint RUN_DIR (written by `rbjax train ppo`)")
        try:
            params, config = load(args.checkpoint, env)
        except (FileNotFoundError, ValueError) as e:
            raise SystemExit(f"rbjax: {e}")
        return ppo.make_policy(env.config.num_suppliers, config.hidden), params.replace(
            greedy=np.bool_(args.greedy))
    return {"oracle": (policies.oracle, policies.OracleParams.default()),
            "base_stock": (policies.base_stock, policies.BaseStockParams.default()),
            "s_S": (policies.s_S, policies.SSParams.default()),
            "random": (policies.random_policy, policies.RandomParams.default())}[args.policy]


def _info(args) -> None:
    from rbjax.data import load_catalog
    print(load_catalog(args.data))


def _run(args) -> None:
    import jax

    from rbjax.runners import metrics, paper
    from rbjax.runners.rollout import rollout

    env, params = _env(args)
    policy, policy_params = _policy(args, env)
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    start = time.perf_counter()
    rec, _ = rollout(env, policy, policy_params, params, keys, days=args.days, progress=args.progress)
    table = metrics.store_metrics(rec)
    elapsed = time.perf_counter() - start
    print(f"{args.policy} policy, {args.stores} stores x {args.days} days, categories {env.config.grouping} "
          f"({elapsed:.1f} s including compilation, {args.stores * args.days / elapsed:,.0f} store-days/s)")
    reference = paper.ORACLE if args.policy == "oracle" else paper.LLM_ROWS[paper.BEST_LLM]
    print(metrics.format_compare(metrics.compare(table, reference)))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        table.to_csv(os.path.join(args.out, f"{args.policy}_stores.csv"), index_label="store")
        if args.policy == "oracle":
            from rbjax.runners.plots import plot_net_worth
            fig = plot_net_worth(metrics.net_worth_paths(rec, float(params.initial_funds)), paper.ORACLE_NET_WORTH)
            fig.savefig(os.path.join(args.out, "oracle_net_worth.png"), dpi=120)
        print(f"wrote {args.out}")


def _parse_values(text: str, flag: str) -> list:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"rbjax sweep: --{flag.replace('_', '-')} needs comma-separated numbers, got {text!r}")
    return [int(v) if v.is_integer() else v for v in values]


def _sweep(args) -> None:
    from rbjax.runners.sweep import grid, sweep

    env, params = _env(args)
    policy, policy_params = _policy(args, env)
    values = {SWEEP_OPTIONS[k]: _parse_values(v, k) for k, v in vars(args).items() if k in SWEEP_OPTIONS and v}
    if not values:
        raise SystemExit("rbjax sweep: give at least one parameter to sweep, e.g. --multiplier 2,4,6")
    points = grid(**values)
    print(f"sweep: {len(points)} points x {args.seeds} seeds x {args.days} days", file=sys.stderr)
    result = sweep(env, policy, policy_params, params, points, seeds=args.seeds, days=args.days, key=args.seed,
                   batch_size=args.batch_size, progress=True)
    os.makedirs(args.out, exist_ok=True)
    result.table.to_csv(os.path.join(args.out, "sweep.csv"), index=False)
    flat = result.summary.copy()
    flat.columns = [f"{m}_{s}" for m, s in flat.columns]
    flat.to_csv(os.path.join(args.out, "summary.csv"))
    names = result.names
    for metric in ("final_net_worth", "total_sales", "survival_days"):
        fig = result.plot(metric, x=names[0], y=names[1] if len(names) > 1 else None)
        fig.savefig(os.path.join(args.out, f"{metric}.png"), dpi=120)
    best = result.summary[("final_net_worth", "mean")].idxmax()
    print(f"{result.store_days:,} store-days in {result.seconds:.1f} s "
          f"({result.store_days / result.seconds:,.0f} store-days/s, compilation included)")
    print(f"best mean final net worth: {result.summary[('final_net_worth', 'mean')].max():,.0f} at "
          f"{ {n: getattr(v, 'item', lambda: v)() for n, v in zip(names, np.atleast_1d(best))} }")
    print(f"wrote {args.out}/sweep.csv, summary.csv and final_net_worth/total_sales/survival_days.png")


def _bench(args) -> None:
    from pathlib import Path

    from rbjax.perf import bench
    n = len(__import__("jax").devices())
    if args.quick:   # a smoke test: one policy, one batch, no float64 run
        policies, batches, days, counts, module_batch, drift = ["null"], [2], 2, [n], 2, None
    else:
        policies, batches = list(bench.POLICIES), [int(b) for b in args.batches.split(",")]
        days, counts, module_batch, drift = args.days, sorted({1, n}), 1024, (16, 180)
    print(bench.run(policies, batches, days, counts, module_batch, drift, Path(args.out), quick=args.quick))
    print(f"wrote {args.out}/bench.md, bench.csv, modules.csv, bench.png")


def _train(args) -> None:
    from rbjax.rl.ppo import PPOConfig
    from rbjax.rl.train import train_ppo

    env, params = _env(args)
    try:
        config = PPOConfig(num_envs=args.stores, num_steps=args.rollout_days, total_steps=args.steps,
                           epochs=args.epochs, minibatches=args.minibatches, lr=args.lr, hidden=args.hidden,
                           ent_coef=args.ent_coef)
    except ValueError as e:
        raise SystemExit(f"rbjax train: {e}")
    init = None
    if args.init:
        from rbjax.rl.train import load
        try:
            init, trained = load(args.init, env)
        except (FileNotFoundError, ValueError) as e:
            raise SystemExit(f"rbjax train: --init: {e}")
        if trained.hidden != config.hidden:
            raise SystemExit(f"rbjax train: --init {args.init} has hidden={trained.hidden}; pass --hidden {trained.hidden}")
    result = train_ppo(env, params, config, seed=args.seed, out=args.out, every=args.progress, init=init)
    last = result.curve[result.curve.episodes > 0].tail(5)
    print(f"ppo: {config.num_updates} updates, {config.total_steps:,} store-days in {result.train_s:.0f} s "
          f"({result.store_days_per_s:,.0f} store-days/s, compile {result.compile_s:.0f} s); last episodes: "
          f"net worth {last.episode_net_worth.mean():,.0f}, survival {last.survival.mean():.2f}")
    print(f"wrote {args.out}/config.json, policy.msgpack, curve.csv, curve.png")


def _common(p, days=180) -> None:
    p.add_argument("--days", type=int, default=days)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--grouping", choices=["20", "ref19"], default="20",
                   help="categories: 20 (rbjax) or the reference's 19 labels")
    p.add_argument("--data", default=None, help="catalogue folder (default: the shipped data/hard_v2)")


def _use_compilation_cache(folder: str | None) -> None:
    """Point JAX's persistent compilation cache at ``folder`` (see ``--cache``)."""
    import jax
    folder = folder or os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "rbjax", "xla")
    if folder.lower() != "none":
        jax.config.update("jax_compilation_cache_dir", folder)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="rbjax", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="print the catalogue summary")
    p.add_argument("--data", default=None, help="catalogue folder (default: the shipped data/hard_v2)")
    p.set_defaults(func=_info)
    for name, policy, doc in (("oracle", "oracle", "run the paper's oracle and compare with the paper's row"),
                              ("run", None, "run a policy on a batch of stores and print the main metrics"),
                              ("eval", None, "evaluate a policy (a PPO checkpoint or a shipped one): main metrics")):
        p = sub.add_parser(name, help=doc)
        if policy is None:
            p.add_argument("--policy", choices=POLICIES, default="ppo" if name == "eval" else "base_stock")
            p.add_argument("--checkpoint", default=None, help="run folder of `rbjax train ppo` (--policy ppo)")
            p.add_argument("--greedy", action="store_true", help="ppo: the most likely action, not a sample")
        else:
            p.set_defaults(policy=policy)
        p.add_argument("--stores", type=int, default=1000 if policy else 64)
        p.add_argument("--progress", type=int, default=30, help="progress line every N days (0: none)")
        p.add_argument("--out", default=None, help="folder for the per-store CSV (and the oracle's net-worth plot)")
        _common(p)
        p.set_defaults(func=_run)
    p = sub.add_parser("sweep", help="sweep oracle / env parameters over a grid, times N seeds; writes CSV and PNG")
    p.add_argument("--policy", choices=["oracle", "base_stock", "random"], default="oracle")
    for flag in SWEEP_OPTIONS:
        p.add_argument(f"--{flag.replace('_', '-')}", dest=flag, default=None, metavar="V1,V2,...")
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=2048, help="stores per jitted call")
    p.add_argument("--out", default="results")
    _common(p)
    p.set_defaults(func=_sweep)
    p = sub.add_parser("train", help="train a learned baseline (PPO, one jit): checkpoint and learning curve")
    p.add_argument("algorithm", choices=["ppo"])
    from rbjax.rl.ppo import PPOConfig
    d = PPOConfig()
    p.add_argument("--stores", type=int, default=d.num_envs, help="stores trained in parallel")
    p.add_argument("--steps", type=int, default=d.total_steps, help="store-days of experience in total")
    p.add_argument("--rollout-days", type=int, default=d.num_steps, help="days per store between updates")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--minibatches", type=int, default=d.minibatches)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--ent-coef", type=float, default=d.ent_coef)
    p.add_argument("--progress", type=int, default=10, help="progress line every N updates (0: none)")
    p.add_argument("--init", default=None, metavar="RUN_DIR", help="continue from a checkpoint's weights")
    p.add_argument("--out", default="runs/ppo")
    _common(p)
    p.set_defaults(func=_train, devices=1)
    p = sub.add_parser("bench", help="throughput profiler: batch sizes x devices, module costs, floor kernel, "
                                     "float32 drift")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    p.add_argument("--batches", default="1,16,256,1024,4096,16384,65536")
    p.add_argument("--days", type=int, default=10)
    p.add_argument("--out", default="benchmarks/out")
    p.set_defaults(func=_bench)
    ap.add_argument("--devices", type=int, default=None,
                    help="CPU devices to split the host into (default: one per core; 1 disables sharding)")
    ap.add_argument("--cache", default=None, metavar="DIR",
                    help="persistent XLA compilation cache, so a repeated command skips compilation (default: "
                         "$JAX_COMPILATION_CACHE_DIR, else ~/.cache/rbjax/xla; 'none' turns it off; bench never "
                         "uses it, as it times compilation)")
    args = ap.parse_args(argv)
    if args.func is not _bench:
        _use_compilation_cache(args.cache)
    from rbjax.perf.devices import split_cpu
    try:
        if args.func is not _train:   # training is one jit on one device: keep XLA's multi-threaded kernels
            split_cpu(args.devices)
    except RuntimeError:   # called from a process that already runs JAX: keep its devices
        pass
    for name in ("stores", "days", "seeds", "batch_size"):
        if getattr(args, name, 1) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    args.func(args)


if __name__ == "__main__":
    main()

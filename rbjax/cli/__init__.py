"""Command line.

  rbjax info                                   catalogue summary
  rbjax oracle --stores 1000 --days 180        the paper's oracle, main-table metrics beside the paper's row
  rbjax run --policy base_stock --stores 64    a baseline policy, same metrics
  rbjax train ppo --stores 2048 --steps 2000000 --out runs/ppo   PPO, one jit; checkpoint + learning curve
  rbjax eval --policy ppo --checkpoint runs/ppo --stores 128     a trained or shipped policy, same metrics
  rbjax sweep --multiplier 2,4,6 --shelf 30,40 --seeds 64 --out results/   CSV + PNG per metric
  rbjax bench [--quick]                        throughput profiler (tables and a plot in benchmarks/out)
  rbjax agents run --model policy:oracle --stores 8 --days 30 --out runs/a   a policy through the agent tools

Stores are sharded over all devices; on a CPU the host is split into one device per core (--devices).
"""

from __future__ import annotations

import argparse
import os
import sys

from rbjax.cli import agents, bench, run, sweep, train
from rbjax.cli.common import add_env_flags, fail

POSITIVE = ("stores", "days", "seeds", "batch_size", "store_chunk", "max_tokens")
NONNEGATIVE = ("progress",)
MAX_STORES = 100_000_000  # a bound on --stores / --seeds: the per-store table alone would need ~100 GB


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``rbjax: ...``, exit status 2); ``--help`` still shows the usage."""

    def error(self, message):
        self.exit(2, f"rbjax: {message} (see rbjax --help)\n")


def _add_run_commands(sub) -> None:
    from rbjax.policies import NAMES

    for name, policy, doc in (
        ("oracle", "oracle", "run the paper's oracle and compare with the paper's row"),
        ("run", None, "run a policy on a batch of stores and print the main metrics"),
        ("eval", None, "evaluate a policy (a PPO checkpoint or a shipped one): main metrics"),
    ):
        p = sub.add_parser(name, help=doc)
        if policy is None:
            p.add_argument("--policy", choices=NAMES, default="ppo" if name == "eval" else "base_stock")
            p.add_argument(
                "--checkpoint", default=None, help="run folder of `rbjax train ppo` (--policy ppo)"
            )
            p.add_argument("--greedy", action="store_true", help="ppo: the most likely action, not a sample")
        else:
            p.set_defaults(policy=policy)
        p.add_argument("--stores", type=int, default=1000 if policy else 64)
        p.add_argument("--progress", type=int, default=30, help="progress line every N days (0: none)")
        p.add_argument(
            "--out", default=None, help="folder for the per-store CSV (and the oracle's net-worth plot)"
        )
        p.add_argument(
            "--records",
            action="store_true",
            help="with --out: also every per-day record (DayInfo [stores, days]) in records.npz",
        )
        p.add_argument(
            "--store-chunk",
            type=int,
            default=None,
            metavar="N",
            help="stores per jitted call (default: what fits in memory); more stores run chunk by chunk",
        )
        add_env_flags(p)
        p.set_defaults(func=run.main)


def _add_sweep(sub) -> None:
    p = sub.add_parser(
        "sweep", help="sweep oracle / env parameters over a grid, times N seeds; writes CSV and PNG"
    )
    p.add_argument("--policy", choices=["oracle", "base_stock", "random"], default="oracle")
    for flag in sweep.OPTIONS:
        p.add_argument(f"--{flag.replace('_', '-')}", dest=flag, default=None, metavar="V1,V2,...")
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument(
        "--batch-size", type=int, default=None, help="stores per jitted call (default: what fits in memory)"
    )
    p.add_argument("--out", default="results")
    add_env_flags(p)
    p.set_defaults(func=sweep.main)


def _add_train(sub) -> None:
    from rbjax.rl.ppo import PPOConfig

    d = PPOConfig()
    p = sub.add_parser("train", help="train a learned baseline (PPO, one jit): checkpoint and learning curve")
    p.add_argument("algorithm", choices=["ppo"])
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
    add_env_flags(p)
    p.set_defaults(func=train.main, devices=1)


def _add_bench(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="throughput profiler: batch sizes x devices, sub-step costs, floor kernel, float32 drift",
    )
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    p.add_argument(
        "--profile",
        action="store_true",
        help="instead: XLA's op-level trace of one oracle day at --stores stores (profile.md, profile.csv, trace/)",
    )
    p.add_argument("--stores", type=int, default=1024, help="--profile: stores in the profiled batch")
    p.add_argument("--batches", default="1,16,256,1024,4096,16384,65536")
    p.add_argument("--days", type=int, default=10)
    p.add_argument("--out", default="benchmarks/out")
    p.set_defaults(func=bench.main)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="rbjax", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="print the catalogue summary")
    p.add_argument("--data", default=None, help="catalogue folder (default: the shipped hard_v2 catalogue)")
    p.set_defaults(func=run.info)
    for add in (_add_run_commands, _add_sweep, _add_train, _add_bench, agents.add):
        add(sub)
    ap.add_argument(
        "--devices",
        type=int,
        default=None,
        help="CPU devices to split the host into (default: one per core; 1 disables sharding)",
    )
    ap.add_argument(
        "--cache",
        default=None,
        metavar="DIR",
        help="persistent XLA compilation cache, so a repeated command skips compilation (default: "
        "$JAX_COMPILATION_CACHE_DIR, else ~/.cache/rbjax/xla; 'none' turns it off; bench never "
        "uses it, as it times compilation)",
    )
    return ap


def _use_compilation_cache(folder: str | None) -> None:
    """Point JAX's persistent compilation cache at ``folder`` (see ``--cache``)."""
    import jax

    folder = (
        folder
        or os.environ.get("JAX_COMPILATION_CACHE_DIR")
        or os.path.join(os.path.expanduser("~"), ".cache", "rbjax", "xla")
    )
    if folder.lower() == "none":
        return
    try:
        os.makedirs(folder, exist_ok=True)
        writable = os.access(folder, os.W_OK)
    except OSError:
        writable = False
    if not writable:
        print(
            f"rbjax: --cache {folder} is not a writable folder; running without the compilation cache",
            file=sys.stderr,
        )
        return
    jax.config.update("jax_compilation_cache_dir", folder)


def _check_out(folder: str | None) -> None:
    """Create ``--out`` and check it is writable before any work is done."""
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, ".rbjax-write-test")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise fail(f"--out {folder}: not a writable folder ({e.strerror or e})") from None


def main(argv=None) -> None:
    ap = parser()
    args = ap.parse_args(argv)
    for name in POSITIVE:
        if getattr(args, name, None) is not None and getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in NONNEGATIVE:
        if getattr(args, name, None) is not None and getattr(args, name) < 0:
            ap.error(f"--{name} must be >= 0 (0: none), got {getattr(args, name)}")
    for name in ("stores", "seeds"):
        if getattr(args, name, None) is not None and getattr(args, name) > MAX_STORES:
            ap.error(f"--{name} must be at most {MAX_STORES:,}, got {getattr(args, name):,}")
    if getattr(args, "records", False) and not getattr(args, "out", None):
        ap.error("--records needs --out DIR (the folder records.npz is written to)")
    if args.func is bench.main:
        bench.check_batches(args.batches, ap.error)
    cores = os.cpu_count() or 1
    if args.devices is not None and not 1 <= args.devices <= cores:
        ap.error(f"--devices must be between 1 and the host's {cores} cores, got {args.devices}")
    if not 0 <= getattr(args, "seed", 0) < 2**32:
        ap.error(f"--seed must be in 0 .. 2**32 - 1, got {args.seed}")
    _check_out(getattr(args, "out", None))
    if args.func is not bench.main:
        _use_compilation_cache(args.cache)
    from rbjax.perf.devices import split_cpu

    try:
        if args.func not in (train.main, agents.main):  # one device: keep XLA's multi-threaded kernels
            split_cpu(args.devices)
    except RuntimeError:  # called from a process that already runs JAX: keep its devices
        pass
    args.func(args)


if __name__ == "__main__":
    main()

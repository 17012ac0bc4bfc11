"""PPO training speed against the engine's own, at the same batch and policy network, in one run.

    python benchmarks/ppo_speed.py [--stores 512] [--days 16] [--repeats 3] [--profile]

Times each piece jitted, best of ``--repeats`` calls after a compiling one (``rbjax.perf.profiling.time_call``):
- engine: T days of B stores under the PPO policy network (encode, forward, sample, decode, step), as
  ``rbjax.rollout`` runs a trained policy;
- collect: the update's T days (the same, plus the running statistics, log-probabilities, values and rewards);
- learn: GAE and the epochs of minibatch gradient steps;
- reset: refilling the pool with B fresh stores, which ``ppo.make_train`` does every ``pool_every`` updates;
- train: ``ppo.make_train`` itself over ``pool_every + 1`` and ``2 pool_every + 1`` updates; the first run pays
  the opening reset of B stores (about a reset's cost, which a run of hundreds of updates pays once), and the
  difference of the two, ``pool_every`` updates with one pool refill, is the steady state reported.
Writes ``ppo_speed.md`` and ``ppo_speed.csv`` into benchmarks/out (and, with ``--profile``, each part's kernels by
rbjax function: ``ppo_collect_profile.md``, ``ppo_learn_profile.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import jax
import numpy as np
import pandas as pd
from agent_tools import markdown_table

import rbjax
from rbjax.perf.op_profile import by_function, kernel_profile
from rbjax.perf.profiling import time_call
from rbjax.rl import ppo, ppo_policy
from rbjax.runners.rollout_programs import compiled

OUT = Path(__file__).parent / "out"


def profile_part(name: str, jitted, *args) -> str:
    """A part's kernels by rbjax function (``rbjax.perf.op_profile``), into ppo_{name}_profile.md/.csv."""
    program = jitted.lower(*args).compile()
    table = kernel_profile(
        program, lambda: jax.block_until_ready(program(*args)), 2, OUT / f"ppo_{name}_trace"
    )
    table.to_csv(OUT / f"ppo_{name}_profile.csv", index=False)
    by = by_function(table)
    by["share"] = (by.ms / by.ms.sum()).map("{:.1%}".format)
    by["ms"] = by.ms.map("{:.1f}".format)
    kinds = table.assign(
        kind=table.kernel.str.extract(r"^(dot|wrapped_reduce-window)", expand=False).fillna("other")
    )
    kinds = kinds.groupby("kind").ms.sum() / table.ms.sum()
    text = (
        f"{name}: {table.ms.sum():.0f} ms of kernel time an update in {len(table)} kernels; matrix products "
        f"{kinds.get('dot', 0):.0%}, long reductions (reduce-window) {kinds.get('wrapped_reduce-window', 0):.0%}\n\n"
        + markdown_table(by.head(12))
    )
    (OUT / f"ppo_{name}_profile.md").write_text(text)
    print(text, flush=True)
    return text


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=512)
    ap.add_argument("--days", type=int, default=16, help="days per update (PPOConfig.num_steps)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also write collect's and learn's kernel profiles (ppo_collect_profile.md, ppo_learn_profile.md)",
    )
    args = ap.parse_args(argv)
    rbjax.setup()
    env = rbjax.Env()
    env_params = env.default_params()
    B, T = args.stores, args.days
    base = ppo.PPOConfig(num_envs=B, num_steps=T)
    config = dataclasses.replace(base, total_steps=(base.pool_every + 1) * B * T)
    key = jax.random.key(0)
    keys = jax.random.split(key, B)
    policy = ppo.initial_policy(env, config, key)
    device = (jax.devices()[0],)
    parts = ppo.make_parts(env, config)

    reset = jax.jit(parts.reset)
    obs, state = reset(keys, env_params)
    t_reset = time_call(reset, keys, env_params, repeats=args.repeats)
    print(f"reset: {t_reset:.2f} s", flush=True)

    fn = ppo_policy.make_policy(env.config.num_suppliers, config.hidden, config.supplier_prior)
    _, chunk = compiled(env, fn, "summary", None, None, device)
    engine = lambda obs, state: chunk(policy, env_params, obs, state, keys, np.int32(0), T)
    t_engine = time_call(engine, obs, state, repeats=args.repeats, fresh=True)  # the chunk donates its state
    print(f"engine: {t_engine:.2f} s", flush=True)

    runner = ppo.initial_runner(env, config, key, env_params, policy)
    collect = jax.jit(parts.collect)
    t_collect = time_call(collect, runner, runner.pool, env_params, repeats=args.repeats)
    runner, (traj, _) = collect(runner, runner.pool, env_params)
    learn = jax.jit(parts.learn)
    t_learn = time_call(learn, runner, traj, repeats=args.repeats)
    print(f"collect: {t_collect:.2f} s, learn: {t_learn:.2f} s", flush=True)
    if args.profile:
        profile_part("collect", collect, runner, runner.pool, env_params)
        profile_part("learn", learn, runner, traj)

    # make_train over U and U + pool_every updates: the first includes the opening reset of B stores, which a
    # run of hundreds of updates pays once; the difference is pool_every updates with one refill, the steady
    # state a long run trains at
    runs = {}
    for updates in (config.num_updates, config.num_updates + config.pool_every):
        cfg = dataclasses.replace(config, total_steps=updates * B * T)
        runs[updates] = time_call(jax.jit(ppo.make_train(env, cfg)), key, env_params, policy, repeats=1)
    (u1, t1), (u2, t2) = runs.items()
    t_train = (t2 - t1) / (u2 - u1)
    print(f"train: {t1:.1f} s for {u1} updates, {t2:.1f} s for {u2}", flush=True)

    days = B * T
    rows = [
        ("engine (PPO policy, no training)", t_engine),
        ("collect (the update's days)", t_collect),
        ("learn (GAE and epochs)", t_learn),
        (f"reset (pool refill, per update: 1/{config.pool_every})", t_reset / config.pool_every),
        (f"train, first {u1} updates (opening reset included)", t1 / u1),
        (f"train, steady state (updates {u1 + 1}-{u2}, one refill)", t_train),
    ]
    table = pd.DataFrame(rows, columns=["part", "s_per_update"])
    table["store_days_per_s"] = days / table["s_per_update"]
    table["share_of_train"] = table["s_per_update"] / t_train
    table.loc[table.part.str.startswith("train, first"), "share_of_train"] = np.nan  # not a part of an update
    ratio = t_engine / t_train
    OUT.mkdir(exist_ok=True)
    table.to_csv(OUT / "ppo_speed.csv", index=False)
    md = (
        f"PPO at {B} stores x {T} days an update, {config.epochs} epochs x {config.minibatches} minibatches, "
        f"hidden {config.hidden}; {jax.devices()[0].platform}, {len(jax.devices())} device(s)\n\n"
        + markdown_table(
            table.assign(
                s_per_update=table.s_per_update.map("{:.3f}".format),
                store_days_per_s=table.store_days_per_s.map("{:,.0f}".format),
                share_of_train=table.share_of_train.map(lambda x: "" if np.isnan(x) else f"{x:.0%}"),
            )
        )
        + f"\n\n**training / engine throughput: {ratio:.2f}** at the steady state (target 0.5); "
        f"{t_engine / (t1 / u1):.2f} over the first {u1} updates\n"
    )
    (OUT / "ppo_speed.md").write_text(md)
    print(md)
    return table


if __name__ == "__main__":
    main()

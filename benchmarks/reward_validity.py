"""Does the task reward measure decisions? Policies scored as tasks (``rbjax lm tasks``) against the truth.

For each snapshot day D of a slices folder (a 180-day oracle run: ``rbjax run --policy oracle --stores 64
--save-states DIR --every 30``), each open store is a task: N decided days from the morning of D, then K days
of the reference (the oracle) as its continuation. Each policy plays every task; its reward is the task
reward of ``rbjax.lm.rewards`` (relative: (G - R) / scale, G and R the net-worth gains over N + K days, scale
max(|R|, rent x (N + K))). The truth the reward stands for: each policy's final net worth when it runs the rest
of the episode from the snapshot.

Policies: the registry's ``null``, ``random``, ``base_stock``, ``s_S``, ``oracle``, and two that mimic a poor
language model: ``never_orders`` (the oracle's prices and shelf, no order) and ``prices_x3`` (the oracle's
orders and shelf; on the first decided day every price x3, then kept).

Per policy and horizon N (with the default K, ``--tail``): the share of tasks where the policy beats the
reference (G > R), the reward's mean and standard deviation; per horizon: the share of tasks where ``random``
scores below ``null``, the Spearman rank correlation between the policies' rewards and their truths per task
(averaged over tasks), and the spread of the rewards across policies on one task (median over tasks of max -
min). A second table sweeps K: the null-beats-reference share and the rank correlation per (N, K).

How it is computed: a task's N + K days are played by ``continuation.rollout_from`` (one ``lax.scan`` over the
days, every task of a snapshot day in one batch) with a policy that plays the policy under test until the
morning of D + N and the oracle from then on: one program per policy (the switch day is a traced parameter).
A session's store runs the same days through the tools on the agent engine, which ``rollout`` matches bit for
bit (``rbjax.agents.runs.policy``) up to the last float bits of some sums (two XLA programs); the sessions'
own test (tests/lm/test_sessions.py) checks that the reference with its continuation scores exactly 0 there.
One rollout per (policy, N) gives the reward for every K at once (the net worth on the morning D + N + K).

    python benchmarks/reward_validity.py --slices benchmarks/out/oracle180 --at 30,60,90,120 \\
        [--stores 64] [--horizons 1,3,7,14] [--tails 0,3,7,14,21,30,45] [--tail 14] [--out benchmarks/out]

The validity report of the task sets (the panel's headroom, flat groups, fresh futures, per-day credit) is
``task_validity.py``'s, which builds on this module.

Writes reward_validity.csv (one row per task, policy, N, K: gain, reference gain, reward, truth) and prints
the two markdown tables (docs/lm_training.md keeps them).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rbjax import policies
from rbjax.config import EPISODE_DAYS
from rbjax.env import make_env
from rbjax.files import snapshots
from rbjax.files.slices_folder import open_slices_folder, read_manifest
from rbjax.lm import rewards
from rbjax.lm.panel import full  # both policies' actions in one pytree structure
from rbjax.runners import continuation

REGISTRY = ("null", "random", "base_stock", "s_S", "oracle")
MIMICS = ("never_orders", "prices_x3")
DAYS_PER_CALL = 30  # every rollout is a multiple of this, so each policy compiles one day program


def never_orders(oracle_params, obs, privileged, key):
    """A poor manager: the oracle's prices and shelf, and never an order."""
    a = policies.POLICIES["oracle"].fn(oracle_params, obs, privileged, key)
    return a.replace(order=jnp.zeros_like(a.order))


def prices_x3(params, obs, privileged, key):
    """A poor manager: the oracle's orders and shelf; on the first decided day (``params[1]``) every price
    x3, kept from then on."""
    oracle_params, first = params
    a = full(policies.POLICIES["oracle"].fn(oracle_params, obs, privileged, key), obs.prices)
    raise_now = obs.day == first
    return a.replace(
        price=jnp.where(raise_now, 3.0 * obs.prices, obs.prices),
        set_price=jnp.full_like(a.set_price, raise_now),
    )


def policy_under_test(name: str, env):
    """(policy, params maker): ``params(first_day)`` gives the policy's params for tasks from ``first_day``."""
    if name in REGISTRY:
        fn, p = policies.make(name, env)
        return fn, lambda first: p
    oracle_params = policies.make("oracle", env)[1]
    if name == "never_orders":
        return never_orders, lambda first: oracle_params
    return prices_x3, lambda first: (oracle_params, jnp.int32(first))


def switching(policy):
    """A policy that plays ``policy`` on the mornings before ``switch_day`` and the oracle from then on.
    params: (policy's params, the oracle's params, switch_day [] int32)."""
    oracle = policies.POLICIES["oracle"].fn

    def play(params, obs, privileged, key):
        own, oracle_params, switch_day = params
        mine = full(policy(own, obs, privileged, key), obs.prices)
        ref = full(oracle(oracle_params, obs, privileged, key), obs.prices)
        return jax.tree.map(lambda m, r: jnp.where(obs.day < switch_day, m, r), mine, ref)

    return play


def net_worths(env, snap, play, params, day: int, days: int) -> np.ndarray:
    """[S, days + 1] the net worth of each snapshot store on the mornings day .. day + days (float64)."""
    rec, _ = continuation.rollout_from(
        env,
        play,
        params,
        snap.env_params(env),
        snap.state,
        snap.keys,
        day,
        days,
        days_per_call=DAYS_PER_CALL,
    )
    start = np.asarray(snap.state.net_worth, np.float64)[:, None]
    return np.concatenate([start, np.asarray(rec.net_worth, np.float64)], axis=1)


def run_day(env, snap, day: int, horizons, tails, plays: dict, horizon_days: int) -> pd.DataFrame:
    """The rows of every task of one snapshot day: (store, policy, N, K, gain, reference gain, reward, truth,
    then_oracle). truth: the store's final net worth under the policy alone; then_oracle: under the policy for
    the N decided days and the oracle to the episode's end (the reward's limit as K grows)."""
    rent = float(snap.env_params(env).rent)
    open_ = ~np.asarray(snap.state.done, bool)
    oracle_params = policies.make("oracle", env)[1]
    rest = horizon_days - day
    rows = []
    for name, (play, make_params) in plays.items():
        t0 = time.perf_counter()
        truth = net_worths(env, snap, play, (make_params(day), oracle_params, jnp.int32(10**6)), day, rest)
        truth_final = truth[:, -1]
        for n in horizons:
            nw = net_worths(env, snap, play, (make_params(day), oracle_params, jnp.int32(day + n)), day, rest)
            for k in tails:
                if n + k > rest:
                    continue
                for s in np.flatnonzero(open_):
                    rows.append(
                        dict(
                            day=day,
                            store=int(s),
                            policy=name,
                            days=n,
                            tail=k,
                            gain=nw[s, n + k] - nw[s, 0],
                            truth=truth_final[s],
                            then_oracle=nw[s, -1],
                        )
                    )
        print(f"day {day}: {name} in {time.perf_counter() - t0:.1f} s", flush=True)
    table = pd.DataFrame(rows)
    ref = table[table.policy == "oracle"].set_index(["day", "store", "days", "tail"])["gain"]
    table["reference_gain"] = ref.reindex(
        pd.MultiIndex.from_frame(table[["day", "store", "days", "tail"]])
    ).to_numpy()
    table["scale"] = [
        rewards.scale(r, rent, n + k) for r, n, k in zip(table.reference_gain, table["days"], table["tail"])
    ]
    table["reward"] = (table.gain - table.reference_gain) / table.scale
    return table


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant."""
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def per_task(table: pd.DataFrame) -> pd.DataFrame:
    """Per (N, K, task): the rank correlation of rewards and truths across policies, the rewards' spread
    (max - min), and whether random scored below null."""
    out = []
    for (n, k, day, store), g in table.groupby(["days", "tail", "day", "store"]):
        r = g.set_index("policy")["reward"]
        out.append(
            dict(
                days=n,
                tail=k,
                day=day,
                store=store,
                rho=spearman(g.reward.to_numpy(), g.truth.to_numpy()),
                rho_limit=spearman(g.reward.to_numpy(), g.then_oracle.to_numpy()),
                spread=r.max() - r.min(),
                random_below_null=float(r.get("random", np.nan) < r.get("null", np.nan)),
            )
        )
    return pd.DataFrame(out)


def tables(table: pd.DataFrame, tail: int) -> str:
    """The markdown tables: the truths; per policy and horizon at K = ``tail``; per horizon; the sweep over
    K."""
    tasks = per_task(table)
    first = table[(table["days"] == table["days"].min()) & (table["tail"] == 0)]
    lines = [
        f"K = {tail} days of continuation; {table.groupby(['day', 'store']).ngroups} tasks per horizon "
        f"(snapshot days {', '.join(map(str, sorted(table.day.unique())))})",
        "",
        "| policy | final net worth, the policy alone (mean) |",
        "|---|---:|",
    ]
    for name, g in first.groupby("policy"):
        lines.append(f"| {name} | {g.truth.mean():,.0f} |")
    lines += [
        "",
        "| N | policy | beats the reference | reward, mean | reward, sd |",
        "|---:|---|---:|---:|---:|",
    ]
    at = table[table["tail"] == tail]
    for (n, name), g in at.groupby(["days", "policy"], sort=True):
        lines.append(
            f"| {n} | {name} | {(g.gain > g.reference_gain).mean():.1%} | {g.reward.mean():+.4f} | "
            f"{g.reward.std():.4f} |"
        )
    lines += [
        "",
        "| N | random below null | null beats the oracle, N days then the oracle to the end | rank correlation "
        "with the truth | with N days then the oracle | policies' means | spread |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, g in tasks[tasks["tail"] == tail].groupby("days"):
        here = at[at["days"] == n]
        means = here.groupby("policy")[["reward", "truth"]].mean()
        limit = here.pivot_table(index=["day", "store"], columns="policy", values="then_oracle")
        lines.append(
            f"| {n} | {g.random_below_null.mean():.1%} | {(limit['null'] > limit['oracle']).mean():.1%} | "
            f"{g.rho.mean():.3f} | {g.rho_limit.mean():.3f} | "
            f"{spearman(means.reward.to_numpy(), means.truth.to_numpy()):.3f} | {g.spread.median():.3f} |"
        )
    lines += [
        "",
        "| N | K | null beats the reference | rank correlation with the truth | with N days then the oracle | "
        "spread |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    null = table[table.policy == "null"]
    for (n, k), g in tasks.groupby(["days", "tail"]):
        nb = null[(null["days"] == n) & (null["tail"] == k)]
        lines.append(
            f"| {n} | {k} | {(nb.gain > nb.reference_gain).mean():.1%} | {g.rho.mean():.3f} | "
            f"{g.rho_limit.mean():.3f} | {g.spread.median():.3f} |"
        )
    lines.append(
        "\nspread: the median over tasks of the largest reward less the smallest, across the policies"
    )
    return "\n".join(lines)


def main(argv=None) -> None:
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slices", help="a slices folder of a 180-day run")
    p.add_argument("--at", default="30,60,90,120", help="snapshot days")
    p.add_argument(
        "--stores", type=int, default=None, help="the first N stores of each snapshot (default: all)"
    )
    p.add_argument("--horizons", default="1,3,7,14")
    p.add_argument("--tails", default="0,3,7,14,21,30,45")
    p.add_argument("--tail", type=int, default=14, help="the K of the first table")
    p.add_argument("--policies", default=",".join(REGISTRY + MIMICS))
    p.add_argument("--out", default="benchmarks/out")
    p.add_argument(
        "--tables", metavar="CSV", help="only print the tables of an earlier run's reward_validity.csv"
    )
    args = p.parse_args(argv)
    if args.tables:
        print(tables(pd.read_csv(args.tables, keep_default_na=False), args.tail))
        return
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    manifest = read_manifest(args.slices)
    env, _ = make_env(
        data=manifest.get("data"),
        grouping=manifest["grouping"],
        supplier_attempts=manifest["supplier_attempts"],
        days=manifest.get("days", EPISODE_DAYS),
    )
    os.makedirs(args.out, exist_ok=True)
    plays = {}  # one program per policy, whatever the day
    for name in args.policies.split(","):
        fn, make_params = policy_under_test(name, env)
        plays[name] = (switching(fn), make_params)
    parts, start = [], time.perf_counter()
    for day in ints(args.at):
        snap = snapshots.load(open_slices_folder(args.slices, day).path, env)
        if args.stores:
            first = lambda x: x[: args.stores]  # noqa: E731
            snap = dataclasses.replace(
                snap, state=jax.tree.map(first, snap.state), keys=snap.keys[: args.stores]
            )
        horizon_days = int(snap.env_params(env).horizon)
        parts.append(run_day(env, snap, day, ints(args.horizons), ints(args.tails), plays, horizon_days))
    table = pd.concat(parts, ignore_index=True)
    table.to_csv(os.path.join(args.out, "reward_validity.csv"), index=False)
    print(tables(table, args.tail))
    print(f"\n{time.perf_counter() - start:.0f} s, compilation included")


if __name__ == "__main__":
    main()

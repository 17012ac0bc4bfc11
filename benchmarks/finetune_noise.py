"""What stands between a fine-tune and its gain: the spread of the return one choice is judged by.

    python benchmarks/finetune_noise.py [--stores 32]

For each shipped student (the belief student, the privileged one), ``--stores`` openings (seed 5) are played for
180 days by the fine-tune's behaviour policy (``FinetuneConfig().temperature``) three times: twice on the same
market draws (the fine-tune's two copies, ``rbjax.rl.finetune.experience.collect``) and once on other draws. It
reports the spread of the final net worth across stores, the spread of the difference between the two copies and
between a copy and the other draws, the share of days the copies choose differently, and the spread of the
difference of their discounted returns from each day (what the fine-tune's paired advantage is made of, before
its critic). Writes benchmarks/results/finetune_noise.json.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import numpy as np

import rbjax
from rbjax.rl.finetune import experience
from rbjax.rl.finetune import update as U
from rbjax.rl.finetune.recipe import FinetuneConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorded import provenance, write  # noqa: E402


def spread(env, params, name: str, stores: int, days: int = 180) -> dict:
    """The spreads above for the shipped student ``name`` on ``stores`` openings."""
    student, sp = rbjax.policies.make(name, env)
    config = FinetuneConfig()
    pool = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(jax.random.key(5), stores), params
    )

    def play(keys, copies):
        return experience.collect(env, student, sp, sp, config.temperature, params, pool, keys, days, copies)

    play = jax.jit(play, static_argnums=1)
    paired = play(jax.random.split(jax.random.key(6), stores), 2)
    other = np.asarray(play(jax.random.split(jax.random.key(7), stores), 1).final, np.float64)
    final = np.asarray(paired.final, np.float64).reshape(stores, 2)
    choice = np.asarray(paired.mornings.choice).reshape(days, stores, 2)
    ret = np.asarray(U.discounted_returns(paired.reward, paired.alive, config.gamma), np.float64)
    ret = ret.reshape(days, stores, 2)
    return dict(
        final_net_worth_sd=float(final[:, 0].std(ddof=1)),
        same_market_difference_sd=float((final[:, 0] - final[:, 1]).std(ddof=1)),
        other_market_difference_sd=float((final[:, 0] - other).std(ddof=1)),
        days_choosing_differently=float((choice[..., 0] != choice[..., 1]).mean()),
        return_sd=float(ret.std(ddof=1)),
        paired_return_difference_sd=float((ret[..., 0] - ret[..., 1]).std(ddof=1)),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=32)
    args = ap.parse_args()
    rbjax.setup(cache="none")
    source = provenance(sys.argv, "benchmarks/finetune_noise.py")
    env = rbjax.Env()
    params = env.default_params()
    students = {name: spread(env, params, name, args.stores) for name in ("distilled_belief", "distilled")}
    for name, s in students.items():
        print(name, {k: round(v, 3) for k, v in s.items()})
    write(
        "finetune_noise",
        dict(**source, stores=args.stores, temperature=FinetuneConfig().temperature, students=students),
    )


if __name__ == "__main__":
    main()

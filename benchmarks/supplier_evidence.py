"""Where the oracle's lead comes from: its rule with the hidden views replaced by what an agent can see.

    python benchmarks/supplier_evidence.py [--seeds 128] [--checkpoint checkpoints/ppo_hard_v2]

The oracle (``rbjax.policies.oracle``) reads two hidden things: each supplier's quality and the day's news
effects. Each row runs the same rule over the same ``--seeds`` evaluation seeds (those of
``benchmarks/baselines.py``) x 180 days with one of them replaced: no news (effects 0), and the supplier picked by
an observable stand-in instead of the hidden quality (the cheapest quote, the dearest, the suppliers' ratings,
their return rates, or ``rl.actions.supplier_score``), and one more hidden rule: the cheapest supplier of
quality at least 4. With ``--checkpoint``, the greedy PPO policy's own
supplier choice is replaced the same way (its prices, orders and shelf unchanged). Writes
benchmarks/out/supplier_evidence.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import rbjax
from rbjax import policies
from rbjax.policies.oracle import best_supplier
from rbjax.results import metrics
from rbjax.rl import actions as A
from rbjax.rl import ppo_policy
from rbjax.rl.train import load
from rbjax.state import Privileged

OUT = Path(__file__).parent / "out"
EVAL_KEY = 1_000_003  # benchmarks/baselines.py's evaluation seeds
GOOD_QUALITY = 4.0  # a quality this high returns at most 5 % of units (docs/model.md, "Returns and reviews")

STAND_INS = {  # name -> [J, K] score, higher = picked (ties: the cheaper quote)
    "hidden quality": lambda obs, hidden: hidden.quote_quality,
    # every supplier of quality >= 4 ties at 5, so the cheapest of them is picked (none: the best quality)
    "hidden quality >= 4, the cheapest": lambda obs, hidden: jnp.where(
        hidden.quote_quality >= GOOD_QUALITY, 5.0, hidden.quote_quality
    ),
    "cheapest quote": lambda obs, hidden: jnp.zeros_like(obs.quote_price),
    "dearest quote": lambda obs, hidden: obs.quote_price,
    "supplier rating": lambda obs, hidden: obs.supplier_rating,
    "supplier return rate (lowest)": lambda obs, hidden: -obs.supplier_return_rate,
    "`supplier_score`": lambda obs, hidden: A.supplier_score(obs),
}


def oracle_with(stand_in, news: bool):
    rule, _ = policies.make("oracle")

    def policy(params, obs, hidden, key):
        zero = jnp.zeros_like(hidden.news_need)
        view = Privileged(
            quote_quality=stand_in(obs, hidden),
            news_need=hidden.news_need if news else zero,
            news_supply=hidden.news_supply if news else zero,
        )
        return rule(params, obs, view, key)

    return policy


def ppo_with(env, checkpoint, stand_in):
    """The greedy PPO policy of ``checkpoint`` with its supplier replaced by the stand-in's best (None: its own)."""
    params, config = load(checkpoint, env)
    net = ppo_policy.network(env.config.num_suppliers, config.hidden)

    def policy(p, obs, hidden, key):
        choice = A.mode(ppo_policy.policy_heads(net, p, obs, config.supplier_prior))
        if stand_in is not None:
            supplier, _ = best_supplier(stand_in(obs, hidden), obs.quote_price)
            choice = choice.replace(supplier=supplier.astype(jnp.int32))
        return A.decode(choice, obs)

    return policy, params


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=128)
    ap.add_argument("--checkpoint", default=str(rbjax.PPO_CHECKPOINT), help="PPO run folder ('' to skip)")
    args = ap.parse_args(argv)
    env = rbjax.Env()
    params = env.default_params()
    keys = jax.random.split(jax.random.key(EVAL_KEY), args.seeds)
    _, oracle_params = policies.make("oracle")
    runs = [("oracle", "hidden quality, news", oracle_with(STAND_INS["hidden quality"], True), oracle_params)]
    runs += [
        ("oracle", f"{name}, no news", oracle_with(fn, False), oracle_params)
        for name, fn in STAND_INS.items()
    ]
    if args.checkpoint:
        runs += [("PPO greedy", "its own choice", *ppo_with(env, args.checkpoint, None))]
        runs += [
            ("PPO greedy", name, *ppo_with(env, args.checkpoint, STAND_INS[name]))
            for name in ("hidden quality", "supplier rating", "`supplier_score`")
        ]
    lines = [
        "| policy | supplier picked by | final net worth | survives 180 d | return ratio | total sales |",
        "|---|---|---|---|---|---|",
    ]
    for policy_name, view, policy, policy_params in runs:
        start = time.perf_counter()
        rec, _ = rbjax.rollout(env, policy, policy_params, params, keys, days=180)
        t = metrics.store_metrics(rec)
        se = t.final_net_worth.std() / np.sqrt(len(t))
        row = (
            f"| {policy_name} | {view} | {t.final_net_worth.mean():,.0f} ± {se:,.0f} | "
            f"{100 * (t.survival_days >= 180).mean():.1f} % | {t.return_ratio.mean():.4f} | "
            f"{t.total_sales.mean():,.0f} |"
        )
        print(f"{row}  ({time.perf_counter() - start:.0f} s)", flush=True)
        lines.append(row)
    lines.append(
        f"\nMeans ± standard errors over {args.seeds} evaluation seeds x 180 days, the default worlds."
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "supplier_evidence.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT / 'supplier_evidence.md'}")


if __name__ == "__main__":
    main()

"""Where the oracle's expired units come from (``docs/results.md``, "The oracle's expired units").

    python benchmarks/expiry.py [--stores 256]

Runs the oracle for 180 days under each candidate cause changed one at a time, and decomposes the expired units
by day of the episode, by shelf life and against the quantity ordered. The candidates:
- ``rbjax``: the default engine (the supplier selection among 50 attempts);
- ``one supplier attempt``: the generator without the selection step (``EnvConfig(supplier_attempts=1)``);
- ``history at the store's demand level``: the pre-opening sales window the oracle reads on day 1 scaled to the
  demand the same products meet in the store (the ratio of the oracle's day-31 to day-1 demand estimates,
  measured on the default run);
- ``oracle on its own records``: ``OracleParams(opening_history=False)``, the oracle does not read the
  pre-opening sales records, so it starts from its fallback demand of 10 units a day and learns from its own
  sales.

Writes benchmarks/out/expiry.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rbjax import Env, rollout
from rbjax.policies import OracleParams, oracle
from rbjax.policies.estimates import price_and_demand
from rbjax.policies.oracle import best_supplier

OUT = Path(__file__).parent / "out"
WINDOWS = ((0, 30), (30, 60), (60, 120), (120, 180))
PAPER_EXPIRED, PAPER_SALES = 0.0059, 267_998


class HistoryScaled(Env):
    """The default engine whose opening sales window holds ``scale`` x the simulated units (a record stays a
    record: at least 1 unit)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def _reset(self, key, params, records):
        obs, state = super()._reset(key, params, records)
        units = state.sales.units
        scaled = jnp.where(units > 0, jnp.maximum(jnp.round(units * self.scale), 1), 0).astype(units.dtype)
        state = state.replace(
            sales=state.sales.replace(units=scaled if self.scale > 0 else jnp.zeros_like(units))
        )
        return self.observe(state, params), state


def demand_estimates(env, params, keys, days):
    """([stores, J] the oracle's demand estimate d-hat on the morning after ``days`` days (0: the opening
    morning), [stores, J] the shelf that morning)."""
    policy_params = OracleParams.default()
    if days == 0:
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    else:
        _, state = rollout(env, oracle, policy_params, params, keys, days=days)
        obs = jax.vmap(env.observe, in_axes=(0, None))(state, params)
    privileged = jax.vmap(env.privileged, in_axes=(0, None))(state, params)
    _, cost = jax.vmap(best_supplier)(privileged.quote_quality, obs.quote_price)
    window = policy_params.window
    _, d_hat, _ = jax.vmap(lambda p, u, c: price_and_demand(p, u, c, window))(
        obs.sales_price, obs.sales_units, cost
    )
    return np.asarray(d_hat), np.asarray(state.shelf)


def run(name, env, policy_params, params, keys):
    start = time.perf_counter()
    rec, _ = rollout(env, oracle, policy_params, params, keys, days=180, records="full")
    r = jax.tree.map(np.asarray, rec)
    sold, expired, ordered = (x.astype(np.float64) for x in (r.sold, r.expired, r.ordered))  # [S, T, J]
    per_store = expired.sum((1, 2)) / (sold.sum((1, 2)) + expired.sum((1, 2)))
    life = np.asarray(params.shelf_life)
    out = dict(
        name=name,
        ratio=per_store,
        sales=sold.sum((1, 2)),
        seconds=time.perf_counter() - start,
        windows=[],
        lives={},
        expired_total=expired.sum(),
    )
    for lo, hi in WINDOWS:
        e, s, o = expired[:, lo:hi].sum(), sold[:, lo:hi].sum(), ordered[:, lo:hi].sum()
        out["windows"].append((e / (e + s), e / expired.sum(), o / s))
    for L in np.unique(life):
        m = life == L
        e, s = expired[..., m].sum(), sold[..., m].sum()
        out["lives"][int(L)] = (int(m.sum()), e / max(e + s, 1), e / expired.sum())
    return out


def table(results):
    fmt = lambda x: f"{x.mean():.4f} ± {x.std():.4f}"
    lines = [
        "| variant | expired ratio (mean ± sd) | median | total sales | "
        + " | ".join(f"days {lo}-{hi}: ratio, share, ordered/sold" for lo, hi in WINDOWS)
        + " |",
        "|---|---|---|---|" + "---|" * len(WINDOWS),
    ]
    for r in results:
        cells = " | ".join(f"{a:.4f}, {100 * b:.0f} %, {c:.2f}" for a, b, c in r["windows"])
        lines.append(
            f"| {r['name']} | {fmt(r['ratio'])} | {np.median(r['ratio']):.4f} | {r['sales'].mean():,.0f} | {cells} |"
        )
    lines.append(f"| paper (one run) | {PAPER_EXPIRED} | | {PAPER_SALES:,} |" + " |" * len(WINDOWS))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    env = Env()
    params = env.default_params()
    first, _ = demand_estimates(env, params, keys, 0)
    later, shelf = demand_estimates(env, params, keys, 30)  # the managed products are on the shelf by then
    managed = shelf & (first > 0) & (later > 0)
    scale = later[managed].sum() / first[managed].sum()
    per_product = later[managed] / first[managed]
    default = OracleParams.default()
    variants = [
        ("rbjax", env, default),
        ("one supplier attempt", Env(dataclasses.replace(env.config, supplier_attempts=1)), default),
        (f"history at the store's demand level (x{scale:.2f})", HistoryScaled(scale), default),
        ("oracle on its own records", env, default.replace(opening_history=jnp.bool_(False))),
    ]
    results = [run(name, e, policy, params, keys) for name, e, policy in variants]
    base = results[0]
    lines = [
        f"# The oracle's expired units ({args.stores} stores x 180 days, seed {args.seed})",
        "",
        "Demand estimate of the managed products, day 31 against the opening morning (d-hat from the sales window):",
        f"aggregate {scale:.3f}, per product median {np.median(per_product):.3f} "
        f"(5-95 %: {np.percentile(per_product, 5):.3f}-{np.percentile(per_product, 95):.3f}).",
        "",
        *table(results),
        "",
        "By shelf life (rbjax): products, expired ratio, share of the expired units",
        "",
        "| shelf life (days) | products | expired ratio | share of expired |",
        "|---|---|---|---|",
        *(
            f"| {L} | {n} | {ratio:.4f} | {100 * share:.0f} % |"
            for L, (n, ratio, share) in base["lives"].items()
        ),
        "",
        "Seeds at or below the paper's 0.0059 (rbjax): "
        f"{100 * (base['ratio'] <= PAPER_EXPIRED).mean():.1f} %.",
    ]
    text = "\n".join(lines) + "\n"
    OUT.mkdir(exist_ok=True)
    (OUT / "expiry.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

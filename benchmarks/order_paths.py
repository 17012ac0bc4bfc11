"""The day's orders through ``Action.order`` and the same orders as ``Action.lines``: same records, what each costs.

    python benchmarks/order_paths.py [--stores 1024] [--days 20] [--pairs 5]

A policy returns a dense [J, K] order; the agent tools place a list of lines (``OrderLines``, several orders of
one product and supplier, multi-line orders). Both forms go through one implementation: ``orders.from_order``
and ``orders.from_lines`` lay them out by product (``orders.Slots``), ``orders.book`` pays and
``orders.place`` places them. This script turns the oracle's dense order into its J x K single-line orders
(``orders.as_lines``) for every store of a batch (the oracle's state after ``--days`` days), checks that the
two forms give the same day bit for bit, and times ``Env.step`` and the ``act`` sub-step through each form
(alternating pairs, one process): the lines form adds the layout's scatters. Writes
benchmarks/out/order_paths.md.
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
from rbjax.model import day, orders

OUT = Path(__file__).parent / "out"


def as_lines(env, key, state, action):
    """``action`` with its dense order as J x K single-line orders (``orders.as_lines``)."""
    lines = orders.as_lines(action.order, env.lead_days(key, state), action.order_rank)
    return action.replace(order=jnp.zeros_like(action.order), lines=lines)


def timed(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=1024)
    ap.add_argument("--days", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args(argv)
    env = rbjax.Env()
    params = env.default_params()
    oracle, oracle_params = policies.make("oracle")
    keys = jax.random.split(jax.random.key(0), args.stores)
    _, state = rbjax.rollout(env, oracle, oracle_params, params, keys, days=args.days)
    state = jax.tree.map(jnp.asarray, state)

    def morning(key, state):
        obs = env.observe(state, params)
        action = oracle(oracle_params, obs, env.privileged(state, params), key)
        return action, as_lines(env, key, state, action)

    step_keys = jax.random.split(jax.random.key(1), args.stores)
    dense, lines = jax.jit(jax.vmap(morning))(step_keys, state)
    step = jax.jit(jax.vmap(lambda k, s, a: env.step(k, s, a, params)))  # obs, state, reward, ..., info
    k_lead = jax.vmap(lambda k: step_keys(k)[0])(step_keys)  # the key Env.step gives act
    act = jax.jit(jax.vmap(lambda s, a, k: day.act(s, a, params, k, env.config)[0]))

    same = jax.tree.map(
        lambda a, b: bool(jnp.array_equal(a, b)), step(step_keys, state, dense), step(step_keys, state, lines)
    )
    identical = all(jax.tree.leaves(same))
    print(
        f"the day through Action.order and through Action.lines: {'bit-identical' if identical else 'DIFFERENT'}"
    )
    timed(act, state, dense, k_lead), timed(act, state, lines, k_lead)  # compile both
    times = {name: [] for name in ("step, order", "step, lines", "act, order", "act, lines")}
    for _ in range(args.pairs):
        times["step, order"].append(timed(step, step_keys, state, dense))
        times["step, lines"].append(timed(step, step_keys, state, lines))
        times["act, order"].append(timed(act, state, dense, k_lead))
        times["act, lines"].append(timed(act, state, lines, k_lead))
    med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    rows = [
        f"| {name} | {med[name]:.1f} | {min(times[name]) * 1e3:.1f} | {max(times[name]) * 1e3:.1f} |"
        for name in times
    ]
    ratio = lambda a, b: np.median(np.asarray(times[a]) / np.asarray(times[b]))
    text = "\n".join(
        [
            f"{args.stores} stores, the oracle's state after {args.days} days; ms a call, {args.pairs} "
            "alternating calls of each after compiling.\n",
            "| path | median | min | max |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Lines / order, pairwise medians: step {ratio('step, lines', 'step, order'):.2f}, "
            f"act {ratio('act, lines', 'act, order'):.2f}. Records: "
            f"{'bit-identical' if identical else 'different'}.",
        ]
    )
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "order_paths.md").write_text(text + "\n")
    print(f"wrote {OUT / 'order_paths.md'}")


if __name__ == "__main__":
    main()

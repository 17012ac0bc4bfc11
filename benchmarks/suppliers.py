"""The supplier generator with and without the reference's selection step, side by side (``docs/model.md``).

    python benchmarks/suppliers.py [--worlds 1024]

For each generator (``EnvConfig.supplier_attempts`` 1 and 50, the default) over ``--worlds`` worlds: the pooled
price-quality correlation of each product's kept attempt (food and other products), and over the episode's window (the
pre-opening history and 180 days) the best-quality (Q1) supplier's lead time (mean of its transport range) and
price tier (mean multiplier on the base cost), and the share of product-days without a Q1 supplier; and the cost
of drawing a world and of a whole ``Env.reset`` (time per store, batches of ``--batch``), their ratio, and the cost of
the same selection with every attempt drawn and played (``make_world_reference``). The default / one-attempt
reset ratio is also measured as the CLI runs the reset, in a process whose host is split into one device per core
(``--reset-ratio``: alternating calls, the stores sharded over the devices). Writes benchmarks/out/suppliers.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rbjax import Env
from rbjax.model import supplier_world as SW
from rbjax.model import suppliers as S

OUT = Path(__file__).parent / "out"


def window_stats(world, params, config, days):
    """Per product over the window: (days without Q1, Q1 lead time sum, Q1 price multiplier sum, Q1 days)."""
    J, K = world.cycle_len.shape
    pb = params.price_bands
    lead = (world.transport_min.astype(jnp.float32) + world.transport_max) / 2

    def day(carry, i):
        q, p, acc = carry
        cal = params.open_day - config.history_days + i
        q, p = S.update_tiers(world, params, q, p, cal, redraw_all=i == 0)
        best = q == S.BEST_QUALITY
        first = best & (jnp.cumsum(best, -1) == 1)  # one Q1 supplier per product-day (the first)
        has = best.any(-1)
        mult = pb[p.astype(jnp.int32)].mean(-1)
        acc = acc + jnp.stack([~has, (first * lead).sum(-1), (first * mult).sum(-1), has], -1)
        return (q, p, acc), None

    z = jnp.zeros((J, K), jnp.int8)
    (_, _, acc), _ = jax.lax.scan(day, (z, z, jnp.zeros((J, 4), jnp.float32)), jnp.arange(days))
    return acc


def per_store(fn, keys, batch: int) -> float:
    """Seconds per store of a jitted batched ``fn`` over ``keys`` in batches of ``batch`` (compiled first)."""
    jax.block_until_ready(fn(keys[:batch]))
    start = time.perf_counter()
    jax.block_until_ready([fn(keys[i : i + batch]) for i in range(0, len(keys), batch)])
    return (time.perf_counter() - start) / len(keys)


def measure(attempts: int, worlds: int, seed: int, batch: int):
    env = Env()
    config = dataclasses.replace(env.config, supplier_attempts=attempts)
    params = env.default_params()
    days = config.history_days + 180
    make = jax.jit(jax.vmap(lambda k: SW.make_world(k, params, config)))
    stats = jax.jit(jax.vmap(lambda w: window_stats(w, params, config, days)))
    corr_of = jax.jit(jax.vmap(lambda k: SW.make_world(k, params, config, return_stats=True)[1]))
    keys = jax.random.split(jax.random.key(seed), worlds)
    world = per_store(make, keys, batch)
    reset = per_store(jax.jit(jax.vmap(lambda k: Env(config).reset(k, params))), keys, batch)
    out = [make(keys[i : i + batch]) for i in range(0, worlds, batch)]
    acc = np.concatenate([np.asarray(stats(w)) for w in out])  # [worlds, J, 4]
    corr = np.concatenate([np.asarray(corr_of(keys[i : i + batch])) for i in range(0, worlds, batch)])
    food = np.asarray(params.copula_rho)[:, 0] < 0.3
    return dict(acc=acc, corr=corr, per_store=world, reset=reset, food=food)


def reference_cost(worlds: int, seed: int) -> float:
    """Seconds per store of ``make_world_reference`` (every attempt drawn and played), in batches of 64: its
    10 MB a store keep it from larger batches."""
    env = Env()
    params = env.default_params()
    make = jax.jit(jax.vmap(lambda k: S.make_world_reference(k, params, env.config)))
    return per_store(make, jax.random.split(jax.random.key(seed), worlds), 64)


def reset_ratio(stores: int, seed: int, repeats: int = 4) -> dict:
    """Default and one-attempt ``Env.reset`` (seconds per store), timed alternately on the devices of this
    process, the way ``rollout`` runs them (``rollout_programs.compiled``: stores sharded over every device)."""
    from rbjax.policies import make
    from rbjax.runners.rollout_programs import compiled

    env = Env()
    params = env.default_params()
    one = Env(dataclasses.replace(env.config, supplier_attempts=1))
    keys = jax.random.split(jax.random.key(seed), stores)
    resets = [
        compiled(e, make("oracle")[0], "summary", None, None, tuple(jax.devices()))[0] for e in (env, one)
    ]
    times = [[], []]
    for reset in resets:
        jax.block_until_ready(reset(keys, params))
    for _ in range(repeats):
        for reset, t in zip(resets, times):
            start = time.perf_counter()
            jax.block_until_ready(reset(keys, params))
            t.append((time.perf_counter() - start) / stores)
    ratios = [a / b for a, b in zip(*times)]
    return dict(
        default=float(np.median(times[0])), one=float(np.median(times[1])), ratio=float(np.median(ratios))
    )


def reset_ratio_per_core(stores: int, seed: int) -> dict:
    """``reset_ratio`` in a fresh process whose host is split into one device per core, as the CLI runs."""
    out = subprocess.run(
        [sys.executable, __file__, "--reset-ratio", "--batch", str(stores), "--seed", str(seed)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def row(name, m):
    acc, corr, food = m["acc"], m["corr"], m["food"]
    q1_days = acc[..., 3].sum()
    pct = lambda x: "{:.3f} ({:.3f}-{:.3f})".format(np.median(x), *np.percentile(x, [5, 95]))
    return (
        f"| {name} | {pct(corr[:, food])} | {pct(corr[:, ~food])} | {acc[..., 1].sum() / q1_days:.3f} | "
        f"{acc[..., 2].sum() / q1_days:.4f} | {100 * acc[..., 0].sum() / acc[..., [0, 3]].sum():.3f} % | "
        f"{1000 * m['per_store']:.1f} | {1000 * m['reset']:.1f} |"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1024, help="stores per jitted call")
    ap.add_argument("--reset-ratio", action="store_true", help="only the resets, one device per core (JSON)")
    args = ap.parse_args()
    if args.reset_ratio:
        print(json.dumps(dict(reset_ratio(args.batch, args.seed), devices=len(jax.devices()))))
        return
    per_core = reset_ratio_per_core(args.batch, args.seed)
    results = {a: measure(a, args.worlds, args.seed, min(args.batch, args.worlds)) for a in (1, 50)}
    reference = reference_cost(min(256, args.worlds), args.seed)
    ratio = results[50]["reset"] / results[1]["reset"]
    lines = [
        f"# Supplier worlds: one attempt against the selection among 50 ({args.worlds:,} worlds each, "
        f"batches of {min(args.batch, args.worlds):,})",
        "",
        "| generator | corr, food: median (5-95 %) | corr, other | Q1 lead time (days) | Q1 price / base cost | "
        "product-days without Q1 | world, ms per store | Env.reset, ms per store |",
        "|---|---|---|---|---|---|---|---|",
        row("one attempt", results[1]),
        row("selection among 50 (default)", results[50]),
        "",
        f"Default reset / one-attempt reset on one device: **{ratio:.2f}**; with the host split into one device "
        f"per core ({per_core['devices']}, as the CLI runs; alternating calls, median of the pairwise ratios): "
        f"**{per_core['ratio']:.2f}**, {1000 * per_core['default']:.2f} against {1000 * per_core['one']:.2f} ms "
        f"per store (target 1.5). The selection with every attempt "
        f"drawn and played (`make_world_reference`, the same worlds, batches of 64): "
        f"{1000 * reference:.1f} ms per store against {1000 * results[50]['per_store']:.1f} ms.",
    ]
    text = "\n".join(lines) + "\n"
    OUT.mkdir(exist_ok=True)
    (OUT / "suppliers.md").write_text(text)
    print(text)


if __name__ == "__main__":
    if "--reset-ratio" in sys.argv:  # before JAX starts: one CPU device per core, as the CLI does
        from rbjax.perf.devices import split_cpu

        split_cpu()
    main()

"""Simulator throughput: store-days/s against batch size, first compile time, state bytes per store.

    python benchmarks/throughput.py [--batches 1,16,256,2048,16384] [--days 10]

A fixed base-stock policy runs in the loop. Steady-state rates exclude compilation and reset (timed on
a second call). Writes benchmarks/out/throughput.{csv,md}.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import jax
import numpy as np

from rbjax.env import Env
from rbjax.policies import BaseStockParams, base_stock
from rbjax.rollout import _compiled


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,16,256,2048,16384")
    ap.add_argument("--days", type=int, default=10)
    ap.add_argument("--out", default=str(Path(__file__).parent / "out"))
    args = ap.parse_args(argv)
    env = Env()
    params = env.default_params()
    policy_params = BaseStockParams.default()
    rows = []
    for b in [int(x) for x in args.batches.split(",")]:
        keys = jax.random.split(jax.random.key(0), b)
        reset, chunk = _compiled(env, base_stock, "summary", None, None)
        t0 = time.perf_counter()
        obs, state = jax.block_until_ready(reset(keys, params))
        t_reset_first = time.perf_counter() - t0
        state_bytes = env.state_bytes(jax.tree.map(lambda x: x[0], state))
        t0 = time.perf_counter()
        (obs, state), rec = jax.block_until_ready(chunk(policy_params, params, obs, state, keys, np.int32(0), args.days))
        t_step_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        obs, state = jax.block_until_ready(reset(keys, params))
        t_reset = time.perf_counter() - t0
        t0 = time.perf_counter()
        (obs, state), rec = jax.block_until_ready(chunk(policy_params, params, obs, state, keys, np.int32(0), args.days))
        t_step = time.perf_counter() - t0
        rows.append(dict(batch=b, store_days_per_s=b * args.days / t_step, reset_stores_per_s=b / t_reset,
                         first_call_s=t_reset_first + t_step_first, state_bytes=state_bytes))
        print(f"batch {b:6d}: {rows[-1]['store_days_per_s']:10,.0f} store-days/s, reset {b / t_reset:8,.0f} stores/s, "
              f"first call (compile + run) {rows[-1]['first_call_s']:.1f} s", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = list(rows[0])
    (out / "throughput.csv").write_text("\n".join([",".join(header)] + [",".join(f"{r[h]:.6g}" for h in header) for r in rows]) + "\n")
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__} on {jax.devices()[0].platform}"
    md = [f"Throughput ({machine}; base-stock policy, {args.days}-day scan)", "",
          "| stores | store-days/s | resets/s | first call (s) | state bytes/store |", "|---|---|---|---|---|"]
    md += [f"| {r['batch']} | {r['store_days_per_s']:,.0f} | {r['reset_stores_per_s']:,.0f} | {r['first_call_s']:.1f} | "
           f"{r['state_bytes']:,} |" for r in rows]
    (out / "throughput.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()

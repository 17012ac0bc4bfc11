"""Throughput on an accelerator: the oracle from 10^3 to 10^6 stores on the first device ``jax.devices()`` gives.

    python benchmarks/gpu.py [--batches 1000,10000,100000] [--large 1000000] [--days 30] [--budget 300]
                             [--substeps 100000]

For each batch, one jitted call each: the first call (compilation, reset and ``--days`` oracle days), then a
reset and a second run timed apart (resets per second with the default supplier generator, store-days per
second). At the middle batch, the one-attempt generator's reset, for the default / one-attempt ratio. Then
``--large`` stores through ``rollout_chunks`` in chunks of the largest batch (the same compiled programs),
each chunk reduced to its final net worths and dropped; skipped when the estimate from the largest batch
exceeds what is left of ``--budget`` seconds. ``--substeps N``: before it, "Where a day goes" at N stores
(``rbjax.perf.bench.substeps``: each sub-step of the day, the whole step, the oracle, the floor kernel and the
bytes XLA's cost analysis gives each). Writes benchmarks/out/gpu.md (or ``--out``) and, on an accelerator, the
kept record ``benchmarks/results/gpu.json`` (its best rate is the README's GPU figure).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np

from rbjax import Env
from rbjax.perf.bench import day_lines, substeps, throughput
from rbjax.policies import make
from rbjax.runners.rollout import rollout_chunks

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorded import OUT, provenance, write  # noqa: E402


def peak_gb(device) -> float:
    """The device's peak bytes in use so far, in GB (nan where the backend does not report it)."""
    stats = device.memory_stats() or {}
    return stats.get("peak_bytes_in_use", float("nan")) / 1e9


def reset_seconds(env: Env, params, stores: int) -> float:
    """Seconds of one timed ``Env.reset`` call over ``stores`` stores (compiled by a first call)."""
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    keys = jax.random.split(jax.random.key(1), stores)
    jax.block_until_ready(reset(keys, params))
    start = time.perf_counter()
    jax.block_until_ready(reset(keys, params))
    return time.perf_counter() - start


def large_run(env: Env, params, stores: int, chunk: int, days: int, device) -> dict:
    """``stores`` oracle stores for ``days`` days in chunks of ``chunk``: wall seconds and mean final net worth."""
    policy, policy_params = make("oracle")
    keys = jax.random.split(jax.random.key(2), stores)
    start, total = time.perf_counter(), 0.0
    for c in rollout_chunks(
        env, policy, policy_params, params, keys, days, devices=(device,), store_chunk=chunk, to_host=False
    ):
        total += float(np.asarray(c.state.net_worth, np.float64).sum())
        print(f"  stores {c.stop:,} of {stores:,} after {time.perf_counter() - start:.0f} s", flush=True)
    return dict(seconds=time.perf_counter() - start, mean_net_worth=total / stores)


def where_a_day_goes(env: Env, params, stores: int) -> list[str]:
    """The day at ``stores`` stores, sub-step by sub-step, against the floor kernel: markdown lines."""
    lines = day_lines(*substeps(env, params, stores))
    print("\n".join(lines), flush=True)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1000,10000,100000")
    ap.add_argument("--large", type=int, default=1_000_000, help="stores of the chunked run (0: skip)")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds the whole benchmark may take")
    ap.add_argument("--substeps", type=int, default=0, help="stores of the day's sub-step table (0: skip)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    source = provenance(sys.argv, "benchmarks/gpu.py")
    clock = time.perf_counter()
    device = jax.devices()[0]
    env, batches = Env(), [int(b) for b in args.batches.split(",")]
    params = env.default_params()
    rows = []
    for b in batches:
        try:
            r = throughput(env, params, "oracle", (device,), b, args.days)
        except jax.errors.JaxRuntimeError as e:  # out of device memory: the smaller batches stand
            print(f"{b:>9,} stores: failed ({str(e).splitlines()[0][:120]})", flush=True)
            break
        r["peak_gb"] = peak_gb(device)
        rows.append(r)
        print(
            f"{b:>9,} stores: {r['store_days_per_s']:,.0f} store-days/s, {r['resets_per_s']:,.0f} resets/s, "
            f"first call {r['first_call_s']:.1f} s, peak {r['peak_gb']:.1f} GB",
            flush=True,
        )
    batches = [r["batch"] for r in rows]
    mid = batches[len(batches) // 2]
    one = Env(dataclasses.replace(env.config, supplier_attempts=1))
    ratio = reset_seconds(env, params, mid) / reset_seconds(one, params, mid)
    print(f"default / one-attempt reset at {mid:,} stores: {ratio:.2f}", flush=True)
    day = where_a_day_goes(env, params, args.substeps) if args.substeps else []
    large = None
    if args.large:
        big = rows[-1]
        per_chunk = big["batch"] / big["resets_per_s"] + big["batch"] * args.days / big["store_days_per_s"]
        estimate = per_chunk * -(-args.large // big["batch"])
        left = args.budget - (time.perf_counter() - clock)
        print(
            f"{args.large:,} stores: about {estimate:.0f} s estimated, {left:.0f} s of the budget left",
            flush=True,
        )
        if estimate < left:
            large = large_run(env, params, args.large, big["batch"], args.days, device)
    lines = [
        f"# The oracle on {device.device_kind} ({jax.default_backend()}), {args.days} days a call",
        "",
        "| stores | store-days / s | resets / s | first call (compile + reset + days), s | peak device memory, GB |",
        "|---|---|---|---|---|",
        *(
            f"| {r['batch']:,} | {r['store_days_per_s']:,.0f} | {r['resets_per_s']:,.0f} | "
            f"{r['first_call_s']:.1f} | {r['peak_gb']:.1f} |"
            for r in rows
        ),
        "",
        f"Default / one-attempt reset at {mid:,} stores: **{ratio:.2f}**.",
    ]
    lines += day
    if large:
        lines.append(
            f"{args.large:,} stores x {args.days} days in chunks of {rows[-1]['batch']:,}: {large['seconds']:.0f} s "
            f"({args.large * args.days / large['seconds']:,.0f} store-days/s, resets included); mean net worth after "
            f"the last day {large['mean_net_worth']:,.0f}."
        )
    text = "\n".join(lines) + "\n"
    (args.out / "gpu.md").write_text(text)
    print(text)
    if jax.default_backend() != "cpu":  # the CPU's figures are bench --quick's (benchmarks/main_job.py)
        record = dict(
            **source,
            device=device.device_kind,  # e.g. "NVIDIA H200": the README names its last word
            policy="oracle",
            days_per_call=args.days,
            rows=rows,
            default_over_one_attempt_reset=ratio,
            large=large and dict(stores=args.large, **large),
            headline_store_days_per_s=max(r["store_days_per_s"] for r in rows),
        )
        print(f"wrote {write('gpu', record)}")


if __name__ == "__main__":
    main()

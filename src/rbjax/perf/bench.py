"""The throughput profiler behind ``rbjax bench`` and ``benchmarks/throughput.py``.

For each policy (oracle, null) x device count x batch size: first call (compile + reset + run), reset rate
and steady store-days/s (a second call, compilation excluded). Then, at one batch size: each sub-step of
the day timed alone, the floor kernel (same state bytes read and written, same random words drawn,
nothing else) and the step / floor ratio; peak host memory; and the float32 accounting drift against
float64 over 180 days of the oracle (run in a subprocess with 64-bit JAX). Writes bench.csv,
substeps.csv, bench.md and bench.png into ``out``.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rbjax.env import Env
from rbjax.perf import profiling
from rbjax.policies import make
from rbjax.runners.placement import place
from rbjax.runners.rollout_programs import compiled

POLICIES = ("oracle", "null")  # the throughput table's policies (``rbjax.policies.make``)


def _pad_keys(b: int, n_dev: int):
    return jax.random.split(jax.random.key(0), b + (-b % n_dev))


def throughput(
    env: Env, params, policy: str, devices: tuple, batch: int, days: int, records: str = "summary"
) -> dict:
    fn, pp = make(policy)
    keys = _pad_keys(batch, len(devices))
    # placed as a rollout places them, so that a rollout of the same shapes reuses these programs
    keys, params, pp = place(keys, 0, devices), place(params, None, devices), place(pp, None, devices)
    reset, chunk = compiled(env, fn, records, None, None, devices)
    start = time.perf_counter()
    obs, state = jax.block_until_ready(reset(keys, params))
    (obs, state), rec = jax.block_until_ready(chunk(pp, params, obs, state, keys, jnp.int32(0), days))
    first = time.perf_counter() - start
    start = time.perf_counter()
    obs, state = jax.block_until_ready(reset(keys, params))
    t_reset = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(chunk(pp, params, obs, state, keys, jnp.int32(0), days))
    t_run = time.perf_counter() - start
    return dict(
        policy=policy,
        devices=len(devices),
        batch=len(keys),
        store_days_per_s=len(keys) * days / t_run,
        resets_per_s=len(keys) / t_reset,
        first_call_s=first,
    )


def substeps(
    env: Env, params, batch: int, days_before: int = 20, records: str = "summary"
) -> tuple[pd.DataFrame, dict]:
    """Module costs, the oracle day and the floor kernel at ``batch`` stores (one device), on the state
    after ``days_before`` days of the oracle."""
    fn, pp = make("oracle")
    devices = (jax.devices()[0],)
    keys = place(jax.random.split(jax.random.key(1), batch), 0, devices)
    params, pp = (place(p, None, devices) for p in (params, pp))
    reset, chunk = compiled(env, fn, records, None, None, devices)
    obs, state = reset(keys, params)
    (obs, state), _ = chunk(pp, params, obs, state, keys, jnp.int32(0), days_before)
    priv = jax.vmap(profiling.oracle_view(env), in_axes=(0, None))(state, params)
    action = jax.vmap(fn, in_axes=(None, 0, 0, None))(pp, obs, priv, None)
    policy = jax.jit(jax.vmap(fn, in_axes=(None, 0, 0, None)))
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None))).lower(keys, state, action, params).compile()
    t_step = profiling.time_call(step, keys, state, action, params)
    t_policy = profiling.time_call(policy, pp, obs, priv, None)
    floor = profiling.floor_kernel(env).lower(keys, state).compile()
    t_floor = profiling.time_call(floor, keys, state, fresh=True)  # it donates its state
    costs = profiling.substep_costs(env, params, state, action, keys)
    table = pd.DataFrame({"module": list(costs), "ms": [1e3 * v for v in costs.values()]})
    table = table.sort_values("ms", ascending=False, ignore_index=True)
    summary = dict(
        batch=batch,
        state_after=f"oracle policy, {days_before} days",
        step_ms=1e3 * t_step,
        oracle_ms=1e3 * t_policy,
        floor_ms=1e3 * t_floor,
        step_over_floor=t_step / t_floor,
        step_bytes=profiling.bytes_accessed(
            step
        ),  # XLA's cost analysis: bytes the step's kernels read and write
        floor_bytes=profiling.bytes_accessed(floor),
        state_bytes=env.state_bytes(jax.tree.map(lambda x: x[0], state)),
        random_words_per_day=profiling.words_per_day(env),
    )
    return table, summary


_DRIFT = """
import json, sys, jax, numpy as np
jax.config.update("jax_enable_x64", True)
import rbjax
from rbjax.config import EnvConfig
from rbjax.perf.bench import DRIFT_COUNTS, drift_summary
from rbjax.policies import oracle, OracleParams
cat = rbjax.load_catalog()
out = {}
for f64 in (False, True):
    env = rbjax.Env(EnvConfig.from_catalog(cat, float64=f64), cat)
    rec, _ = rbjax.rollout(env, oracle, OracleParams.default(), env.default_params(),
                           jax.random.split(jax.random.key(0), int(sys.argv[1])), days=int(sys.argv[2]))
    out[f64] = {k: np.asarray(getattr(rec, k), np.float64) for k in ("funds", "net_worth") + DRIFT_COUNTS}
print(json.dumps(drift_summary(out[False], out[True])))
"""

DRIFT_COUNTS = ("sold", "returned", "expired", "stockouts", "order_lines", "refused_orders")


def drift_summary(f32: dict, f64: dict) -> dict:
    """Funds and net-worth drift between two runs' [stores, days] records (dicts of arrays).

    A store's runs follow the same path while every count in ``DRIFT_COUNTS`` agrees; after one differing
    draw they diverge. ``*_same_path``: the max drift over each store's days before its first differing
    count, i.e. accounting rounding alone. ``median_first_split_day``: days when a store never splits.
    """
    same = np.all([f32[k] == f64[k] for k in DRIFT_COUNTS], axis=0)  # [stores, days]
    days = same.shape[1]
    first = np.where(same.all(1), days, np.argmin(same, 1))
    err = {k: np.abs(f32[k] - f64[k]) for k in ("funds", "net_worth")}
    res = {k: float(e.max()) for k, e in err.items()} | {
        "net_worth_scale": float(np.abs(f64["net_worth"]).max())
    }
    before_split = np.arange(days)[None, :] < first[:, None]
    res |= {f"{k}_same_path": float(np.where(before_split, e, 0.0).max()) for k, e in err.items()}
    return res | {
        "same_path_stores": int((first == days).sum()),
        "median_first_split_day": float(np.median(first)),
    }


def drift(stores: int, days: int) -> dict:
    """Max |float32 - float64| of funds and net worth over ``days`` oracle days (same keys): over everything,
    and (``*_same_path``) over each store's days before its first differing count, where the two runs made the
    same draws and decisions, so the gap is accounting rounding alone."""
    res = subprocess.run(
        [sys.executable, "-c", _DRIFT, str(stores), str(days)], capture_output=True, text=True
    )
    if res.returncode:
        raise RuntimeError(f"float64 drift run failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def plot(table: pd.DataFrame, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.subplots()
    for (policy, devices), g in table.groupby(["policy", "devices"]):
        ax.plot(g.batch, g.store_days_per_s, marker="o", label=f"{policy}, {devices} device(s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("stores per batch")
    ax.set_ylabel("store-days / s")
    ax.legend()
    fig.savefig(path, dpi=120)


def day_lines(mods: pd.DataFrame, summary: dict) -> list[str]:
    """``substeps``' results as markdown lines: the sub-step table, the step, the oracle, the floor kernel, the
    step / floor ratio and the bytes each moves."""
    return [
        "",
        f"Per sub-step of the day on the state after {summary['state_after']}, {summary['batch']:,} stores, "
        f"one device (ms per call; the step is timed whole):",
        "",
        "| part | ms |",
        "|---|---|",
        *(f"| {r.module} | {r.ms:.2f} |" for r in mods.itertuples()),
        f"| **step (whole)** | {summary['step_ms']:.2f} |",
        f"| oracle policy | {summary['oracle_ms']:.2f} |",
        f"| floor kernel ({summary['state_bytes']:,} B state, {summary['random_words_per_day']:,} random "
        f"words per store) | {summary['floor_ms']:.2f} |",
        "",
        f"Step / floor: {summary['step_over_floor']:.1f}x.",
    ] + (
        [
            f"Memory traffic (XLA's cost analysis): the step's kernels read and write "
            f"{summary['step_bytes'] / 1e6:,.0f} MB, the floor kernel's {summary['floor_bytes'] / 1e6:,.0f} MB: "
            f"{summary['step_bytes'] / summary['floor_bytes']:.1f}x."
        ]
        if np.isfinite(summary["step_bytes"])  # a backend without a cost analysis gives NaN
        else []
    )


def table_lines(table: pd.DataFrame, days: int) -> list[str]:
    """The throughput rows as a markdown table under a header naming the machine."""
    device = jax.devices()[0]
    return [
        f"# rbjax throughput ({getattr(device, 'device_kind', device.platform)}, {platform.machine()}, "
        f"{os.cpu_count()} cores, jax {jax.__version__}, {days}-day scans)",
        "",
        "| policy | devices | stores | store-days/s | resets/s | first call (s) |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r.policy} | {r.devices} | {r.batch:,} | {r.store_days_per_s:,.0f} | {r.resets_per_s:,.0f} | "
            f"{r.first_call_s:.1f} |"
            for r in table.itertuples()
        ),
    ]


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux


def quick(stores: int, days: int, n_devices: int, out: Path) -> str:
    """``rbjax bench --quick``: the oracle at ``stores`` stores on ``n_devices`` devices for ``days`` days (its
    first call, compiling included, and the second call's day rate), set beside the README's machines
    (``rbjax.perf.reference.compare``). Writes bench.csv and bench.md into ``out``; returns the text."""
    from rbjax.perf import reference

    env = Env()
    devices = tuple(jax.devices()[:n_devices])
    out.mkdir(parents=True, exist_ok=True)
    # full records: at the tests' 4 stores this is the golden oracle program, compiled once for the suite
    row = throughput(env, env.default_params(), "oracle", devices, stores, days, records="full")
    table = pd.DataFrame([row])
    table.to_csv(out / "bench.csv", index=False)
    lines = table_lines(table, days)
    # the asked size: the batch is padded to a multiple of the devices, which leaves the rate per store-day
    lines += ["", *reference.compare(row["store_days_per_s"], row["first_call_s"], stores, days)]
    lines.append(f"Peak host memory: {peak_mib():,.0f} MiB.")
    text = "\n".join(lines) + "\n"
    (out / "bench.md").write_text(text)
    return text


def run(
    policies: list[str],
    batches: list[int],
    days: int,
    device_counts: list[int],
    module_batch: int,
    drift_size: tuple[int, int] | None,
    out: Path,
) -> str:
    """Measure and write the tables; ``drift_size`` = (stores, days) of the float64 comparison, or None."""
    env = Env()
    params = env.default_params()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for policy in policies:
        for n in device_counts:
            devices = tuple(jax.devices()[:n])
            for b in batches:
                try:
                    rows.append(throughput(env, params, policy, devices, b, days))
                except Exception as e:  # a batch too large for memory ends this row of the table
                    print(
                        f"{policy}, {n} device(s), batch {b}: stopped ({type(e).__name__})", file=sys.stderr
                    )
                    break
                r = rows[-1]
                print(
                    f"{policy:6s} {n} dev  batch {r['batch']:6d}: {r['store_days_per_s']:10,.0f} store-days/s, "
                    f"first call {r['first_call_s']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    table = pd.DataFrame(rows)
    table.to_csv(out / "bench.csv", index=False)
    mods, summary = substeps(env, params, module_batch)
    mods.to_csv(out / "substeps.csv", index=False)
    drifts = drift(*drift_size) if drift_size else None
    peak = peak_mib()
    plot(table, out / "bench.png")
    lines = table_lines(table, days) + day_lines(mods, summary)
    lines.append(f"Peak host memory: {peak:,.0f} MiB.")
    if drifts:
        lines.append(
            f"float32 vs float64, {drift_size[0]} oracle stores x {drift_size[1]} days, same keys: max |funds "
            f"drift| {drifts['funds']:.3f}, max |net worth drift| {drifts['net_worth']:.3f} (net worth up to "
            f"{drifts['net_worth_scale']:,.0f}). While both runs make the same draws and decisions (every "
            f"count equal; {drifts['same_path_stores']} of {drift_size[0]} stores all the way, median first "
            f"split on day {drifts['median_first_split_day']:.0f}): funds {drifts['funds_same_path']:.3f}, "
            f"net worth {drifts['net_worth_same_path']:.3f}."
        )
    text = "\n".join(lines) + "\n"
    (out / "bench.md").write_text(text)
    return text

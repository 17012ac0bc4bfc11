"""Branching: what a paired comparison from snapshots buys over independent stores, and what a snapshot costs.

    python benchmarks/branching.py [--stores 256] [--policies ppo,base_stock] [--lengths 7,30]

1. The oracle plays ``--stores`` stores; snapshots are taken on days 30, 90 and 150 (``--at``).
2. For each policy (the shipped PPO, greedy; base-stock) and slice length, every snapshot store is continued by
   the policy and by the oracle from the same state with the same keys (``rbjax.runners.paired.compare``).
   - paired: the per-slice difference of the net-worth gain, policy - oracle, over all ``n`` slices;
   - unpaired: the policy on the first half of the stores, the oracle on the other half (independent stores,
     as two separate runs would give), difference of the two means.
   Both are 95 % intervals of the mean difference (percentile bootstrap; the unpaired one resamples each arm).
   ``stores x`` is how many times more stores the unpaired design needs for the paired interval's width:
   (sd_policy^2 + sd_oracle^2) / sd_diff^2 stores per arm, i.e. twice that in stores run.
3. Snapshot size per store, and save and load time of ``--stores`` stores.

Writes benchmarks/out/branching.md, benchmarks/out/branching.csv and docs/branching.png.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import jax
import matplotlib
import numpy as np
import pandas as pd

import rbjax
from rbjax import Env
from rbjax.files import snapshots
from rbjax.policies import make
from rbjax.results import stats
from rbjax.runners import paired
from rbjax.runners.rollout import rollout_chunks

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = Path(__file__).parent / "out"
DOCS = Path(__file__).parent.parent / "docs"


def oracle_snapshots(env: Env, params, keys, at: list[int]) -> dict[int, snapshots.Snapshot]:
    """The oracle's stores after each day of ``at`` (one rollout in segments, host arrays)."""
    oracle, op = make("oracle")
    out, state, day = {}, None, 0
    for d in at:
        (chunk,) = rollout_chunks(
            env,
            oracle,
            op,
            params,
            keys,
            d - day,
            state=state,
            first_day=day,
            store_chunk=len(keys),
            to_host=True,
        )
        state, day = chunk.state, d
        out[d] = snapshots.Snapshot(state, keys, d, params)
    return out


def unpaired_ci(a: np.ndarray, b: np.ndarray, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b), each arm resampled on its own."""
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), (resamples, len(a)))
    ib = rng.integers(0, len(b), (resamples, len(b)))
    d = a[ia].mean(1) - b[ib].mean(1)
    return tuple(float(x) for x in np.quantile(d, [0.025, 0.975]))


def measure(table: pd.DataFrame) -> dict:
    """Paired and unpaired intervals of the mean net-worth-gain difference for one (policy, length, day)."""
    gain = (table.net_worth - table.start_net_worth).to_numpy()
    ref_gain = (table.ref_net_worth - table.start_net_worth).to_numpy()
    diff = gain - ref_gain
    half = len(diff) // 2
    lo, hi = stats.bootstrap_ci(diff)
    ulo, uhi = unpaired_ci(gain[:half], ref_gain[half:])
    sd_d, sd_a, sd_b = diff.std(ddof=1), gain[:half].std(ddof=1), ref_gain[half:].std(ddof=1)
    return {
        "slices": len(diff),
        "mean_diff": diff.mean(),
        "paired_low": lo,
        "paired_high": hi,
        "unpaired_mean": gain[:half].mean() - ref_gain[half:].mean(),
        "unpaired_low": ulo,
        "unpaired_high": uhi,
        "stores_x": (sd_a**2 + sd_b**2) / sd_d**2 if sd_d > 0 else float("inf"),
        "won": float(np.mean(diff > 0)),
        **{f"{k}_differs": float(table[f"{k}_differs"].mean()) for k in paired.DECISIONS},
        "survived": float(table.survived.mean()),
        "ref_survived": float(table.ref_survived.mean()),
    }


def snapshot_costs(env: Env, snap: snapshots.Snapshot, repeats: int = 3) -> dict:
    """File bytes per store, and the best of ``repeats`` save and load times."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "snap.npz")
        save, load = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            snapshots.save(path, env, snap.state, snap.keys, snap.day, snap.params)
            save.append(time.perf_counter() - t)
            t = time.perf_counter()
            snapshots.load(path, env)
            load.append(time.perf_counter() - t)
        size = os.path.getsize(path)
    return {"bytes_per_store": size / snap.num_stores, "save_s": min(save), "load_s": min(load)}


def plot(results: pd.DataFrame):
    labels = [f"{r.policy}\n{r.length}d, day {r.day}" for r in results.itertuples()]
    y = np.arange(len(results))[::-1]
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(results) + 1.4))
    for off, (kind, color) in zip((0.15, -0.15), (("paired", "tab:blue"), ("unpaired", "tab:orange"))):
        mid = results.mean_diff if kind == "paired" else results.unpaired_mean
        low, high = results[f"{kind}_low"], results[f"{kind}_high"]
        ax.errorbar(mid, y + off, xerr=[mid - low, high - mid], fmt="o", color=color, capsize=3, label=kind)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("net-worth gain over the slice: policy - oracle (95 % CI of the mean)")
    n = int(results.slices.iloc[0])
    ax.set_title(f"paired: {n} slices; unpaired: {n // 2} + {n // 2} independent stores")
    ax.legend(loc="lower left")
    fig.tight_layout()
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=256)
    ap.add_argument("--policies", default="ppo,base_stock")
    ap.add_argument("--lengths", default="7,30")
    ap.add_argument("--at", default="30,90,150")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    env = Env()
    params = env.default_params()
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    at = [int(x) for x in args.at.split(",")]
    start = time.perf_counter()
    snaps = oracle_snapshots(env, params, keys, at)
    print(
        f"oracle: {args.stores} stores to day {at[-1]}, snapshots on days {at} "
        f"({time.perf_counter() - start:.0f} s)"
    )
    oracle, op = make("oracle")
    rows = []
    for name in args.policies.split(","):
        policy, pp = make(name, env, rbjax.PPO_CHECKPOINT if name == "ppo" else None, greedy=True)
        for length in (int(x) for x in args.lengths.split(",")):
            for day in at:
                t = time.perf_counter()
                table = paired.compare(env, policy, pp, oracle, op, snaps[day], length)
                row = {"policy": name, "length": length, "day": day, **measure(table)}
                row["seconds"] = time.perf_counter() - t
                rows.append(row)
                print(
                    f"{name:10s} {length:3d} days from day {day:3d}: paired {row['mean_diff']:+9,.0f} "
                    f"[{row['paired_low']:+,.0f}, {row['paired_high']:+,.0f}]  unpaired {row['unpaired_mean']:+9,.0f} "
                    f"[{row['unpaired_low']:+,.0f}, {row['unpaired_high']:+,.0f}]  stores x {row['stores_x']:.1f}  "
                    f"({row['seconds']:.0f} s)"
                )
    results = pd.DataFrame(rows)
    costs = snapshot_costs(env, snaps[at[0]])
    print(
        f"snapshot: {costs['bytes_per_store'] / 1024:.1f} KiB a store; {args.stores} stores saved in "
        f"{costs['save_s']:.2f} s, loaded in {costs['load_s']:.2f} s"
    )
    OUT.mkdir(exist_ok=True)
    results.to_csv(OUT / "branching.csv", index=False)
    plot(results).savefig(DOCS / "branching.png", dpi=110)
    lines = [
        f"# Branching ({args.stores} oracle-played stores; slices from days {', '.join(map(str, at))})",
        "",
        "| policy | slice | from day | mean diff | paired 95 % CI | unpaired 95 % CI | stores x | won "
        "| survived (policy / oracle) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results.itertuples():
        lines.append(
            f"| {r.policy} | {r.length} d | {r.day} | {r.mean_diff:+,.0f} "
            f"| [{r.paired_low:+,.0f}, {r.paired_high:+,.0f}] "
            f"| [{r.unpaired_low:+,.0f}, {r.unpaired_high:+,.0f}] | {r.stores_x:.1f} | {r.won:.0%} "
            f"| {r.survived:.1%} / {r.ref_survived:.1%} |"
        )
    lines += [
        "",
        f"Snapshot: {costs['bytes_per_store'] / 1024:.1f} KiB a store; {args.stores} stores saved in "
        f"{costs['save_s']:.2f} s and loaded in {costs['load_s']:.2f} s.",
    ]
    (OUT / "branching.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

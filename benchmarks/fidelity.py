"""Fidelity: the oracle over many seeds beside the paper's single run (``docs/results.md``).

    python benchmarks/fidelity.py [--stores 1024] [--runs 20 ref19 20:own-records]

A run is a category grouping (20 or ref19), optionally with ":own-records": the oracle without the pre-opening
sales records (``OracleParams(opening_history=False)``, ``docs/results.md``, "The oracle's expired units").
Writes benchmarks/out/fidelity.md (main-table metrics, mean ± sd, the paper's value and the gap in sd),
fidelity_stores_<run>.csv and oracle_net_worth.png (mean path and bands beside the paper's path), and keeps
benchmarks/results/fidelity.json (each run's main-table means and sds, with the commit, machine, date and
command), which ``tests/test_recorded_results.py`` holds the README's oracle row and docs/results.md to.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax

import rbjax
from rbjax import Env, EnvConfig, load_catalog, rollout
from rbjax.policies import OracleParams, oracle
from rbjax.results import metrics, paper
from rbjax.results.plots import plot_net_worth

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorded import OUT, provenance, stat, write  # noqa: E402


def run(name: str, stores: int, seed: int):
    grouping, _, variant = name.partition(":")
    if variant not in ("", "own-records"):
        raise SystemExit(f"unknown run {name!r}: a grouping (20, ref19), optionally with ':own-records'")
    policy_params = OracleParams.default(opening_history=variant != "own-records")
    catalog = load_catalog()
    env = Env(EnvConfig.from_catalog(catalog, grouping=grouping), catalog)
    params = env.default_params()
    start = time.perf_counter()
    rec, _ = rollout(
        env,
        oracle,
        policy_params,
        params,
        jax.random.split(jax.random.key(seed), stores),
        days=180,
        progress=60,
    )
    seconds = time.perf_counter() - start
    return metrics.store_metrics(rec), metrics.net_worth_paths(rec, float(params.initial_funds)), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=1024)
    ap.add_argument("--runs", nargs="+", default=["20", "ref19", "20:own-records"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rbjax.setup()  # one device per core, as the CLI
    source = provenance(sys.argv, "benchmarks/fidelity.py")
    os.makedirs(OUT, exist_ok=True)
    lines, paths = [f"# Oracle fidelity: {args.stores} seeds x 180 days vs the paper's run\n"], {}
    kept = {}
    for name in args.runs:
        table, paths[name], seconds = run(name, args.stores, args.seed)
        kept[name] = {m: stat(table[m]) for m in metrics.MAIN_TABLE} | {
            "survives": float((table["survival_days"] >= 180).mean()),
            "mean_net_worth_by_day": {d: float(paths[name].mean(0)[d]) for d in (13, 60, 120, 180)},
        }
        csv = f"fidelity_stores_{name.replace(':', '_')}.csv"
        table.to_csv(os.path.join(OUT, csv), index_label="store")
        cmp = metrics.compare(
            table, metrics=metrics.MAIN_TABLE + ("acted_per_day", "quality_first", "price_first")
        )
        cmp["q05"] = [table[m].quantile(0.05) for m in cmp.index]
        cmp["q95"] = [table[m].quantile(0.95) for m in cmp.index]
        lines.append(f"\n## run: {name} ({seconds:.0f} s including compilation)\n")
        lines.append("| metric | rbjax mean ± sd | 5-95 % | paper | gap (sd) |\n|---|---|---|---|---|")
        for m, r in cmp.iterrows():
            fmt = (lambda v: f"{v:,.0f}") if abs(r["paper"]) >= 100 else (lambda v: f"{v:.4f}")
            lines.append(
                f"| {m} | {fmt(r['mean'])} ± {fmt(r['sd'])} | {fmt(r['q05'])} – {fmt(r['q95'])} | "
                f"{fmt(r['paper'])} | {r['gap_sd']:+.2f} |"
            )
        mean = paths[name].mean(0)
        lines.append(
            "\nMean net worth on days 0, 13, 30, 60, 90, 120, 150, 180: "
            + ", ".join(f"{mean[d]:,.0f}" for d in (0, 13, 30, 60, 90, 120, 150, 180))
            + " (paper: "
            + ", ".join(f"{paper.ORACLE_NET_WORTH[d]:,.0f}" for d in (0, 13, 30, 60, 90, 120, 150, 180))
            + ")"
        )
        print(metrics.format_compare(cmp), flush=True)
    fig = plot_net_worth(
        paths[args.runs[0]], paper.ORACLE_NET_WORTH, label=f"rbjax ({args.runs[0]} categories)"
    )
    fig.savefig(OUT / "oracle_net_worth.png", dpi=120)
    with open(os.path.join(OUT, "fidelity.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    write("fidelity", dict(**source, stores=args.stores, days=180, seed=args.seed, runs=kept))


if __name__ == "__main__":
    main()

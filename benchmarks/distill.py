"""The planner's students: the recipe trained, then every policy on held-out stores, paired with the oracle.

    python benchmarks/distill.py [--stores 64] [--days 180] [--rounds 3] [--ship] [--skip-planners]
                                 [--students privileged,observed,belief]

1. Trains the ``--students`` with the default recipe (``rbjax.rl.distill.DistillConfig()``: 3 rounds of 256
   stores x 20 labeled mornings, the planner's defaults M = 4, H = 14, each round fitted on every round's labels)
   on seeds 0 (privileged), 1 (observed) and 2 (belief: taught by ``plan_obs``), on this machine's devices;
   ``--ship`` writes their checkpoints to ``checkpoints/`` (``SHIPPED``). A student left out keeps its
   rows, recipe and curve from the recorded ``distill.json``, with the provenance of the run that made them
   (``carried``).
2. Runs on ``--stores`` held-out stores (``planner.HELD_OUT_SEED``: no round trained on it, no setting was chosen
   on it) for ``--days`` days: the oracle, PPO (shipped), each student after each round, and the planner with the
   last privileged student as its base; the shipped planner's row (base: the oracle) comes from
   ``benchmarks/results/planner_heldout.json`` (the same stores and keys). Each row: final net worth paired with the
   oracle (95 % interval), its share of the oracle's and of the planner's, the main table's means, and the wall
   time per store-day of a compiled run (the same run twice; the second is timed).

Writes benchmarks/out/distill.md and benchmarks/results/distill.json (the figures with the commit, machine, date
and command).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd

import rbjax
from rbjax.policies import OracleParams, PlanSettings, make_planner, oracle
from rbjax.results import metrics
from rbjax.rl.distill import DistillConfig, Student, StudentConfig, distill, save
from rbjax.rl.distill.recipe import REGISTERED as NAMES

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_tools import markdown_table  # noqa: E402
from planner import HELD_OUT_SEED, paired_row, timed_rollout  # noqa: E402
from recorded import OUT, provenance, read, write  # noqa: E402

CHECKPOINTS = Path(__file__).parents[1] / "checkpoints"
SHIPPED = {kind: f"{name}_hard_v2" for kind, name in NAMES.items()}  # each kind's checkpoint folder
SEEDS = {"privileged": 0, "observed": 1, "belief": 2}  # each kind's training seed


def evaluate(
    env, params, keys, days, policy, policy_params, once: bool = False
) -> tuple[pd.DataFrame, float]:
    """(the main table per store, seconds of the compiled run; ``once``: of the one run, compiling included)."""
    if once:
        start = time.perf_counter()
        rec, _ = jax.device_get(rbjax.rollout(env, policy, policy_params, params, keys, days=days))
        return metrics.store_metrics(rec), time.perf_counter() - start
    rec, _, _, wall = timed_rollout(env, policy, policy_params, params, keys, days)
    return metrics.store_metrics(rec), wall


def table_row(name: str, r: dict) -> dict:
    """One row of the markdown table from a policy's record."""
    paired = r["paired"]
    return {
        "policy": name,
        "final net worth": f"{r['final_net_worth']['mean']:,.0f} ± {r['final_net_worth']['sd']:,.0f}",
        "- oracle (95 % interval)": f"{paired['diff']:+,.0f} ({paired['low']:+,.0f} .. {paired['high']:+,.0f})",
        "of the oracle": f"{r['of_oracle']:.0%}",
        "of the planner": f"{r['of_planner']:.0%}",
        "total sales": f"{r['total_sales']:,.0f}",
        "expired ratio": f"{r['expired_ratio']:.4f}",
        "µs / store-day": f"{r['us_per_store_day']:,.1f}",
        "x oracle's time": f"{r['of_oracle_wall']:.1f}",
    }


def curve_table(curve: list[dict]) -> pd.DataFrame:
    """A recipe's curve as the docs show it: whole seconds, shares in per cent (the record keeps every digit)."""
    t = pd.DataFrame(curve).drop(columns="train_s")
    for col in ("label_s", "round_s"):
        t[col] = t[col].round().astype(int)
    for col in ("agreement", "gain_kept", "planner_departs"):
        t[col] = (100 * t[col]).round().astype(int).astype(str) + " %"
    t["train_loss"] = t["train_loss"].round(3)
    return t


def carry(kinds: set, record: dict, args) -> tuple[dict, dict, dict]:
    """(provenance, recipe and curve of each student not trained here): their rows are added to ``record``
    from the recorded distill.json, each student's with the run that made it, and only where that run's
    oracle ended where this one's does on the same held-out stores (the same model). A carried row's
    ``of_oracle_wall`` is against its own run's oracle, as its wall time was measured there."""
    if not kinds:
        return {}, {}, {}
    old = read("distill")
    same = (old["stores"], old["days"], old["seed"]) == (args.stores, args.days, HELD_OUT_SEED)
    if not same or old["policies"]["oracle"]["first_8_stores"] != record["oracle"]["first_8_stores"]:
        raise SystemExit("distill.json is of other stores or another model: train every student")
    carried, recipes, curves = {}, {}, {}
    for kind in sorted(kinds):
        name = NAMES[kind]
        run = {k: old[k] for k in ("commit", "machine", "date", "command")}
        carried[name] = old.get("carried", {}).get(name, run)
        recipes[name], curves[name] = old["recipe"][name], old["curves"][name]

        def of_student(row: str) -> bool:  # its rounds, and the planner on its base (the privileged one's)
            planner = kind == "privileged" and row.startswith("planner, base distilled")
            return row.startswith(f"{name}, round") or planner

        record |= {row: r for row, r in old["policies"].items() if of_student(row)}
    order = ["oracle", "PPO", "distilled,", "distilled_obs", "distilled_belief", "planner"]
    ranked = sorted(record, key=lambda row: next(i for i, o in enumerate(order) if row.startswith(o)))
    ordered = {row: record[row] for row in ranked}
    record.clear()
    record.update(ordered)
    return carried, recipes, curves


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=64)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--rounds", type=int, default=DistillConfig().rounds)
    ap.add_argument("--ship", action="store_true", help="write the students to checkpoints/")
    ap.add_argument("--skip-planners", action="store_true", help="leave out the planner with a student base")
    ap.add_argument(
        "--students", default="privileged,observed,belief", help="the students to train (comma-separated)"
    )
    args = ap.parse_args()
    kinds = SEEDS
    chosen = args.students.split(",")
    if not chosen or any(k not in kinds for k in chosen):
        raise SystemExit(f"--students: a comma-separated subset of {', '.join(kinds)}, got {args.students!r}")
    rbjax.setup(cache="none")
    source = provenance(sys.argv, "benchmarks/distill.py")  # the tree the run starts from
    env = rbjax.Env()
    train_params = env.default_params()
    config = {k: DistillConfig(student=StudentConfig.of_kind(k), rounds=args.rounds) for k in chosen}
    trained, train_s = {}, {}
    for kind, cfg in config.items():
        start = time.perf_counter()
        last, curve, rounds = distill(env, train_params, cfg, seed=SEEDS[kind])
        train_s[kind] = time.perf_counter() - start
        trained[kind] = (curve, rounds)
        if args.ship:
            save(CHECKPOINTS / SHIPPED[kind], last, cfg, curve, env)

    params = env.default_params().replace(horizon=np.int32(args.days))
    keys = jax.random.split(jax.random.key(HELD_OUT_SEED), args.stores)
    rows = {}
    rows["oracle"] = evaluate(env, params, keys, args.days, oracle, OracleParams.default())
    rows["PPO (greedy, shipped)"] = evaluate(
        env, params, keys, args.days, *rbjax.policies.make("ppo", env, str(rbjax.PPO_CHECKPOINT), True)
    )
    for kind, (_, rounds) in trained.items():
        for r, sp in enumerate(rounds):
            rows[f"{NAMES[kind]}, round {r}"] = evaluate(
                env, params, keys, args.days, Student(config[kind].student), sp
            )
    if not args.skip_planners and "privileged" in trained:
        student = Student(config["privileged"].student)
        planner, pp = make_planner(env, PlanSettings(base=student), trained["privileged"][1][-1])
        rows[f"planner, base distilled round {args.rounds - 1}"] = evaluate(
            env, params, keys, args.days, planner, pp
        )

    shipped_planner = read("planner_heldout")
    assert (shipped_planner["stores"], shipped_planner["days"], shipped_planner["seed"]) == (
        args.stores,
        args.days,
        HELD_OUT_SEED,
    ), "planner_heldout.json is of other stores: run benchmarks/planner.py --held-out"
    planner_nw = shipped_planner["policies"]["plan"]["final_net_worth"]["mean"]
    base = rows["oracle"][0]["final_net_worth"].to_numpy()
    oracle_s = rows["oracle"][1]
    record = {}
    for name, (t, wall) in rows.items():
        nw = t["final_net_worth"].to_numpy()
        record[name] = dict(
            final_net_worth=dict(mean=float(nw.mean()), sd=float(nw.std(ddof=1))),
            first_8_stores=[float(x) for x in nw[:8]],  # what tests/rl/test_distill.py replays
            total_sales=float(t["total_sales"].mean()),
            expired_ratio=float(t["expired_ratio"].mean()),
            survives=float((t["survival_days"] >= args.days).mean()),
            of_oracle=float(nw.mean() / base.mean()),
            of_planner=float(nw.mean() / planner_nw),
            paired={k: float(v) for k, v in paired_row(base, nw).items()},
            wall_s=wall,
            us_per_store_day=1e6 * wall / (args.stores * args.days),
            of_oracle_wall=wall / oracle_s,
        )
    carried, recipes, curves = carry(set(kinds) - set(chosen), record, args)
    table = [table_row(name, r) for name, r in record.items()]
    pp_row = shipped_planner["policies"]["plan"]
    table.insert(
        1,
        {
            "policy": "planner, base oracle (planner_heldout.json)",
            "final net worth": f"{planner_nw:,.0f} ± {pp_row['final_net_worth']['sd']:,.0f}",
            "- oracle (95 % interval)": f"{shipped_planner['paired']['diff']:+,.0f} "
            f"({shipped_planner['paired']['low']:+,.0f} .. {shipped_planner['paired']['high']:+,.0f})",
            "of the oracle": f"{planner_nw / base.mean():.0%}",
            "of the planner": "100%",
            "total sales": f"{pp_row['total_sales']['mean']:,.0f}",
            "expired ratio": f"{pp_row['expired_ratio']['mean']:.4f}",
            "µs / store-day": f"{1e6 * pp_row['wall_s'] / (args.stores * args.days):,.1f}",
            "x oracle's time": f"{pp_row['wall_s'] / shipped_planner['policies']['oracle']['wall_s']:.0f}",
        },
    )
    curves |= {NAMES[k]: c.assign(train_s=train_s[k]).to_dict("records") for k, (c, _) in trained.items()}
    lines = [
        f"# The planner's students: {args.stores} held-out stores x {args.days} days (seed {HELD_OUT_SEED})",
        "",
        markdown_table(pd.DataFrame(table)),
        "",
        "## The recipe",
        "",
    ]
    for name, c in curves.items():
        lines += [
            f"### {name}: {c[0]['train_s']:.0f} s",
            "",
            markdown_table(curve_table(c)),
            "",
        ]
    text = "\n".join(lines)
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "distill.md").write_text(text)
    out = dict(
        **source,
        stores=args.stores,
        days=args.days,
        seed=HELD_OUT_SEED,
        recipe=recipes | {NAMES[k]: c.as_dict() for k, c in config.items()},
        policies=record,
        curves=curves,
        carried=carried,
    )
    write("distill", out)


if __name__ == "__main__":
    main()

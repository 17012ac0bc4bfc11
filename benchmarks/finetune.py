"""RL past the students: each shipped student fine-tuned with PPO over its own choice, then on held-out stores,
paired with the oracle and with its start.

    python benchmarks/finetune.py [--students belief,privileged] [--updates N] [--ship]

1. Fine-tunes each of ``--students`` from its shipped checkpoint with the default recipe
   (``rbjax.rl.finetune.FinetuneConfig()``, on seeds ``SEEDS``), keeping the policy at each evaluation.
2. Plays on 64 held-out stores x 180 days (``planner.HELD_OUT_SEED``: no training or tuning used it) the oracle,
   each start, each kept policy (the learning curve: greedy net worth against store-days and wall time) and, as
   the final row, the last update's policy (no policy is chosen by its held-out score). PPO from scratch is the
   shipped PPO's row of ``distill.json`` (the same stores and keys).
3. ``--ship`` writes a fine-tuned policy to ``checkpoints/`` only where it beats its start (the paired interval
   above 0).

Writes benchmarks/results/finetune.json, benchmarks/out/finetune.md and docs/finetune_curve.png.
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
import pandas as pd

import rbjax
from rbjax.policies import OracleParams, oracle
from rbjax.rl.distill.recipe import FINETUNED, REGISTERED
from rbjax.rl.finetune import FinetuneConfig, finetune
from rbjax.rl.finetune.checkpoint import save, start_of
from rbjax.rl.finetune.recipe import make_evaluate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_tools import markdown_table  # noqa: E402
from planner import HELD_OUT_SEED, paired_row  # noqa: E402
from recorded import OUT, provenance, read, write  # noqa: E402

CHECKPOINTS = Path(__file__).parents[1] / "checkpoints"
SHIPPED = {kind: f"{name}_hard_v2" for kind, name in FINETUNED.items()}
SEEDS = {"privileged": 10, "observed": 11, "belief": 12}  # each kind's fine-tune seed
DOCS = Path(__file__).parents[1] / "docs"


def row_of(nw: np.ndarray, oracle_nw: np.ndarray, start_nw: np.ndarray, days: int, alive: int) -> dict:
    return dict(
        final_net_worth=dict(mean=float(nw.mean()), sd=float(nw.std(ddof=1))),
        first_8_stores=[float(x) for x in nw[:8]],
        of_oracle=float(nw.mean() / oracle_nw.mean()),
        paired={k: float(v) for k, v in paired_row(oracle_nw, nw).items()},
        vs_start={k: float(v) for k, v in paired_row(start_nw, nw).items()},
        survives=alive / len(nw),
    )


def plot(curves: dict, starts: dict, ppo: float, oracle_nw: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.0), constrained_layout=True)
    for i, (name, c) in enumerate(curves.items()):
        c = pd.DataFrame(c)
        for ax, x in zip(axes, ("store_days", "wall_s")):
            ax.plot(c[x], c["held_out"], marker="o", color=f"C{i}", label=f"{name}, fine-tuned")
            ax.axhline(starts[name], color=f"C{i}", ls="--", lw=1, label=f"its start ({REGISTERED_OF[name]})")
    for ax, label in zip(axes, ("store-days of experience", "wall seconds (2 CPU cores)")):
        ax.axhline(oracle_nw, color="black", lw=1, label="the oracle")
        ax.axhline(ppo, color="grey", ls=":", lw=1.5, label="PPO from scratch (2M store-days)")
        ax.set_xlabel(label)
        ax.set_ylabel("mean final net worth, 64 held-out stores")
    axes[0].legend(fontsize="small")
    return fig


REGISTERED_OF = {FINETUNED[k]: REGISTERED[k] for k in FINETUNED}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--students", default="belief,privileged", help="the students to fine-tune (comma-separated)"
    )
    ap.add_argument("--updates", type=int, default=FinetuneConfig().updates)
    ap.add_argument("--ship", action="store_true", help="write each fine-tuned policy that beats its start")
    args = ap.parse_args()
    kinds = args.students.split(",")
    if any(k not in SEEDS for k in kinds):
        raise SystemExit(f"--students: a comma-separated subset of {', '.join(SEEDS)}, got {args.students!r}")
    rbjax.setup(cache="none")
    source = provenance(sys.argv, "benchmarks/finetune.py")
    env = rbjax.Env()
    train_params = env.default_params()
    days, stores = 180, 64
    keys = jax.random.split(jax.random.key(HELD_OUT_SEED), stores)
    rec, _ = jax.device_get(rbjax.rollout(env, oracle, OracleParams.default(), train_params, keys, days=days))
    oracle_nw = np.asarray(rec.net_worth[:, -1], np.float64)
    recorded = read("distill")
    assert recorded["policies"]["oracle"]["first_8_stores"] == [float(x) for x in oracle_nw[:8]], (
        "other stores"
    )
    ppo = recorded["policies"]["PPO (greedy, shipped)"]
    config = FinetuneConfig(updates=args.updates)
    record, curves, starts, trained = {}, {}, {}, {}
    for kind in kinds:
        student, start, recipe, folder = start_of(env, REGISTERED[kind])
        evaluate = make_evaluate(env, student, train_params, days)
        kept = []
        began = time.perf_counter()
        tuned, curve = finetune(
            env, train_params, student, start, config, seed=SEEDS[kind], every=10,
            on_eval=lambda i, p: kept.append((i, p)),
        )  # fmt: skip
        train_s = time.perf_counter() - began
        held = [np.asarray(evaluate(p, keys), np.float64) for _, p in kept]
        name = FINETUNED[kind]
        start_nw, final_nw = held[0], held[-1]
        alive = lambda p: int(  # noqa: E731
            (
                jax.device_get(rbjax.rollout(env, student, p, train_params, keys, days=days)[0].alive[:, -1])
            ).sum()
        )
        record[REGISTERED[kind]] = row_of(start_nw, oracle_nw, start_nw, days, alive(kept[0][1]))
        record[name] = row_of(final_nw, oracle_nw, start_nw, days, alive(kept[-1][1]))
        record[name]["train_s"] = train_s
        gain = record[name]["vs_start"]["diff"]
        record[name]["gain_per_hour"] = gain / (train_s / 3600)
        evals = curve.dropna(subset=["eval_net_worth"]).reset_index(drop=True)
        curves[name] = [
            dict(update=int(r.update), store_days=int(r.store_days), wall_s=float(r.wall_s),
                 validation=float(r.eval_net_worth), held_out=float(h.mean()))
            for r, h in zip(evals.itertuples(), held)
        ]  # fmt: skip
        starts[name] = float(start_nw.mean())
        trained[kind] = (tuned, recipe, folder, curve)
        if args.ship and record[name]["vs_start"]["low"] > 0:
            save(CHECKPOINTS / SHIPPED[kind], tuned, recipe, config, REGISTERED[kind], curve, env)
            record[name]["shipped"] = SHIPPED[kind]
    table = [
        dict(
            policy="oracle", **{"final net worth": f"{oracle_nw.mean():,.0f} ± {oracle_nw.std(ddof=1):,.0f}"}
        ),
        dict(
            policy="PPO from scratch (shipped, greedy)",
            **{
                "final net worth": f"{ppo['final_net_worth']['mean']:,.0f} ± {ppo['final_net_worth']['sd']:,.0f}"
            },
        ),
    ]
    for name, r in record.items():
        p, v = r["paired"], r["vs_start"]
        table.append(
            {
                "policy": name,
                "final net worth": f"{r['final_net_worth']['mean']:,.0f} ± {r['final_net_worth']['sd']:,.0f}",
                "of the oracle": f"{r['of_oracle']:.1%}",
                "- oracle (95 % interval)": f"{p['diff']:+,.0f} ({p['low']:+,.0f} .. {p['high']:+,.0f})",
                "- its start (95 % interval)": f"{v['diff']:+,.0f} ({v['low']:+,.0f} .. {v['high']:+,.0f})"
                if name in FINETUNED.values()
                else "",
                "survive": f"{r['survives']:.0%}",
            }
        )
    text = "\n".join(
        [f"# Fine-tuned students: {stores} held-out stores x {days} days (seed {HELD_OUT_SEED})", "",
         markdown_table(pd.DataFrame(table).fillna("")), ""]
    )  # fmt: skip
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "finetune.md").write_text(text)
    plot(curves, starts, ppo["final_net_worth"]["mean"], float(oracle_nw.mean())).savefig(
        DOCS / "finetune_curve.png", dpi=100, bbox_inches="tight"
    )
    write(
        "finetune",
        dict(
            **source, stores=stores, days=days, seed=HELD_OUT_SEED, config=dataclasses.asdict(config),
            seeds={FINETUNED[k]: SEEDS[k] for k in kinds}, oracle_first_8_stores=[float(x) for x in oracle_nw[:8]],
            ppo_from_scratch=ppo, policies=record, curves=curves,
        ),
    )  # fmt: skip


if __name__ == "__main__":
    main()

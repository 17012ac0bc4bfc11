"""The paper's four-stage diagnostic table for rbjax's policies driven through the agent tools.

    python benchmarks/diagnostics.py [--stores 8] [--days 180] [--grouping ref19] [--policies oracle,ppo]

Runs the oracle, the shipped PPO policy (greedy) and the classic baselines through the tools (as
``rbjax agents run --model policy:NAME`` does), computes the diagnostics of every store
(``rbjax.agents.analysis.diagnostics``) and writes a table of mean ± sd beside the paper's rows for the oracle and
the selected LLM runs: benchmarks/out/diagnostics.md, diagnostics.csv and four_stages.png.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import jax
import numpy as np
import pandas as pd
from agent_tools import markdown_table

import rbjax
from rbjax.agents.analysis import diagnostics
from rbjax.agents.runs.policy import run_policy_agents
from rbjax.config import EnvConfig
from rbjax.results import paper

OUT = Path(__file__).parent / "out"
POLICIES = ("oracle", "ppo", "base_stock", "s_S")
PAPER_ROWS = (
    ("Oracle", "quality_based"),
    ("GPT-5.5", "react"),
    ("DeepSeek-V4-Pro", "plan_and_act"),
    ("Kimi-K2.6", "react"),
    ("Qwen3.5-397B-A17B", "reflection"),
)


def run(env, name: str, stores: int, days: int, folder: str) -> pd.DataFrame:
    checkpoint = rbjax.PPO_CHECKPOINT if name == "ppo" else None
    policy, policy_params = rbjax.policies.make(name, env, checkpoint, True)
    params = env.default_params().replace(horizon=np.int32(days))
    keys = jax.random.split(jax.random.key(0), stores)
    run_policy_agents(env, params, policy, policy_params, keys, out=folder)
    categories = {u: env.catalog.category_names[c] for u, c in zip(env.catalog.upc, _grouping(env))}
    return diagnostics.diagnose(folder, categories, include_runner=False)  # as `agents diagnose` for policies


def _grouping(env):
    c = env.catalog
    return c.category_ref19 if env.config.grouping == "ref19" else c.category


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=8)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--grouping", choices=["20", "ref19"], default="20")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    catalog = rbjax.load_catalog()
    env = rbjax.Env(EnvConfig.from_catalog(catalog, grouping=args.grouping), catalog)
    tables, rows = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.policies.split(","):
            tables[name] = run(env, name, args.stores, args.days, f"{tmp}/{name}")
            summary = diagnostics.summarize(tables[name])
            rows.append(
                {
                    "row": f"{name} (rbjax, {args.stores} stores)",
                    **{r["paper name"]: f"{r['mean']:.4f} ± {r['sd']:.4f}" for _, r in summary.iterrows()},
                }
            )
            print(rows[-1], flush=True)
    for model, framework in PAPER_ROWS:
        ref = paper.FOUR_STAGE[(model, framework)]
        rows.append(
            {
                "row": f"{model} ({framework}), paper",
                **{label: f"{ref[col]:.4f}" for col, label in diagnostics.COLUMNS.items()},
            }
        )
    table = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    table.to_csv(out / "diagnostics.csv", index=False)
    text = markdown_table(table)
    (out / "diagnostics.md").write_text(text)
    papers = {f"{m} (paper)": paper.FOUR_STAGE[(m, f)] for m, f in PAPER_ROWS[:2]}
    fig = diagnostics.plot_stages({f"{n} (rbjax)": t for n, t in tables.items()}, papers)
    fig.savefig(out / "four_stages.png", dpi=110)
    print(text)


if __name__ == "__main__":
    main()

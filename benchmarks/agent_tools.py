"""Throughput of agents driving stores through the tools: the oracle as an agent, once compiled.

    python benchmarks/agent_tools.py [--stores 1,8,64] [--days 10] [--trace]

For each batch size: agent-days per second and the engine's share of the wall
time (the batched steps and policy calls; the rest is the tools on the host: views, drafts, traces). The
oracle makes about 70 tool calls per store-day. Writes benchmarks/out/agent_tools.md and .csv.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd

import rbjax
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs.policy import run_policy_agents

OUT = Path(__file__).parent / "out"


def markdown_table(table: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (no extra dependency)."""
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def measure(env, stores: int, days: int, trace: bool) -> dict:
    params = env.default_params().replace(horizon=np.int32(days))
    keys = jax.random.split(jax.random.key(0), stores)
    run = lambda out: run_policy_agents(
        env, params, rbjax.policies.oracle, rbjax.policies.OracleParams.default(), keys, out=out
    )
    with tempfile.TemporaryDirectory() as tmp:
        run(tmp if trace else None)  # compile
        engine_time = [0.0]
        step, policy_actions = AgentEngine.step, AgentEngine.policy_actions

        def timed(f):
            def wrapper(*a, **k):
                start = time.perf_counter()
                try:
                    return f(*a, **k)
                finally:
                    engine_time[0] += time.perf_counter() - start

            return wrapper

        AgentEngine.step, AgentEngine.policy_actions = timed(step), timed(policy_actions)
        try:
            start = time.perf_counter()
            run(tmp if trace else None)
            wall = time.perf_counter() - start
        finally:
            AgentEngine.step, AgentEngine.policy_actions = step, policy_actions
    agent_days = stores * days
    return {
        "stores": stores,
        "days": days,
        "wall_s": round(wall, 2),
        "agent_days_per_s": round(agent_days / wall, 1),
        "engine_share": round(engine_time[0] / wall, 3),
        "traces": trace,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", default="1,8,64")
    ap.add_argument("--days", type=int, default=10)
    ap.add_argument("--trace", action="store_true", help="write tool_calls.jsonl (to a temporary folder)")
    args = ap.parse_args()
    env = rbjax.Env()
    rows = []
    for b in (int(x) for x in args.stores.split(",")):
        rows.append(measure(env, b, args.days, args.trace))
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    table.to_csv(OUT / "agent_tools.csv", index=False)
    text = markdown_table(table)
    (OUT / "agent_tools.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

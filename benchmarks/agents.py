"""Language-model agents at scale, with a scripted model of fixed latency standing in for the endpoint.

    python benchmarks/agents.py [--stores 1,64,512] [--days 3] [--latency 1.0]

Each store runs ReAct; every model call waits ``--latency`` seconds, then answers from a script: on turn 1
four views and an order, on turn 2 one more view, on turn 3 ``end_today`` (three model calls, seven tool
calls a day with end_today, plus the runner's two views). The engine is compiled by a warm-up run first.
Reported per batch: agent-days per hour, model requests per second, the lower bound the latency alone sets
(``days x turns x latency``) and the share of the wall time spent in the engine's batched steps; the rest
is the host (prompts, parsing, tools, traces, checkpoints) and waiting on the model.
Writes benchmarks/out/agents.md and agents.csv.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd
from agent_tools import markdown_table  # noqa: E402

import rbjax
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.llm.client import ScriptedModel
from rbjax.agents.runs.llm_agents import run_llm_agents

OUT = Path(__file__).parent / "out"
TURNS = 3


def script(skus):
    call = lambda name, **a: f"<tool_call>{json.dumps({'name': name, 'arguments': a})}</tool_call>"
    first = (
        call("view_today_news")
        + call("view_inventory")
        + call("view_current_date_supplier_prices", sku_ids=skus)
        + call("view_sku_avg_ratings", sku_ids=skus, start_date="1991-08-01", end_date="1991-09-06")
        + call("place_order", items=[{"sku_id": skus[0], "quantity": 30}], supplier_id="supplier_1")
    )

    def reply(messages, n):
        turn = sum(m["role"] == "assistant" for m in messages)
        return first if turn == 0 else call("view_notes") if turn == 1 else call("end_today")

    return reply


def measure(env, stores: int, days: int, latency: float) -> dict:
    params = env.default_params().replace(horizon=np.int32(days))
    keys = jax.random.split(jax.random.key(0), stores)
    reply = script(list(env.catalog.upc[:5]))
    model = lambda s: ScriptedModel(reply, latency=latency, keep=False)
    with tempfile.TemporaryDirectory() as tmp:
        warm = params.replace(horizon=np.int32(1))
        run_llm_agents(
            env, warm, keys, "react", lambda s: ScriptedModel(reply, keep=False), tmp, progress_seconds=0
        )
        engine_time = [0.0]
        step = AgentEngine.step

        def timed(*a, **k):
            start = time.perf_counter()
            try:
                return step(*a, **k)
            finally:
                engine_time[0] += time.perf_counter() - start

        AgentEngine.step = timed
        try:
            start = time.perf_counter()
            _, tools, agents = run_llm_agents(
                env, params, keys, "react", model, tmp + "/run", progress_seconds=0
            )
            wall = time.perf_counter() - start
        finally:
            AgentEngine.step = step
    requests = int(tools["requests"].sum())
    return {
        "stores": stores,
        "days": days,
        "latency_s": latency,
        "wall_s": round(wall, 2),
        "latency_bound_s": round(days * TURNS * latency, 2),
        "agent_days_per_hour": round(stores * days / wall * 3600),
        "requests_per_s": round(requests / wall, 1),
        "engine_share": round(engine_time[0] / wall, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", default="1,64,512")
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per model call")
    args = ap.parse_args()
    env = rbjax.Env()
    rows = []
    for b in (int(x) for x in args.stores.split(",")):
        rows.append(measure(env, b, args.days, args.latency))
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    table.to_csv(OUT / "agents.csv", index=False)
    (OUT / "agents.md").write_text(
        f"# Scripted ReAct agents, {TURNS} model calls a day of {args.latency} s each\n\n"
        + markdown_table(table)
    )
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()

"""A scripted language model on task slices, end to end: warm-up, the agent's days, the paired comparison.

    python benchmarks/agent_slices.py [--stores 8] [--at 90] [--days 7]

The oracle plays ``--stores`` stores to day ``--at``; ``open_slice`` replays those days through the tools (the
source policy, as ``rbjax agents run --from-states`` does) and checks the state against the snapshot. Then a
ReAct agent whose model is a script plays ``--days`` days: each morning it views the inventory, orders 40
units of the 8 products it holds the fewest of from supplier_1, and ends the day. The oracle continues the
same stores with the same keys. Reported: the warm-up's and the agents' agent-days/s, and the paired summary
(net-worth difference, decisions that differ). Writes benchmarks/out/agent_slices.md.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import jax

from rbjax import Env
from rbjax.agents.llm.client import ScriptedModel
from rbjax.agents.runs.llm_agents import run_llm_agents
from rbjax.agents.runs.slices import open_slice
from rbjax.files import snapshots
from rbjax.policies import make
from rbjax.runners import paired
from rbjax.runners.rollout import rollout

OUT = Path(__file__).parent / "out"


def call(name: str, **args) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def script(messages, n: int) -> str:
    """Turn 1: view the inventory; turn 2: order the 8 products with the fewest units; turn 3: end the day."""
    turns = sum(m["role"] == "assistant" for m in messages)
    if turns == 0:
        return call("view_inventory")
    if turns == 1:
        text = messages[-1]["content"]
        held = re.findall(r"^- (\S+): quantity (\d+)", text, flags=re.M)
        fewest = [sku for sku, _ in sorted(held, key=lambda x: int(x[1]))[:8]]
        items = [{"sku_id": sku, "quantity": 40} for sku in fewest]
        return call("place_order", items=items, supplier_id="supplier_1") if items else call("end_today")
    return call("end_today")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=8)
    ap.add_argument("--at", type=int, default=90)
    ap.add_argument("--days", type=int, default=7)
    args = ap.parse_args()
    env = Env()
    params = env.default_params()
    oracle = make("oracle")
    keys = jax.random.split(jax.random.key(0), args.stores)
    _, state = rollout(env, *oracle, params, keys, days=args.at, devices=jax.devices()[:1])
    snap = snapshots.Snapshot(jax.device_get(state), keys, args.at, params)
    start = time.perf_counter()
    sl = open_slice(env, snap, *oracle, days=args.days)
    warm = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        rec, tools, _ = run_llm_agents(
            env, None, None, "react", ScriptedModel(script), out, start=sl, progress_seconds=0
        )
        played = time.perf_counter() - start
    table = sl.compare(rec)
    summary = paired.format_summary(paired.summarize(table), "scripted", "oracle", args.days)
    lines = [
        f"# A scripted ReAct agent on {args.days}-day slices from day {args.at} ({args.stores} oracle stores)",
        "",
        f"- warm-up (the oracle through the tools, days 0 to {args.at - 1}, state checked): {warm:.1f} s, "
        f"{args.stores * args.at / warm:,.0f} agent-days/s"
        + (f"; float fields adopted from the snapshot: {', '.join(sl.adopted)}" if sl.adopted else ""),
        f"- the agents' days: {played:.1f} s, {args.stores * args.days / played:,.1f} agent-days/s, "
        f"{int(tools['requests'].sum())} model requests",
        "",
        "```",
        summary,
        "```",
    ]
    OUT.mkdir(exist_ok=True)
    (OUT / "agent_slices.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

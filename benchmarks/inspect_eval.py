"""RetailBench through Inspect (``rbjax.lm.faces.inspect_eval``) beside the same tasks through ``SessionPool``
directly: samples per second and tool calls per second at 1, 64 and 256 concurrent samples, with an instant
mock model. What Inspect's harness (its react loop, tool dispatch, transcript and log) costs per call.

    .venv-inspect/bin/python benchmarks/inspect_eval.py [--samples 1,64,256] [--days 3] [--at 30]

Needs the ``inspect`` extra (``pip install 'rbjax[inspect]'``). It makes (once, in --work) the slices folder
of ``benchmarks/lm_env.py`` (16 oracle stores, snapshots every 30 days) and a tasks file of --days-day slices
from --at with no continuation; N samples cycle over its 16 tasks (their rows repeated under new ids).
Each sample-day is the scripted day of ``lm_env.py`` (view_funds_and_date, view_inventory, view_sku_prices,
view_current_date_supplier_prices, modify_sku_price, place_order) and end_today: 7 tool calls.

- direct: N sessions of one ``SessionPool(slots=N)`` opened, each day's 6 calls made, every live session's
  day ended in one ``pool.end_days`` step, then closed (``lm_env.measure``'s loop);
- inspect: ``inspect_ai.eval(retail(tasks=..., slots=N), max_samples=N, max_connections=N)`` with
  ``mockllm`` answering instantly: each day one reply with the 6 calls, then one with end_today (two model
  turns a day); the log is written (to --work), as in any eval.

Each N first plays a warm-up (one sample, both ways) so that neither measurement compiles. Rates are over the
whole run: samples / wall time, tool calls / wall time (end_today included). Overhead per call is
1/(inspect rate) - 1/(direct rate) in tool calls per second. Writes inspect_eval.csv to --out and prints a
markdown table (docs/inspect.md keeps one).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CALLS_PER_DAY = 7  # lm_env.scripted_day's 6 and end_today


def ensure_tasks(work: str, at: int, days: int, samples: int) -> str:
    """A tasks file of ``samples`` rows: the 16 tasks of day ``at`` of lm_env's slices folder (no
    continuation), cycled, each under its own id (Inspect's sample ids are unique)."""
    import subprocess

    from rbjax.lm.tasks import make_tasks, read_tasks, write_tasks

    slices, base = os.path.join(work, "slices"), os.path.join(work, f"tasks_d{at}_n{days}_k0.jsonl")
    if not os.path.exists(os.path.join(slices, "slices.json")):
        line = f"--devices 1 run --policy oracle --stores 16 --days {at + 30} --every 30 --progress 0"
        subprocess.run([sys.executable, "-m", "rbjax", *line.split(), "--save-states", slices], check=True)
    if not os.path.exists(base):
        write_tasks(make_tasks(slices, days, at=[at], tail=0), base)
    tasks = read_tasks(base)
    path = os.path.join(work, f"tasks_d{at}_n{days}_k0_x{samples}.jsonl")
    rows = [
        dataclasses.replace(tasks[i % len(tasks)], id=f"{tasks[i % len(tasks)].id}-r{i}")
        for i in range(samples)
    ]
    write_tasks(rows, path)
    return path


def direct(pool, tasks, n: int) -> dict:
    """n sessions through the pool: opened, played with the scripted day (one step a day for all), closed."""
    from lm_env import scripted_day

    t0 = time.perf_counter()
    opened = [pool.open(tasks[i % len(tasks)]) for i in range(n)]
    skus = opened[0].tools.names.skus[:5]
    calls = 0
    while live := [s for s in opened if not s.done]:
        for s in live:
            calls += scripted_day(s, skus)
        pool.end_days(live)
        calls += len(live)
    for s in opened:
        pool.close(s)
    wall = time.perf_counter() - t0
    return {"samples": n, "path": "direct", "wall_s": wall, "tool_calls": calls}


def mock_model(skus):
    """mockllm's outputs: a day's first reply makes lm_env's 6 calls, the next ends the day."""
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.tool import ToolCall

    day = [
        ("view_funds_and_date", {}),
        ("view_inventory", {}),
        ("view_sku_prices", {"sku_ids": skus}),
        ("view_current_date_supplier_prices", {"sku_ids": skus}),
        ("modify_sku_price", {"sku_id": skus[0], "new_price": 2.49}),
        ("place_order", {"items": [{"sku_id": skus[1], "quantity": 20}], "supplier_id": "supplier_1"}),
    ]

    def reply(calls):
        message = ChatMessageAssistant(
            content="",
            tool_calls=[ToolCall(id=f"c{i}", function=f, arguments=a) for i, (f, a) in enumerate(calls)],
            model="mockllm/model",
        )
        out = ModelOutput.from_message(message)
        out.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)  # offline: no tiktoken
        return out

    def outputs(input, tools, tool_choice, config):
        if any(isinstance(m, ChatMessageAssistant) for m in input):
            return reply([("end_today", {})])
        return reply(day)

    return get_model("mockllm/model", custom_outputs=outputs)


def through_inspect(path: str, n: int, skus, log_dir: str) -> dict:
    from inspect_ai import eval as inspect_eval

    from rbjax.lm.faces.inspect_eval import retail

    t0 = time.perf_counter()
    (log,) = inspect_eval(
        retail(tasks=path, slots=n),
        model=mock_model(skus),
        max_samples=n,
        max_connections=n,
        display="none",
        log_dir=log_dir,
    )
    wall = time.perf_counter() - t0
    if log.status != "success":
        raise RuntimeError(f"inspect, {n} samples: {log.status}: {log.error}")
    calls = sum(s.scores["session_reward"].metadata["tool_calls"] for s in log.samples)
    return {"samples": n, "path": "inspect", "wall_s": wall, "tool_calls": calls}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", default="1,64,256")
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--at", type=int, default=30)
    ap.add_argument("--work", default="benchmarks/out/lm_env")
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args()
    import rbjax

    rbjax.setup(devices=1)
    from rbjax.lm.pool import SessionPool
    from rbjax.lm.tasks import read_tasks

    os.makedirs(args.out, exist_ok=True)
    sizes = [int(x) for x in args.samples.split(",")]
    rows = []
    logs = tempfile.mkdtemp(prefix="inspect-bench-logs-", dir=args.work if os.path.isdir(args.work) else None)
    for n in sizes:
        path = ensure_tasks(args.work, args.at, args.days, n)
        tasks = read_tasks(path)
        pool = SessionPool.for_task(tasks[0], slots=n)
        skus = list(pool.names.skus[:5])
        direct(pool, tasks, 1)  # warm-up: the pool's programs compile for its batch
        warm = ensure_tasks(args.work, args.at, args.days, 1)
        through_inspect(warm, n, skus, logs)  # warm-up: the face's pool of n slots is made
        rows.append(direct(pool, tasks, n))
        rows.append(through_inspect(path, n, skus, logs))
        pool.close_all()
        for r in rows[-2:]:
            print(json.dumps(r), file=sys.stderr)
    table = pd.DataFrame(rows)
    table["samples_per_s"] = table["samples"] / table["wall_s"]
    table["tool_calls_per_s"] = table["tool_calls"] / table["wall_s"]
    table.to_csv(os.path.join(args.out, "inspect_eval.csv"), index=False)
    print(markdown(table))


def markdown(table: pd.DataFrame) -> str:
    """One row per N: both paths' rates and Inspect's overhead per tool call."""
    lines = [
        "| concurrent samples | direct: samples/s | direct: tool calls/s | Inspect: samples/s | "
        "Inspect: tool calls/s | Inspect's cost per call |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, both in table.groupby("samples", sort=True):
        d, i = (both[both["path"] == p].iloc[0] for p in ("direct", "inspect"))
        cost = 1e3 * (1 / i["tool_calls_per_s"] - 1 / d["tool_calls_per_s"])
        lines.append(
            f"| {n} | {d['samples_per_s']:,.1f} | {d['tool_calls_per_s']:,.0f} | {i['samples_per_s']:,.1f} | "
            f"{i['tool_calls_per_s']:,.0f} | {cost:,.2f} ms |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

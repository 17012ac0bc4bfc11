"""Language-model sessions under load (``rbjax.lm``), with an instant scripted model: sessions opened per
second, tool calls per second, episode-days per second and memory per session at 1, 64 and 512 concurrent
sessions, through the Python API; and the tool history's cost (made once per snapshot day) against opening.

    python benchmarks/lm_env.py [--sessions 1,64,512] [--days 2] [--at 30] [--out benchmarks/out]

It makes (once, in --work) a slices folder of 16 oracle stores with snapshots every 30 days and a tasks file
of 2-day slices from --at; sessions cycle over its tasks. Each session-day makes the calls of a scripted
model: view_funds_and_date, view_inventory, view_sku_prices (5 SKUs), view_current_date_supplier_prices (5
SKUs), modify_sku_price, place_order, then end_today (every session ends its day in one batched step).
Writes lm_env.csv and prints a table (docs/lm_training.md keeps one).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def ensure_tasks(work: str, at: int, days: int) -> str:
    slices, tasks = os.path.join(work, "slices"), os.path.join(work, f"tasks_d{at}_n{days}.jsonl")
    if not os.path.exists(os.path.join(slices, "slices.json")):
        line = f"--devices 1 run --policy oracle --stores 16 --days {at + 30} --every 30 --progress 0"
        subprocess.run([sys.executable, "-m", "rbjax", *line.split(), "--save-states", slices], check=True)
    if not os.path.exists(tasks):
        from rbjax.lm.tasks import make_tasks, write_tasks

        start = time.perf_counter()
        write_tasks(make_tasks(slices, days, at=[at]), tasks)
        print(f"tasks and tool history of 16 stores from day {at}: {time.perf_counter() - start:.1f} s")
    return tasks


def scripted_day(session, skus) -> int:
    session.call("view_funds_and_date")
    session.call("view_inventory")
    session.call("view_sku_prices", {"sku_ids": skus})
    session.call("view_current_date_supplier_prices", {"sku_ids": skus})
    session.call("modify_sku_price", {"sku_id": skus[0], "new_price": 2.49})
    session.call("place_order", {"items": [{"sku_id": skus[1], "quantity": 20}], "supplier_id": "supplier_1"})
    return 6


def measure(pool, tasks, n: int) -> dict:
    """Open n sessions, play every one to its end (scripted), close them."""
    rss0 = rss_mb()
    t0 = time.perf_counter()
    opened = []
    open_times = []
    for i in range(n):
        t = time.perf_counter()
        opened.append(pool.open(tasks[i % len(tasks)]))
        open_times.append(time.perf_counter() - t)
    t_open = time.perf_counter() - t0
    rss1 = rss_mb()
    skus = opened[0].tools.names.skus[:5]
    calls = days = 0
    t1 = time.perf_counter()
    while any(not s.done for s in opened):
        live = [s for s in opened if not s.done]
        for s in live:
            calls += scripted_day(s, skus)
        pool.end_days(live)
        calls += len(live)
        days += len(live)
    t_play = time.perf_counter() - t1
    for s in opened:
        pool.close(s)
    return {
        "sessions": n,
        "open_ms_median": 1e3 * float(np.median(open_times)),
        "open_ms_max": 1e3 * float(np.max(open_times)),
        "opened_per_s": n / t_open,
        "tool_calls_per_s": calls / t_play,
        "episode_days_per_s": days / t_play,
        "mb_per_session": (rss1 - rss0) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="1,64,512")
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--at", type=int, default=30)
    ap.add_argument("--work", default="benchmarks/out/lm_env")
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    import rbjax

    rbjax.setup(devices=1)
    from rbjax.lm.pool import SessionPool
    from rbjax.lm.tasks import read_tasks

    tasks = read_tasks(ensure_tasks(args.work, args.at, args.days))
    sizes = [int(x) for x in args.sessions.split(",")]
    pool = SessionPool.for_task(tasks[0], slots=max(sizes))
    measure(pool, tasks, 2)  # compile the load and step programs
    rows = [measure(pool, tasks, n) for n in sizes]
    table = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    table.to_csv(os.path.join(args.out, "lm_env.csv"), index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))


if __name__ == "__main__":
    main()

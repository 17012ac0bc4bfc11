"""Language-model sessions under load (``rbjax.lm``), with an instant scripted model: sessions opened per
second, tool calls per second, episode-days per second and memory per session at 1, 64 and 512 concurrent
sessions, through the Python API; and the tool history's cost (made once per snapshot day) against opening.
With ``--server N[,M]``, the same through ``rbjax lm serve`` (JSON over HTTP on 127.0.0.1).

    python benchmarks/lm_env.py [--sessions 1,64,512] [--server 64,256] [--days 2] [--at 30] [--tails 0,14]
        [--out benchmarks/out]

It makes (once, in --work) a slices folder of 16 oracle stores with snapshots every 30 days and a tasks file
of 2-day slices from --at; sessions cycle over its tasks. Each session-day makes the calls of a scripted
model: view_funds_and_date, view_inventory, view_sku_prices (5 SKUs), view_current_date_supplier_prices (5
SKUs), modify_sku_price, place_order, then end_today (every session ends its day in one batched step).
Writes lm_env.csv and prints a table (docs/lm_training.md keeps one).

--server N[,M] starts ``rbjax lm serve --tasks F --slots max(N, M) --port 0`` as a subprocess (its output goes
to server.log in --work), waits for /health, plays two warm-up sessions (the server compiles its programs),
then for each N: N asyncio clients, each with its own keep-alive connection (raw HTTP/1.1), open one session
each (POST /sessions with a served task's id; every open at once), wait until all are open, then each plays
its task to the end with the scripted day above (POST /sessions/{id}/call, end_today included) and closes it
(DELETE). Rates are over the play phase, from the moment every session is open to the last session's end.
Overhead per call is 1/rate_server - 1/rate_api with both rates in tool calls per second at the same N in
the same run (the Python API's row; measured with --sessions N when N is not in --sessions): the extra
wall time per call of the whole loop, so it includes the client's HTTP and JSON work, which shares the
machine's cores with the server. Writes lm_env_server.csv beside lm_env.csv. The server is killed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
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


def ensure_tasks(work: str, at: int, days: int, tail: int = 0) -> str:
    slices, tasks = os.path.join(work, "slices"), os.path.join(work, f"tasks_d{at}_n{days}_k{tail}.jsonl")
    if not os.path.exists(os.path.join(slices, "slices.json")):
        line = f"--devices 1 run --policy oracle --stores 16 --days {at + 30} --every 30 --progress 0"
        subprocess.run([sys.executable, "-m", "rbjax", *line.split(), "--save-states", slices], check=True)
    if not os.path.exists(tasks):
        from rbjax.lm.tasks import make_tasks, write_tasks

        start = time.perf_counter()
        write_tasks(make_tasks(slices, days, at=[at], tail=tail), tasks)
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
        "tail": tasks[0].tail,
        "play_ms_per_session": 1e3 * t_play / n,
    }


# ---------------------------------------------------------------------- through the server
class Http:
    """One keep-alive HTTP/1.1 connection: JSON in, (status, JSON) out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, host: str, port: int) -> Http:
        return cls(*await asyncio.open_connection(host, port))

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {len(data)}\r\n"
        if data:
            head += "Content-Type: application/json\r\n"
        self.writer.write(head.encode() + b"\r\n" + data)
        await self.writer.drain()
        line = await self.reader.readline()
        if not line:
            raise ConnectionError("the server closed the connection")
        status, size = int(line.split()[1]), 0
        while True:
            h = await self.reader.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                size = int(value)
        raw = await self.reader.readexactly(size) if size else b""
        return status, json.loads(raw) if raw else None

    def close(self) -> None:
        self.writer.close()


def http_call(h: Http, sid: str, tool: str, args: dict | None = None):
    return h.request("POST", f"/sessions/{sid}/call", {"tool": tool, "args": args or {}})


async def server_day(h: Http, sid: str, skus) -> dict:
    """``scripted_day`` and end_today over HTTP; returns end_today's answer."""
    calls = (
        ("view_funds_and_date", None),
        ("view_inventory", None),
        ("view_sku_prices", {"sku_ids": skus}),
        ("view_current_date_supplier_prices", {"sku_ids": skus}),
        ("modify_sku_price", {"sku_id": skus[0], "new_price": 2.49}),
        ("place_order", {"items": [{"sku_id": skus[1], "quantity": 20}], "supplier_id": "supplier_1"}),
        ("end_today", None),
    )
    for tool, args in calls:
        status, answer = await http_call(h, sid, tool, args)
        if status != 200:
            raise RuntimeError(f"{tool}: HTTP {status}: {answer}")
    return answer


async def play_server(url: str, task_ids: list[str], n: int, skus, timeout: float) -> dict:
    """n sessions at once through the server, as ``measure`` through the API; errors are counted, not raised."""
    host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()
    port = int(port)
    all_open, opened = asyncio.Event(), [0]
    open_times, done_at, errors = [], [], []
    counts = {"calls": 0, "days": 0}
    start = [0.0]

    def attempted() -> None:
        opened[0] += 1
        if opened[0] == n:
            start[0] = time.perf_counter()
            all_open.set()

    async def one(i: int) -> None:
        h = sid = None
        try:
            h = await Http.connect(host, port)
            t = time.perf_counter()
            status, answer = await h.request("POST", "/sessions", {"task": task_ids[i % len(task_ids)]})
            if status != 200:
                raise RuntimeError(f"open: HTTP {status}: {answer}")
            open_times.append(time.perf_counter() - t)
            sid = answer["session"]
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
            attempted()
            if h is not None:
                h.close()
            return
        attempted()
        await all_open.wait()
        try:
            while True:
                answer = await server_day(h, sid, skus)
                counts["calls"] += 7
                counts["days"] += 1
                if answer["done"]:
                    break
            done_at.append(time.perf_counter())
            status, answer = await h.request("DELETE", f"/sessions/{sid}")
            if status != 200:
                raise RuntimeError(f"close: HTTP {status}: {answer}")
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
        finally:
            h.close()

    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()
    if pending:
        errors.append(f"{len(pending)} session(s) still running after {timeout:.0f} s")
    t_play = (max(done_at) - start[0]) if done_at else float("nan")
    if errors:
        print(f"server, {n} sessions: {len(errors)} error(s); first: {errors[0]}", file=sys.stderr)
    return {
        "sessions": n,
        "finished": len(done_at),
        "errors": len(errors),
        "open_ms_median": 1e3 * float(np.median(open_times)) if open_times else float("nan"),
        "open_ms_max": 1e3 * float(np.max(open_times)) if open_times else float("nan"),
        "tool_calls_per_s": counts["calls"] / t_play,
        "episode_days_per_s": counts["days"] / t_play,
    }


def start_server(tasks_path: str, slots: int, log_path: str, wait: float = 600.0):
    """``rbjax lm serve`` on a free 127.0.0.1 port (--port 0): (process, url) once /health answers."""
    from rbjax.lm.http import wait_for

    line = ["lm", "serve", "--tasks", tasks_path, "--slots", str(slots), "--port", "0"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rbjax", *line],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    end = time.monotonic() + wait
    try:
        while True:
            with open(log_path) as f:
                found = re.search(r"JSON sessions on (http://\S+)", f.read())
            if found:
                url = found.group(1)
                wait_for(url, timeout=max(1.0, end - time.monotonic()))
                return proc, url
            if proc.poll() is not None:
                raise RuntimeError(f"rbjax lm serve exited with {proc.returncode}; see {log_path}")
            if time.monotonic() > end:
                raise TimeoutError(f"rbjax lm serve did not start in {wait:.0f} s; see {log_path}")
            time.sleep(0.2)
    except BaseException:
        stop_server(proc)
        raise


def stop_server(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def measure_server(args, tasks_path: str, task_ids, skus, sizes, api_rates: dict) -> pd.DataFrame:
    proc, url = start_server(tasks_path, max(sizes), os.path.join(args.work, "server.log"))
    rows = []
    try:
        asyncio.run(play_server(url, task_ids, 2, skus, args.timeout))  # compile the load and step programs
        for n in sizes:
            row = asyncio.run(play_server(url, task_ids, n, skus, args.timeout))
            api = api_rates[n]
            row["api_tool_calls_per_s"] = api
            row["overhead_ms_per_call"] = 1e3 * (1 / row["tool_calls_per_s"] - 1 / api)
            rows.append(row)
        from rbjax.lm.http import Client

        with Client(url, timeout=30) as c:
            health = c.health()
        if health["open"]:
            print(f"server: {health['open']} session(s) still open at the end", file=sys.stderr)
    finally:
        stop_server(proc)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="1,64,512")
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--at", type=int, default=30)
    ap.add_argument(
        "--tails", default="0", help="tasks' continuations (days), each measured at every --sessions size"
    )
    ap.add_argument("--work", default="benchmarks/out/lm_env")
    ap.add_argument("--out", default="benchmarks/out")
    ap.add_argument("--server", default="", help="also through rbjax lm serve, at these numbers of sessions")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds for one server measurement")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    import rbjax

    rbjax.setup(devices=1)
    from rbjax.lm.pool import SessionPool
    from rbjax.lm.tasks import read_tasks

    tails = [int(x) for x in args.tails.split(",")]
    tasks_paths = {k: ensure_tasks(args.work, args.at, args.days, k) for k in tails}
    tasks_path = tasks_paths[tails[0]]
    tasks = read_tasks(tasks_path)
    sizes = [int(x) for x in args.sessions.split(",")]
    server_sizes = [int(x) for x in args.server.split(",") if x]
    pool = SessionPool.for_task(tasks[0], slots=max(sizes + server_sizes))
    rows = []
    for k in tails:
        of_k = read_tasks(tasks_paths[k])
        measure(pool, of_k, 2)  # compile the load and step programs (and the continuation's policy)
        rows += [measure(pool, of_k, n) for n in sizes]
    table = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    table.to_csv(os.path.join(args.out, "lm_env.csv"), index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:,.1f}"))
    if not server_sizes:
        return
    api_rates = {r["sessions"]: r["tool_calls_per_s"] for r in rows if r["tail"] == tails[0]}  # the server's
    for n in server_sizes:
        if n not in api_rates:
            api_rates[n] = measure(pool, tasks, n)["tool_calls_per_s"]
    skus = list(pool.names.skus[:5])
    pool.close_all()
    del pool
    served = measure_server(args, tasks_path, [t.id for t in tasks], skus, server_sizes, api_rates)
    served.to_csv(os.path.join(args.out, "lm_env_server.csv"), index=False)
    print("through rbjax lm serve:")
    print(served.to_string(index=False, float_format=lambda x: f"{x:,.2f}"))


if __name__ == "__main__":
    main()

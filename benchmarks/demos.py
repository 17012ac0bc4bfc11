"""Demonstrations on the default mixed set: what each teacher costs and says, and that every row replays.

    python benchmarks/demos.py [--stores 16] [--tasks 64] [--teachers oracle,plan,distilled]

Run it in an environment with OpenEnv (``pip install -e '.[openenv]'``; CI's ``.venv-openenv``) for the replay
through the OpenEnv server; without it that check is skipped and said so.

1. The default mixed set of docs/lm_training.md at ``--stores`` stores a run (its commands, seed 7): the oracle's
   and the planner's runs with a snapshot every 30 days, the tasks of days 30-120, 3 and 7 decided days, headroom
   0.1 or more; the first ``--tasks`` of them (kept in benchmarks/out/demos/, made once).
2. Each teacher plays them (``rbjax.lm.demos.demonstrate``, 64 stores a batch): wall time per task (the
   compilation included, a fresh pool each), calls, tokens said and read per day (estimated: 4 characters a
   token), mean reward.
3. Every row replayed through sessions (``replay_demos.replay``) and through the OpenEnv server with OpenEnv's
   client (``replay_demos.replay_openenv``): the number whose answers and reward are the recorded ones.

Writes benchmarks/results/demos.json (with the commit, machine, date and command) and prints the rows of
docs/lm_training.md's table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import rbjax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recorded import OUT, provenance, write  # noqa: E402


def mixed_set(work: Path, stores: int, wanted: int) -> str:
    """The tasks file of the default mixed set at ``stores`` stores a run (made once in ``work``)."""
    from rbjax.cli import main

    tasks = work / "tasks.jsonl"
    if not tasks.exists():
        for policy in ("oracle", "plan"):
            if not (work / policy / "slices.json").exists():
                line = (
                    f"run --policy {policy} --stores {stores} --seed 7 --every 30 --progress 0 --save-states"
                )
                main([*line.split(), str(work / policy)])
        main(["lm", "tasks", "--from-states", str(work / "oracle"), str(work / "plan"), "--at", "30,60,90,120",
              "--days", "3,7", "--min-headroom", "0.1", "--out", str(tasks)])  # fmt: skip
    rows = tasks.read_text().splitlines()
    if len(rows) < wanted:
        raise SystemExit(f"the mixed set at {stores} stores has {len(rows)} tasks, fewer than {wanted}")
    first = work / f"tasks_{wanted}.jsonl"
    first.write_text("\n".join(rows[:wanted]) + "\n")
    return str(first)


def served(tasks: str):
    """(url, stop) of an OpenEnv server of ``tasks`` on 127.0.0.1 (uvicorn in a thread)."""
    import uvicorn

    from rbjax.lm.faces.openenv_env import make_app

    app = make_app(tasks, slots=64, max_wait=0.5)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.1)
    host, port = server.servers[0].sockets[0].getsockname()[:2]

    def stop():
        server.should_exit = True
        thread.join(30)

    return f"http://{host}:{port}", stop


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--teachers", default="oracle,plan,distilled")
    args = ap.parse_args()
    rbjax.setup()
    source = provenance(sys.argv, "benchmarks/demos.py")
    from rbjax.lm.demos import demonstrate
    from rbjax.lm.replay_demos import replay
    from rbjax.lm.tasks import read_tasks

    work = OUT / "demos"
    work.mkdir(parents=True, exist_ok=True)
    path = mixed_set(work, args.stores, args.tasks)
    tasks = read_tasks(path)
    try:
        import openenv  # noqa: F401

        url, stop = served(path)
    except ImportError:
        url, stop = None, None
    teachers = {}
    for teacher in args.teachers.split(","):
        start = time.perf_counter()
        rows = demonstrate(tasks, teacher, note=print)
        took = time.perf_counter() - start
        (work / f"demos_{teacher}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        by_session = replay(rows)
        by_openenv = None
        if url is not None:
            from rbjax.lm.replay_demos import replay_openenv

            by_openenv = sum(r["same"] for r in replay_openenv(rows, url))
        days = lambda key: [x for r in rows for x in r[key]]  # noqa: E731
        teachers[teacher] = {
            "tasks": len(rows),
            "seconds_per_task": took / len(rows),
            "mean_reward": statistics.fmean(r["reward"] for r in rows),
            "calls_per_day": statistics.fmean(days("calls_per_day")),
            "tokens_said_per_day": statistics.fmean(days("call_tokens_per_day")),
            "tokens_read_per_day": statistics.fmean(days("result_tokens_per_day")),
            "tokens_per_row": statistics.fmean(
                sum(r["call_tokens_per_day"]) + sum(r["result_tokens_per_day"]) for r in rows
            ),
            "tokens": rows[0]["tokens"],
            "replayed_same_by_session": sum(r["same"] for r in by_session),
            "replayed_same_by_openenv": by_openenv,
        }
        print(teacher, json.dumps(teachers[teacher]))
    if stop is not None:
        stop()
    horizons = sorted({t.days for t in tasks})
    out = {
        **source,
        "set": {
            "stores": args.stores,
            "tasks": len(tasks),
            "horizons": horizons,
            "three_day": sum(t.days == 3 for t in tasks),
            "seven_day": sum(t.days == 7 for t in tasks),
        },  # fmt: skip
        "teachers": teachers,
    }
    write("demos", out)
    print(json.dumps(out, indent=1))
    print("\n".join(table_row(t, r) for t, r in teachers.items()))


def table_row(teacher: str, r: dict) -> str:
    """A teacher's row of docs/lm_training.md's demonstrations table (tests/test_recorded_results.py checks it)."""
    openenv = (
        "n/a" if r["replayed_same_by_openenv"] is None else f"{r['replayed_same_by_openenv']}/{r['tasks']}"
    )
    return (
        f"| {teacher} | {r['tasks']} | {r['seconds_per_task']:.1f} | {r['mean_reward']:+.4f} | "
        f"{r['calls_per_day']:.1f} | {r['tokens_said_per_day']:,.0f} | {r['tokens_read_per_day']:,.0f} | "
        f"{r['tokens_per_row']:,.0f} | {r['replayed_same_by_session']}/{r['tasks']}, {openenv} |"
    )


if __name__ == "__main__":
    main()

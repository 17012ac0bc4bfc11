"""Play one rbjax task through OpenEnv with a trivial scripted policy: look at the inventory, end the day, repeat.

Start a server first (it holds the batched engine; ``pip install 'rbjax[openenv]'``):

    rbjax lm serve --tasks tasks.jsonl --face openenv --port 8777

then:

    python examples/lm_openenv_client.py --url http://127.0.0.1:8777 [--task TASK_ID]

Without ``--task`` the first task the server serves is played (``GET /rbjax/tasks``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.request


async def play(url: str, task: str | None) -> None:
    from openenv.core.mcp_client import MCPToolClient

    if task is None:
        with urllib.request.urlopen(url + "/rbjax/tasks", timeout=30) as r:
            task = json.load(r)[0]
    async with MCPToolClient(base_url=url) as env:
        first = await env.reset(task=task)
        print(f"task {first.observation.task}, session {first.observation.session}")
        print(first.observation.text.splitlines()[0])
        while True:
            inventory = await env.call_tool("view_inventory")
            print("  " + inventory["text"].splitlines()[0])
            out = await env.call_tool("end_today")
            print(f"day {out['day']}: " + out["text"].splitlines()[0])
            if out["done"]:
                break
        print(f"reward {out['reward']:.4f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--url", default="http://127.0.0.1:8777", help="the OpenEnv server (rbjax lm serve --face openenv)"
    )
    ap.add_argument("--task", default=None, help="a served task's id (default: the first)")
    args = ap.parse_args()
    asyncio.run(play(args.url.rstrip("/"), args.task))


if __name__ == "__main__":
    main()

"""Replaying demonstrations: each row's tool calls made again through a session, every answer and the reward
compared with the row's.

A demonstration (``rbjax.lm.demos``) is faithful when a model that says exactly its calls gets exactly its
texts and its reward: the same session, the same random numbers, the same engine program. ``replay`` opens
each row's task in a pool (the row's own task, ``task``), makes each day's calls, ends the days of every row
in one batched step, and reports per row the reward got, the recorded one, and the first answer that differs.

>>> report = replay(read_rows("demos.jsonl"))
>>> assert all(r["same"] for r in report)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from rbjax.lm import conversation
from rbjax.lm.demos import play, pool_for
from rbjax.lm.tasks import Task

TOLERANCE = 1e-6  # relative: |got - recorded| <= TOLERANCE * max(1, |recorded|)


def answers_of(messages: list[dict]) -> list[str]:
    """The tool messages' texts of a conversation, in order."""
    return [m["content"] for m in messages if m.get("role") == "tool"]


def same_reward(got: float | None, recorded: float | None) -> bool:
    """Whether a replayed reward is the recorded one, within ``TOLERANCE`` (None only equals None)."""
    if got is None or recorded is None:
        return got is recorded
    return abs(got - recorded) <= TOLERANCE * max(1.0, abs(recorded))


def replay(
    rows: Sequence[dict], slots: int = 64, note: Callable[[str], None] | None = None, pool=None
) -> list[dict]:
    """[len(rows)] {id, reward, recorded, same (reward within ``TOLERANCE``, every answer and the opening
    equal), answers (answers compared), first_difference (the index of the first answer that differs, or
    None), opening_same}. pool: an open ``SessionPool`` to replay in (made here when None). The rows' days are
    played on the loop of the demonstrations (``rbjax.lm.demos.play``)."""
    tasks = [Task.from_row(r["task"], f"row {i + 1}'s task") for i, r in enumerate(rows)]
    plans = [conversation.days_of(r["messages"]) for r in rows]

    def calls_of(pool, i: int, s, day: int):
        return plans[i][day] if day < len(plans[i]) else None

    def row_of(i: int, s, opening: list[dict], days: list) -> dict:
        got = [answer for _, answers in days for answer in answers]
        return _report(rows[i], got, s.reward, opening == rows[i]["messages"][: len(opening)])

    with pool_for(tasks, slots, pool) as pool:
        said = None if note is None else lambda n: note(f"replay: {n} of {len(rows)} rows")
        return play(pool, tasks, calls_of, row_of, said)


def _report(row: dict, got: list[str], reward: float | None, opening_same: bool) -> dict:
    """One row's replay: {id, reward, recorded, answers, first_difference, same, opening_same}."""
    recorded = answers_of(row["messages"])
    differs = [k for k, (a, b) in enumerate(zip(got, recorded, strict=False)) if a != b]
    if len(got) != len(recorded):
        differs.append(min(len(got), len(recorded)))
    return {
        "id": row.get("id"),
        "reward": reward,
        "recorded": row["reward"],
        "answers": len(recorded),
        "first_difference": differs[0] if differs else None,
        "same": same_reward(reward, row["reward"]) and not differs and opening_same,
        "opening_same": opening_same,
    }


def replay_openenv(
    rows: Sequence[dict], url: str, concurrency: int = 16, timeout_s: float = 600.0
) -> list[dict]:
    """``replay`` through an OpenEnv server of the rows' tasks (``rbjax lm serve --face openenv``, or
    ``server/app.py``) with OpenEnv's own client (``MCPToolClient``): each row reset by its task's id, its
    calls made as a model's, ``concurrency`` rows at once (their days share the server's batched steps), each
    request given ``timeout_s`` seconds.
    Needs ``openenv`` (``pip install 'rbjax[openenv]'``)."""
    from openenv.core.mcp_client import MCPToolClient  # lazy: the openenv extra

    gate = asyncio.Semaphore(concurrency)

    async def one(row: dict) -> dict:
        # a request's timeout (60 s by default) must cover an end_today that plays the continuation and credits
        # the days, which compiles the credit's programs on a fresh server
        async with gate, MCPToolClient(base_url=url, message_timeout_s=timeout_s) as env:
            opened = await env.reset(task=row["id"])
            got, last = [], {"reward": None}
            for calls in conversation.days_of(row["messages"]):
                for name, args in calls:
                    last = await env.call_tool(name, **args)
                    got.append(last["text"])
            first = conversation.opening(Task.from_row(row["task"]).prompt, opened.observation.text)
            return _report(row, got, last["reward"], first == row["messages"][: len(first)])

    async def main() -> list[dict]:
        return list(await asyncio.gather(*(one(r) for r in rows)))

    return asyncio.run(main())

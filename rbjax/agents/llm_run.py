"""Language-model agents on many stores at once: one process, one batched engine, one asyncio task per
store, one shared chat model (its semaphore caps the requests in flight).

Per store, in ``OUT/store_{s}/``: ``tool_calls.jsonl`` (every tool call), ``turns.jsonl`` (one record per
model call: phase, day, round, turn, the new messages, usage, parse method, a hash of the request),
``tokens.jsonl`` (per day; reflection tokens apart) and ``checkpoint.pkl``, rewritten at every day's end:
the store's engine row, ledger, news slots, framework memory, records so far, and the sizes of its log
files. ``run.json`` holds the run's settings (never the API key). With ``resume=True`` each store starts
from its checkpoint and its logs are cut back to it, so finished days are not replayed and the results
equal an uninterrupted run's.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import pickle

import pandas as pd

from rbjax.agents.engine import AgentEngine
from rbjax.agents.frameworks import LLMAgent, Rules, request_hash
from rbjax.agents.llm import Usage
from rbjax.agents.prompts import Prompts
from rbjax.agents.run import Progress, make_stores, run_async, stack_records
from rbjax.agents.trace import TraceWriter, read

CHECKPOINT_VERSION = 1
LOGS = ("tool_calls", "turns", "tokens")


class AgentLog:
    """``turns.jsonl`` and ``tokens.jsonl`` of one store, flushed at every day's end."""

    def __init__(self, folder: str, store: int, resume_at: dict | None = None):
        at = resume_at or {}
        self.store = store
        self.turns = TraceWriter(os.path.join(folder, "turns.jsonl"), at.get("turns"))
        self.tokens = TraceWriter(os.path.join(folder, "tokens.jsonl"), at.get("tokens"))

    def turn(self, agent, phase, messages, new, reply, method, calls, error) -> None:
        self.turns.write(
            {
                "ts": _now(),
                "store": self.store,
                "day": agent.today.day + 1,
                "phase": phase,
                "round": agent.round,
                "turn": agent.turns,
                "request_messages": len(messages),
                "request_hash": request_hash(messages),
                "new_messages": new,
                "usage": None if reply is None else reply.usage.as_dict(),
                "attempts": None if reply is None else reply.attempts,
                "reasoning_chars": None if reply is None else len(reply.reasoning),
                "parse_method": method,
                "calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
                "error": error,
            }
        )

    def day(self, day, usage: Usage, requests, turns, rounds, reflection, calls: tuple[int, int]) -> None:
        """The day's record: tokens, requests, turns, tool calls (direct, all), Plan-and-Act's rounds, the
        reflection call's tokens."""
        rec = {"store": self.store, "day": day, **usage.as_dict(), "requests": requests, "turns": turns}
        rec["direct_tool_calls"], rec["tool_calls"] = calls
        if rounds:
            rec["rounds"] = rounds
        if reflection is not None:
            rec["reflection"] = reflection.as_dict()
        self.tokens.write(rec)
        self.turns.flush()
        self.tokens.flush()

    def sizes(self) -> dict:
        return {"turns": self.turns.flushed_size(), "tokens": self.tokens.flushed_size()}


class Checkpointed:
    """A ``DayAgent`` that saves its store after every day (``checkpoint.pkl``, written atomically)."""

    def __init__(self, agent: LLMAgent, engine: AgentEngine, folder: str, records: list):
        self.agent, self.engine, self.records = agent, engine, records
        self.path = os.path.join(folder, "checkpoint.pkl")

    async def act(self, store, today):
        return await self.agent.act(store, today)

    async def after_day(self, store, today, result):
        await self.agent.after_day(store, today, result)
        files = {"tool_calls": store.trace.flushed_size(), **self.agent.log.sizes()}
        save_checkpoint(
            self.path,
            {
                "version": CHECKPOINT_VERSION,
                "store": store.store,
                "days": today.day + 1,
                "engine": self.engine.rows.pop(store.store),
                "ledger": store.ledger,
                "news": (store.news_today, store.news_remain),
                "memory": self.agent.state(),
                "records": list(self.records),
                "files": files,
            },
        )


def save_checkpoint(path: str, content: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(content, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def load_checkpoint(path: str) -> dict | None:
    """A store's checkpoint (a file this runner wrote: it is unpickled), or None when there is none."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, "rb") as f:
            content = pickle.load(f)
    except Exception as e:  # noqa: BLE001 - any unreadable checkpoint is reported the same way
        raise ValueError(f"{path}: not a readable checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(content, dict) or content.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"{path}: not a checkpoint of this rbjax version")
    return content


def check_resume(out: str, settings: dict) -> None:
    """Refuse to resume a run whose settings differ (stores, days, seed, framework, model, ...)."""
    path = os.path.join(out, "run.json")
    if not os.path.exists(path):
        raise ValueError(f"--resume: {path} not found; this folder holds no run to resume")
    with open(path) as f:
        saved = json.load(f)
    differ = {k: (saved.get(k), v) for k, v in settings.items() if saved.get(k) != v}
    if differ:
        listed = ", ".join(f"{k}: run {a!r}, now {b!r}" for k, (a, b) in differ.items())
        raise ValueError(f"--resume: the run in {out} has other settings ({listed})")


def run_llm_agents(
    env,
    params,
    keys,
    framework: str,
    model,
    out: str,
    rules: Rules | None = None,
    prompts: Prompts | None = None,
    resume: bool = False,
    settings: dict | None = None,
    progress_seconds: float = 30.0,
    **tool_options,
):
    """Run ``len(keys)`` stores, each by its own ``framework`` agent over the shared ``model`` (a
    ``ChatModel``, or ``fn(store) -> ChatModel``), until their episodes end (``params.horizon`` days).

    settings: what identifies the run in ``run.json`` (a resumed run must match it).
    Returns (DayInfo records [B, horizon], the per-store tool and token table, the agents).
    """
    rules, prompts = rules or Rules(), prompts or Prompts()
    settings = {
        "framework": framework,
        "stores": int(len(keys)),
        "days": int(params.horizon),
        **(settings or {}),
    }
    if resume:
        check_resume(out, settings)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(settings | {"rules": vars(rules)}, f, indent=1)
    engine = AgentEngine(env, params, keys)
    engine.keep_rows = True
    saved = {}
    if resume:
        for s in range(engine.B):
            content = load_checkpoint(os.path.join(out, f"store_{s}", "checkpoint.pkl"))
            if content is not None:
                saved[s] = content
        engine.set_rows({s: c["engine"] for s, c in saved.items()})
    stores = make_stores(
        engine, out, resume_at={s: c["files"]["tool_calls"] for s, c in saved.items()}, **tool_options
    )
    records = {s.store: [] for s in stores}
    agents = {}
    for store in stores:
        s = store.store
        folder = os.path.join(out, f"store_{s}")
        log = AgentLog(folder, s, saved[s]["files"] if s in saved else None)
        agent = LLMAgent(
            framework,
            model(s) if callable(model) and not hasattr(model, "complete") else model,
            prompts,
            rules,
            env.catalog,
            float(params.initial_funds),
            float(params.rent),
            log,
        )
        if s in saved:
            c = saved[s]
            store.ledger, (store.news_today, store.news_remain) = c["ledger"], c["news"]
            agent.load_state(c["memory"])
            records[s] = list(c["records"])
        agents[s] = Checkpointed(agent, engine, folder, records[s])
    inner = [a.agent for a in agents.values()]
    counter = Progress(
        len(stores),
        0,
        progress_seconds,
        status=lambda: (
            f"{sum(a.total_tokens for a in inner):,} tokens, "
            f"{sum(a.total_requests for a in inner) / max(counter.elapsed(), 1e-9):.2f} requests/s"
        ),
    )
    for s, rec in records.items():
        counter.days[s] = len(rec)
    asyncio.run(run_async(engine, stores, agents, progress=counter, records=records))
    if progress_seconds:
        counter.print()
    return stack_records(records, int(params.horizon)), tool_token_table(out, len(stores)), inner


def tool_token_table(out: str, stores: int) -> pd.DataFrame:
    """Per store, from its ``tokens.jsonl``: direct and all tool calls per day, tokens per day (the paper's
    last columns), and the requests sent."""
    rows = []
    for s in range(stores):
        days = read(os.path.join(out, f"store_{s}", "tokens.jsonl"))
        n = max(len(days), 1)
        rows.append(
            {
                "direct_tools_per_day": sum(d["direct_tool_calls"] for d in days) / n,
                "total_tools_per_day": sum(d["tool_calls"] for d in days) / n,
                "tokens_per_day": sum(d["total_tokens"] for d in days) / n,
                "requests": sum(d["requests"] for d in days),
            }
        )
    return pd.DataFrame(rows, index=pd.RangeIndex(stores, name="store"))


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

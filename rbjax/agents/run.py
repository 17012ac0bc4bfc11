"""Many stores run by agents over one batched engine: ``run_policy_agents`` drives rbjax policies through
the tools (the LLM runner of the next layer uses the same session, scheduler and engine).

Per store the runner opens each day with ``view_funds_and_date`` and ``view_shelf_status`` (logged with
``issued_by: runner``, as the reference's runner does), lets the agent call tools, and hands the day to the
scheduler at ``end_today``. Outputs per store: ``store_{s}/tool_calls.jsonl``.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import Callable

import jax
import numpy as np

from rbjax.agents.engine import AgentEngine
from rbjax.agents.formats import Names
from rbjax.agents.ledger import StoreLedger
from rbjax.agents.policy_agent import PolicyDriver, policy_calls
from rbjax.agents.scheduler import DayScheduler
from rbjax.agents.tools import StoreTools
from rbjax.agents.trace import TraceWriter
from rbjax.state import DayInfo


def make_stores(engine: AgentEngine, out: str | None, **tool_options) -> list[StoreTools]:
    """One ``StoreTools`` per store of ``engine``, its ledger filled with the pre-opening days."""
    env, params = engine.env, engine.params
    cfg = env.config
    names = Names(env.catalog, cfg.num_suppliers)
    first_cal = int(params.open_day) - cfg.history_days
    stores = []
    for s in range(engine.B):
        ledger = StoreLedger(
            first_cal, cfg.history_days + int(params.horizon) + 1, cfg.num_products, cfg.num_suppliers
        )
        ledger.add_opening(jax.tree.map(lambda x: x[s], engine.opening))
        trace = TraceWriter(os.path.join(out, f"store_{s}", "tool_calls.jsonl")) if out else None
        stores.append(
            StoreTools(
                s,
                names,
                ledger,
                engine.seeds[s],
                engine.pay,
                float(params.rent),
                int(params.capacity),
                trace,
                engine.max_lines,
                engine.news_seed(s),
                **tool_options,
            )
        )
    return stores


class Progress:
    """A line on stderr each time every store has finished another ``every`` days (0: silent)."""

    def __init__(self, stores: int, every: int):
        self.every, self.days, self.calls = every, [0] * stores, 0
        self.mark, self.start = every, time.perf_counter()

    def day_done(self, store: StoreTools) -> None:
        self.days[store.store] += 1
        self.calls += store.calls
        if self.every and min(self.days) >= self.mark:
            elapsed = time.perf_counter() - self.start
            print(
                f"agents: day {min(self.days)} of every store, {len(self.days)} stores, "
                f"{sum(self.days) / elapsed:,.1f} agent-days/s, {self.calls:,} tool calls",
                file=sys.stderr,
            )
            self.mark += self.every


async def _run_store(
    store: StoreTools, engine, scheduler, act: Callable, jitter: float, records: list, progress
):
    s = store.store
    try:
        while True:
            today = engine.today(s)
            if today.done:
                return
            store.begin_day(today)
            for name in ("view_funds_and_date", "view_shelf_status"):
                store.call(name, issued_by="runner")
            await act(store, today)
            if jitter:  # finish the day after a random delay: the results must not depend on it
                await asyncio.sleep(random.Random(hash((s, today.day))).random() * jitter)
            info, detail = await scheduler.end_day(s, store.day_action())
            store.finish_day(info, detail, engine.today(s))
            records.append((today.day, info))
            progress.day_done(store)
    finally:
        scheduler.leave(s)


async def run_async(
    engine: AgentEngine, stores: list[StoreTools], act: Callable, jitter: float = 0.0, progress: int = 0
):
    """Run every store until its episode ends; returns {store: [(day, DayInfo row), ...]}.

    act: ``async act(store_tools, today)``, the agent's calls of one day (``end_today`` is the runner's).
    progress: a progress line every N days (0: none).
    """
    scheduler = DayScheduler(engine)
    counter = Progress(len(stores), progress)
    records = {s.store: [] for s in stores}
    for s in stores:
        scheduler.join(s.store)
    try:
        await asyncio.gather(
            *(_run_store(s, engine, scheduler, act, jitter, records[s.store], counter) for s in stores)
        )
    finally:
        scheduler.close()
    return records


def stack_records(records: dict, days: int) -> DayInfo:
    """{store: [(day, DayInfo row)]} -> DayInfo [B, days]; days after a store's end are recorded as
    ``rollout`` records them (zeros, funds and net worth held, alive False)."""
    rows = []
    for s in sorted(records):
        got = dict(records[s])
        last = got[max(got)]
        dead = jax.tree.map(np.zeros_like, last).replace(funds=last.funds, net_worth=last.net_worth)
        rows.append([got.get(d, dead) for d in range(days)])
    return jax.tree.map(
        lambda *x: np.stack(x).reshape(len(rows), days, *x[0].shape), *[r for row in rows for r in row]
    )


def run_policy_agents(
    env,
    params,
    policy,
    policy_params,
    keys,
    out: str | None = None,
    jitter: float = 0.0,
    progress: int = 0,
    **tool_options,
):
    """Drive ``policy`` through the tools for ``len(keys)`` stores until their episodes end (the horizon is
    ``params.horizon``). Returns (DayInfo records [B, horizon], the engine, the stores' tools)."""
    engine = AgentEngine(env, params, keys)
    stores = make_stores(engine, out, **tool_options)
    driver = PolicyDriver(engine, policy, policy_params)

    async def act(store, today):
        for name, args in policy_calls(driver.action(store.store), today, store.names):
            store.call(name, args)

    records = asyncio.run(run_async(engine, stores, act, jitter, progress))
    return stack_records(records, int(params.horizon)), engine, stores

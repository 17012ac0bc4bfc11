"""Many stores run by agents over one batched engine: the async day loop (``run_async``) that the policy
runner (``policy.run_policy_agents``), the language-model runner (``llm_agents``) and slices share, with the
stores' tools (``make_stores``) and the records stacked (``stack_records``).

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
from typing import Protocol

import jax
import numpy as np

from rbjax import programs
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.engine.ledger import StoreLedger, Today
from rbjax.agents.engine.scheduler import DayScheduler
from rbjax.agents.formats import Names
from rbjax.agents.tools.store import StoreTools, ToolResult
from rbjax.agents.tools.trace import TraceWriter
from rbjax.state import DayInfo


def new_ledger(engine: AgentEngine) -> StoreLedger:
    """An empty ledger of one of ``engine``'s stores: from the first pre-opening day to the horizon's end."""
    return empty_ledger(engine.env, engine.params)


def empty_ledger(env, params) -> StoreLedger:
    """An empty ledger of a store of ``env`` under ``params``: from the first pre-opening day to the horizon's
    end."""
    cfg = env.config
    first_cal = int(params.open_day) - cfg.history_days
    days = cfg.history_days + int(params.horizon) + 1
    return StoreLedger(first_cal, days, cfg.num_products, cfg.num_suppliers)


def make_stores(
    engine: AgentEngine, out: str | None, resume_at: dict | None = None, **tool_options
) -> list[StoreTools]:
    """One ``StoreTools`` per store of ``engine`` ([B]), its ledger filled with the pre-opening days, its trace
    ``out/store_{s}/tool_calls.jsonl`` (no trace without ``out``).

    resume_at: {store: size} of trace files to keep (a resumed run); the others start empty."""
    stores = []
    for s in range(engine.B):
        ledger = new_ledger(engine)
        ledger.add_opening(jax.tree.map(lambda x: x[s], engine.opening))
        path = os.path.join(out, f"store_{s}", "tool_calls.jsonl") if out else None
        trace = TraceWriter(path, (resume_at or {}).get(s)) if out else None
        stores.append(store_tools(engine, s, ledger, trace, **tool_options))
    return stores


def names_of(env) -> Names:
    """The product, supplier and date names of ``env``'s catalogue, one ``Names`` shared by all its stores (kept
    with the env's programs, ``rbjax.programs``)."""
    return programs.cached("tools.names", lambda: Names(env.catalog, env.config.num_suppliers), env)


def store_tools(
    engine: AgentEngine,
    slot: int,
    ledger: StoreLedger | None = None,
    trace: TraceWriter | None = None,
    **tool_options,
) -> StoreTools:
    """The tools of the engine's store ``slot``: its id and news streams (``engine.seeds``,
    ``engine.news_seed``), the engine's payment kernel and order-line capacity, the params' rent and capacity.
    ledger: its past (default: an empty ledger); trace: where its calls are written (None: nowhere);
    tool_options: as ``StoreTools`` (explicit_news, code_timeout, code_memory_mb)."""
    params = engine.params
    return StoreTools(
        slot,
        names_of(engine.env),
        new_ledger(engine) if ledger is None else ledger,
        engine.seeds[slot],
        engine.pay,
        float(params.rent),
        int(params.capacity),
        trace,
        engine.max_lines,
        engine.news_seed(slot),
        **tool_options,
    )


def begin_day(store: StoreTools, engine: AgentEngine) -> Today:
    """The day protocol's first step: the store's morning (``engine.today``) handed to its tools (a fresh
    draft, today's news; ``StoreTools.begin_day``). Returns that ``Today``."""
    today = engine.today(store.store)
    store.begin_day(today)
    return today


def open_day(store: StoreTools, names=("view_funds_and_date", "view_shelf_status")) -> list[str]:
    """The day protocol's second step: the runner's morning views (logged ``issued_by: runner``, as the
    reference's runner logs them); returns their texts. The agent's calls follow."""
    return [store.call(name, issued_by="runner").text for name in names]


def end_day(
    store: StoreTools,
    engine: AgentEngine,
    day: int,
    stepped: tuple,
    records: list,
    issued_by: str = "model",
    forced: str | None = None,
) -> ToolResult:
    """The day protocol's last step, once the engine stepped the store's day ``day``: ``stepped`` is its
    (DayInfo, DayDetail) rows (``AgentEngine.step``'s, numpy); ``end_today``'s result is recorded in the
    store's ledger and trace (``StoreTools.finish_day``, ``issued_by`` and the runner's ``forced`` reason) and
    ``(day, DayInfo row)`` appended to ``records``. Returns ``end_today``'s result (its text: the day's
    report)."""
    info, detail = stepped
    result = store.finish_day(info, detail, engine.today(store.store), issued_by=issued_by, forced=forced)
    records.append((day, info))
    return result


def end_days(engine: AgentEngine, stores: dict[int, StoreTools], ends: dict, records: dict) -> None:
    """End today for several stores at once, without a scheduler: one ``AgentEngine.step`` of their day actions,
    then each day closed as ``end_day`` closes it. ends: {store: (issued_by, forced reason or None)};
    records: {store: [(day, DayInfo row)]}, extended."""
    stepped = engine.step({s: stores[s].day_action() for s in ends})
    for s, (issued_by, forced) in ends.items():
        end_day(stores[s], engine, stores[s].today.day, stepped[s], records[s], issued_by, forced)


class DayAgent(Protocol):
    """One store's agent: the day's calls, then whatever it does with the day's result."""

    async def act(self, store: StoreTools, today: Today) -> str | None:
        """Make the day's calls; return why the runner ends the day for the agent, or None."""

    async def after_day(self, store: StoreTools, today: Today, result: ToolResult) -> None:
        """What the agent does with the day's result (``end_today``'s report): remember it, or nothing."""


class CallsAgent:
    """``act(store, today)``'s calls after the runner's two morning views."""

    def __init__(self, act: Callable):
        self._act = act

    async def act(self, store, today):
        """The runner's morning views (``open_day``), then the day's calls."""
        open_day(store)
        await self._act(store, today)

    async def after_day(self, store, today, result):
        """Nothing: a calls agent keeps no memory between days."""
        pass


class StorePaused(Exception):
    """Raised by a store's agent when it cannot go on for a reason outside the store (the chat endpoint
    failed): the store stops where it was, its day neither ended nor recorded, and the others go on."""


class Progress:
    """A line on stderr each time every store has finished another ``every`` days, and at most every
    ``seconds`` otherwise (0: never), also while no day ends (``heartbeat``). ``status()`` adds to the line
    (turns, tokens, requests). ``done``: {store: days} played before this process (a resumed run); rates
    count only this process's days."""

    def __init__(
        self,
        stores: int,
        every: int,
        seconds: float = 0.0,
        status: Callable[[], str] | None = None,
        done: dict[int, int] | None = None,
    ):
        self.every, self.seconds, self.status = every, seconds, status
        self.days = dict.fromkeys(range(stores), 0) | (done or {})
        self.before = sum(self.days.values())
        self.calls, self.ended, self.paused = 0, 0, 0
        self.mark, self.start = every, time.perf_counter()
        while self.every and min(self.days.values()) >= self.mark:
            self.mark += self.every
        self.last = self.start

    def day_done(self, store: StoreTools) -> None:
        """Count a finished day of ``store`` (and its calls); print the line when it is due."""
        self.days[store.store] += 1
        self.calls += store.calls
        now = time.perf_counter()
        by_days = self.every and min(self.days.values()) >= self.mark
        if by_days or (self.seconds and now - self.last >= self.seconds):
            self.print(now)
        while self.every and min(self.days.values()) >= self.mark:
            self.mark += self.every

    async def heartbeat(self) -> None:
        """Print the line every ``seconds`` that passed without one (runs until cancelled)."""
        while True:
            await asyncio.sleep(max(self.seconds - (time.perf_counter() - self.last), 0.01))
            if time.perf_counter() - self.last >= self.seconds:
                self.print()

    def elapsed(self) -> float:
        """Seconds since the run began in this process."""
        return time.perf_counter() - self.start

    def store_done(self) -> None:
        """Count a store whose run ended (finished or paused)."""
        self.ended += 1

    def print(self, now: float | None = None) -> None:
        """The progress line on stderr: days, stores finished and paused, store-days, agent-days/s, tool calls."""
        now = time.perf_counter() if now is None else now
        self.last, elapsed, days = now, now - self.start, self.days.values()
        new = sum(days) - self.before
        resumed = f" ({new:,} in this process)" if self.before else ""
        paused = f", {self.paused} paused" if self.paused else ""
        extra = f", {self.status()}" if self.status else ""
        print(
            f"agents: days {min(days)}-{max(days)}, {self.ended - self.paused}/{len(self.days)} stores "
            f"finished{paused}, {sum(days):,} store-days{resumed}, {new / max(elapsed, 1e-9):,.2f} "
            f"agent-days/s, {self.calls:,} tool calls" + extra,
            file=sys.stderr,
        )


async def _run_store(
    store: StoreTools,
    engine,
    scheduler,
    agent: DayAgent,
    jitter: float,
    records: list,
    progress,
    paused,
    stop: int | None = None,
    on_day: Callable | None = None,
):
    s = store.store
    try:
        while True:
            morning = engine.today(s)
            if morning.done or (stop is not None and morning.day >= stop):
                return
            played = len(records)
            try:
                today = begin_day(store, engine)
                forced = await agent.act(store, today)
                if jitter:  # finish the day after a random delay: the results must not depend on it
                    await asyncio.sleep(random.Random(hash((s, today.day))).random() * jitter)
                stepped = await scheduler.end_day(s, store.day_action())
                result = end_day(
                    store, engine, today.day, stepped, records, "runner" if forced else "model", forced
                )
                await agent.after_day(store, today, result)
                if on_day is not None:  # e.g. a snapshot of the stores that reached a saved morning; on the
                    # engine's thread, between steps: it may read the device state a step gives away
                    await asyncio.wrap_future(scheduler.submit(on_day, store, engine))
            except StorePaused as e:  # the day is not recorded: a resumed run plays it again
                del records[played:]
                paused[s] = (morning.day + 1, str(e))
                progress.paused += 1
                return
            progress.day_done(store)
    finally:
        progress.store_done()
        scheduler.leave(s)


async def run_async(
    engine: AgentEngine,
    stores: list[StoreTools],
    agents: Callable | dict[int, DayAgent],
    jitter: float = 0.0,
    progress: int | Progress = 0,
    records: dict | None = None,
    paused: dict | None = None,
    stop: int | None = None,
    on_day: Callable | None = None,
):
    """Run every store until its episode ends or its agent raises ``StorePaused``; returns {store: [(day,
    DayInfo row), ...]}.

    agents: {store: DayAgent}, or ``async act(store_tools, today)`` for every store (``CallsAgent``; the
    runner ends the day). progress: a ``Progress``, or a line every N days (0: none). records: the days
    already played (a resumed run), extended in place. paused: filled with {store: (1-based day, why)}.
    stop: a store also stops on the morning of this day (days since opening; None: at its episode's end).
    on_day: called with (store's tools, engine) after each of a store's days ends (``StateSaver.reached``), on
    the engine's thread between two steps.
    """
    scheduler = DayScheduler(engine)
    counter = progress if isinstance(progress, Progress) else Progress(len(stores), progress)
    if not isinstance(agents, dict):
        agents = dict.fromkeys((s.store for s in stores), CallsAgent(agents))
    records = {s.store: [] for s in stores} if records is None else records
    paused = {} if paused is None else paused
    for s in stores:
        scheduler.join(s.store)
    beat = asyncio.create_task(counter.heartbeat()) if counter.seconds else None
    try:
        await asyncio.gather(
            *(
                _run_store(
                    s,
                    engine,
                    scheduler,
                    agents[s.store],
                    jitter,
                    records[s.store],
                    counter,
                    paused,
                    stop,
                    on_day,
                )
                for s in stores
            )
        )
    finally:
        if beat is not None:
            beat.cancel()
        scheduler.close()
    return records


def stack_records(records: dict, days: int, first: int = 0) -> DayInfo:
    """{store: [(day, DayInfo row)]} -> DayInfo [B, days] of the days first .. first + days - 1; days after a
    store's end are recorded as ``rollout`` records them (zeros, funds and net worth held, alive False)."""
    rows = []
    for s in sorted(records):
        got = dict(records[s])
        last = got[max(got)]
        dead = jax.tree.map(np.zeros_like, last).replace(funds=last.funds, net_worth=last.net_worth)
        rows.append([got.get(d, dead) for d in range(first, first + days)])
    return jax.tree.map(
        lambda *x: np.stack(x).reshape(len(rows), days, *x[0].shape), *[r for row in rows for r in row]
    )

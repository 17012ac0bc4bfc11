"""One language model's episode on one task: the 21 tools over one store slot of a ``SessionPool``.

The day protocol is the benchmark's: each morning the runner's two views (``view_funds_and_date``,
``view_shelf_status``) are issued and their texts are ``morning``; the model calls tools; ``end_today`` hands
the day to the pool's batched step and answers with the day's report and the next morning's views. The
episode ends on the morning after the task's last day ("horizon") or when the store goes bankrupt
("bankrupt"); ``finish`` ends it early: today's draft is ended as it stands and the remaining days are played
with no new decisions (``rewards``), so every rollout of a task is scored over the same days.

A tool's failure (an unknown tool, a bad argument) is the tool's error text, as in the benchmark; a call on a
closed or finished session raises ``SessionError``.
"""

from __future__ import annotations

import time

from rbjax.agents.runs.loop import open_day
from rbjax.lm import rewards


class SessionError(Exception):
    """A request a session cannot serve: it is closed or finished, or the pool has no free slot."""


class Session:
    """Task ``task`` in slot ``slot`` of ``pool``. day: today (days since opening); stop: the morning the
    episode ends on; daily: the net-worth change of every day played; done, reason ("horizon", "bankrupt");
    decided_days: days ended by the model (the others by ``finish``)."""

    def __init__(self, pool, session_id: str, task, slot: int, tools):
        self.pool, self.id, self.task, self.slot, self.tools = pool, session_id, task, slot, tools
        today = pool.engine.today(slot)
        self.start_net_worth = self.net_worth = float(today.net_worth)
        self.day, self.stop = today.day, task.day + task.days
        self.daily: list[float] = []
        self.done, self.reason, self.closed = False, None, False
        self.decided_days, self.calls = 0, 0
        self.last_call = time.monotonic()
        self.morning = self._begin()

    # ------------------------------------------------------------------ calls
    def check_open(self) -> None:
        if self.closed:
            raise SessionError(f"session {self.id!r} is closed")
        if self.done:
            raise SessionError(f"session {self.id!r} is finished ({self.reason}): no more calls")

    def call(self, name: str, args: dict | None = None) -> str:
        """Run tool ``name`` with ``args`` (a JSON object) and return its text; ``end_today`` ends the day
        (synchronous driving: the pool steps at once)."""
        if name == "end_today":
            return self.end_today()
        self.check_open()
        self.last_call = time.monotonic()
        self.calls += 1
        return self.tools.call(name, args).text

    async def acall(self, name: str, args: dict | None = None) -> str:
        """``call`` for asyncio drivers: ``end_today`` waits for the pool's next batched step and
        ``execute_code`` runs in a thread."""
        if name == "end_today":
            return await self.aend_today()
        self.check_open()
        self.last_call = time.monotonic()
        self.calls += 1
        return (await self.tools.call_async(name, args)).text

    def end_today(self) -> str:
        """End today now (one engine step of this store); returns the day's report and the next morning's
        views."""
        self.check_open()
        self.decided_days += 1
        return self.pool.end_days([self])[self.id]

    async def aend_today(self) -> str:
        """End today in the pool's next batched step (asyncio); returns as ``end_today``."""
        self.check_open()
        self.last_call = time.monotonic()
        self.decided_days += 1
        stepped = await self.pool.scheduler.end_day(self.slot, self.tools.day_action())
        return self.after_step(stepped)

    def finish(self) -> dict:
        """Play the episode to its end with no new decisions (synchronous); returns ``info()``."""
        while not self.done:
            self.check_open()
            self.pool.end_days([self])
        return self.info()

    async def afinish(self) -> dict:
        """``finish`` for asyncio drivers."""
        while not self.done:
            self.check_open()
            self.after_step(await self.pool.scheduler.end_day(self.slot, self.tools.day_action()))
        return self.info()

    # ------------------------------------------------------------------ days
    def _begin(self) -> str:
        self.tools.begin_day(self.pool.engine.today(self.slot))
        return "\n".join(open_day(self.tools))

    def after_step(self, stepped: tuple) -> str:
        """Record the stepped day (``AgentEngine.step``'s (DayInfo, DayDetail) rows of this store) and begin the
        next one unless the episode is over; returns end_today's text (and the next morning's views)."""
        info, detail = stepped
        after = self.pool.engine.today(self.slot)
        text = self.tools.finish_day(info, detail, after).text
        self.daily.append(float(after.net_worth) - self.net_worth)
        self.net_worth, self.day = float(after.net_worth), after.day
        if after.done and after.day < self.pool.params.horizon:
            self.done, self.reason = True, "bankrupt"
        elif after.done or after.day >= self.stop:
            self.done, self.reason = True, "horizon"
        if self.done:
            return text + f"\n\nThe episode is over ({self.reason})."
        self.morning = self._begin()
        return text + "\n\n" + self.morning

    # ------------------------------------------------------------------ scores
    @property
    def gain(self) -> float:
        """Net-worth gain so far (dollars)."""
        return self.net_worth - self.start_net_worth

    @property
    def reward(self) -> float | None:
        """The episode's reward (the pool's kind, ``rewards``); None until it is done."""
        if not self.done:
            return None
        t = self.task
        return rewards.reward(self.pool.reward_kind, self.gain, t.reference_gain, t.scale)

    def info(self) -> dict:
        """The episode so far, JSON-able: task, day, net worth, gain, daily changes, done, reason, reward."""
        return {
            "session": self.id,
            "task": self.task.id,
            "day": self.day,
            "days_played": len(self.daily),
            "decided_days": self.decided_days,
            "net_worth": self.net_worth,
            "gain": self.gain,
            "reference_gain": self.task.reference_gain,
            "daily": list(self.daily),
            "done": self.done,
            "reason": self.reason,
            "reward": self.reward,
            "calls": self.calls,
        }

"""One language model's episode on one task: the 21 tools over one store slot of a ``SessionPool``.

The day protocol is the benchmark's: each morning the runner's two views (``view_funds_and_date``,
``view_shelf_status``) are issued and their texts are ``morning``; the model calls tools; ``end_today`` hands
the day to the pool's batched step and answers with the day's report and the next morning's views. The
model's part ends on the morning after the task's last decided day; then the task's reference policy plays
``task.tail`` more days of the store (the continuation, ``rewards``) in the same batched engine, before the
last ``end_today`` answers. The episode ends after the continuation ("horizon") or when the store goes
bankrupt ("bankrupt"). ``finish`` ends the model's part early: today's draft is ended as it stands and the
remaining decided days are played with no new decisions, then the continuation, so every rollout of a task is
scored over the same days. Once the episode is over, ``info()["turn_rewards"]`` credits each day played in
the model's part with what it was worth (``rbjax.lm.credit``): they sum to the ``relative`` reward.

A tool's failure (an unknown tool, a bad argument) is the tool's error text, as in the benchmark; a call on a
closed or finished session raises ``SessionError``.
"""

from __future__ import annotations

import asyncio
import time

from rbjax.agents.runs.day_start import seat
from rbjax.agents.runs.history import play_policy_day
from rbjax.agents.runs.loop import begin_day, end_day, open_day
from rbjax.lm import rewards
from rbjax.lm.credit import morning_of


class SessionError(Exception):
    """A request a session cannot serve: it is closed or finished, or the pool has no free slot."""


class Session:
    """Task ``task`` in slot ``slot`` of ``pool``. day: today (days since opening); stop: the morning the
    model's part ends on (``task.day + task.days``); end: the morning the continuation ends on (``stop +
    task.tail``); daily: the net-worth change of every decided day played; tail_daily: of every day of the
    continuation; records: [(day, DayInfo row)] of every day played (numpy, the engine's step rows); deciding:
    the model may still call tools; done, reason ("horizon", "bankrupt"); decided_days: days ended by the model
    (the others by ``finish``); last_ok: whether the last tool call succeeded (``ToolResult.ok``).
    key: the store's episode key (the task's random numbers); mornings: the store on every morning between
    two days of the model's part (``credit.Morning``, kept when the pool credits days); turn_rewards: each
    such day's credit, set when the episode is over (``SessionPool.settle``)."""

    def __init__(self, pool, session_id: str, task, slot: int, tools, key=None):
        self.pool, self.id, self.task, self.slot, self.tools = pool, session_id, task, slot, tools
        self.key = key
        self.mornings: list = []
        self.turn_rewards: list[float] | None = None
        self.credit_error: str | None = None  # why the days could not be credited, if they could not
        today = pool.engine.today(slot)
        self.start_net_worth = self.net_worth = self.decided_net_worth = float(today.net_worth)
        self.day, self.stop = today.day, task.day + task.days
        self.end = self.stop + task.tail
        self.daily: list[float] = []
        self.tail_daily: list[float] = []
        self.records: list[tuple] = []
        self.last_ok: bool | None = None
        self.deciding, self.done, self.reason, self.closed = True, False, None, False
        self.decided_days, self.calls = 0, 0
        self.last_call = time.monotonic()
        self.morning = self._begin()

    @classmethod
    def seated(cls, pool, session_id: str, task, slot: int, start) -> Session:
        """The session of ``task`` in ``slot``, its store seated there first: the store ``task.store`` of
        ``start`` (the ``DayStart`` of the task's day) with its tool history (``day_start.seat``)."""
        snap = start.snapshot
        (tools,) = seat(pool.engine, [slot], snap, [task.store], start.history, **pool.tool_options)
        return cls(pool, session_id, task, slot, tools, snap.keys[task.store])

    # ------------------------------------------------------------------ calls
    def check_open(self) -> None:
        """SessionError when the session is closed or its model's part is over."""
        if self.closed:
            raise SessionError(f"session {self.id!r} is closed")
        if self.done or not self.deciding:
            raise SessionError(f"session {self.id!r} is finished ({self.reason or 'horizon'}): no more calls")

    def call(self, name: str, args: dict | None = None) -> str:
        """Run tool ``name`` with ``args`` (a JSON object) and return its text; ``end_today`` ends the day
        (synchronous driving: the pool steps at once)."""
        if name == "end_today":
            return self.end_today()
        self.check_open()
        self.last_call = time.monotonic()
        self.calls += 1
        result = self.tools.call(name, args)
        self.last_ok = result.ok
        return result.text

    async def acall(self, name: str, args: dict | None = None) -> str:
        """``call`` for asyncio drivers: ``end_today`` waits for the pool's next batched step and
        ``execute_code`` runs in a thread."""
        if name == "end_today":
            return await self.aend_today()
        self.check_open()
        self.last_call = time.monotonic()
        self.calls += 1
        result = await self.tools.call_async(name, args)
        self.last_ok = result.ok
        return result.text

    def end_today(self) -> str:
        """End today now (one engine step of this store; after the last decided day, the continuation's
        steps too); returns the day's report and the next morning's views, or the episode's end."""
        return self.pool.end_today([self])[self.id]

    async def aend_today(self) -> str:
        """End today in the pool's next batched step (asyncio), and after the last decided day play the
        continuation, a batched step a day; returns as ``end_today``."""
        self.check_open()
        self.last_call = time.monotonic()
        self.decided_days += 1
        text = await self.astep()
        await self.aplay_tail()
        await self.asettle()
        return self.closing(text)

    def finish(self) -> dict:
        """Play the episode to its end with no new decisions, then the continuation (synchronous); returns
        ``info()``."""
        while not self.done:
            self.check_open()
            self.pool.end_days([self])
        return self.info()

    async def afinish(self) -> dict:
        """``finish`` for asyncio drivers."""
        while not self.done:
            self.check_open()
            await self.astep()
            await self.aplay_tail()
        await self.asettle()
        return self.info()

    # ------------------------------------------------------------------ days
    def _begin(self) -> str:
        """Begin the next decided day as the runner begins it (``loop.begin_day``, ``loop.open_day``); returns
        the morning views' texts."""
        begin_day(self.tools, self.pool.engine)
        return "\n".join(open_day(self.tools))

    @property
    def in_tail(self) -> bool:
        """The model's part is over and the continuation is still to be played."""
        return not self.deciding and not self.done

    async def astep(self) -> str:
        """Today in the pool's next batched step (asyncio), recorded by ``after_step``. A morning kept for the
        days' credit is read from the engine on the engine's thread within the step's flush (``kept_row``): a
        later step gives its input buffers away (donation), and no extra hop delays this store's next park."""
        stepped, row = await self.pool.scheduler.end_day(
            self.slot, self.tools.day_action(), after=self.kept_row
        )
        return self.after_step(stepped, row)

    def kept_row(self, slot: int) -> dict | None:
        """On the engine's thread, just after this store's step: its ``AgentEngine.row()`` when the morning now
        begun is kept for the credit (``keeps_next_morning``), else None."""
        return self.pool.engine.row(slot) if self.keeps_next_morning() else None

    def keeps_next_morning(self) -> bool:
        """After a step: whether the morning now begun is one between two decided days that the credit keeps
        (the pool credits this task, and the store is open before the model's part ends)."""
        after = self.pool.engine.today(self.slot)
        return self.deciding and not after.done and after.day < self.stop and self.pool.credits(self.task)

    def after_step(self, stepped: tuple, row: dict | None = None) -> str:
        """Record the stepped day (``AgentEngine.step``'s (DayInfo, DayDetail) rows of this store) and begin the
        next decided day unless the model's part is over; returns end_today's text (and the next morning's
        views). row: this store's ``AgentEngine.row()`` after the step, when the caller read it on the engine's
        thread (None: read here)."""
        keep = self.keeps_next_morning()
        text = end_day(self.tools, self.pool.engine, self.day, stepped, self.records).text
        after = self.pool.engine.today(self.slot)
        (self.daily if self.deciding else self.tail_daily).append(float(after.net_worth) - self.net_worth)
        self.net_worth, self.day = float(after.net_worth), after.day
        if self.deciding:
            self.decided_net_worth = self.net_worth
        if after.done and after.day < self.pool.params.horizon:
            self.done, self.reason = True, "bankrupt"
        elif after.done or after.day >= self.end:
            self.done, self.reason = True, "horizon"
        self.deciding = self.deciding and not self.done and after.day < self.stop
        if not self.deciding:
            return text
        if keep:  # the morning between two decided days, before the next one begins
            self.mornings.append(morning_of(self.pool.engine, self.slot, self.key, self.tools, row))
        self.morning = self._begin()
        return text + "\n\n" + self.morning

    def closing(self, text: str) -> str:
        """End_today's ``text``, with the episode's end once it is over."""
        return text + f"\n\nThe episode is over ({self.reason})." if self.done else text

    def tail_action(self) -> dict:
        """Today's day action of the task's reference policy, made through this store's tools as the
        reference's gain was made (``history.play_policy_day``)."""
        action = self.pool.reference_action(self.task.reference, self.slot)
        play_policy_day(self.tools, self.pool.engine, action)
        return self.tools.day_action()

    @property
    def awaiting_credit(self) -> bool:
        """The episode is over and the session open, its days not yet credited (nor failed to be), and the
        pool credits this task's days."""
        done = self.done and not self.closed and self.turn_rewards is None and self.credit_error is None
        return done and self.pool.credits(self.task)

    async def asettle(self) -> None:
        """Credit the days once the episode is over (asyncio): ``SessionPool.settle`` in a worker thread. Its
        plays run on an engine of their own, so the pool's steps for other sessions go on meanwhile."""
        if self.awaiting_credit:
            await asyncio.to_thread(self.pool.settle, [self])

    async def aplay_tail(self) -> None:
        """Play the continuation (asyncio): each day the store parks for the next batched step at once, and
        the reference's calls are made on the engine's thread just before that step (``tail_action``)."""
        while self.in_tail and not self.closed:
            self.after_step(await self.pool.scheduler.end_day(self.slot, self.tail_action))

    # ------------------------------------------------------------------ scores
    @property
    def gain(self) -> float:
        """Net-worth gain so far, the continuation included (dollars)."""
        return self.net_worth - self.start_net_worth

    @property
    def reward(self) -> float | None:
        """The episode's reward (the pool's kind, ``rewards``); None until it is done."""
        if not self.done:
            return None
        t = self.task
        return rewards.reward(self.pool.reward_kind, self.gain, t.reference_gain, t.scale)

    def info(self) -> dict:
        """The episode so far, JSON-able: task, day, net worth, gain (continuation included), the decided
        days' gain and daily changes, the continuation's days and gain, done, reason, reward, and
        turn_rewards: [days_played] each decided day's credit (``rbjax.lm.credit``, summing to the relative
        reward), None until the episode is over, when the pool credits no day, or for a task without a
        reference policy (a full episode's)."""
        return {
            "session": self.id,
            "task": self.task.id,
            "day": self.day,
            "days_played": len(self.daily),
            "decided_days": self.decided_days,
            "net_worth": self.net_worth,
            "gain": self.gain,
            "decided_gain": self.decided_net_worth - self.start_net_worth,
            "reference_gain": self.task.reference_gain,
            "daily": list(self.daily),
            "tail": {
                "reference": self.task.reference,
                "days": self.task.tail,
                "days_played": len(self.tail_daily),
                "gain": self.net_worth - self.decided_net_worth,
                "daily": list(self.tail_daily),
            },
            "done": self.done,
            "reason": self.reason,
            "reward": self.reward,
            "turn_rewards": None if self.turn_rewards is None else list(self.turn_rewards),
            **({"credit_error": self.credit_error} if self.credit_error else {}),
            "calls": self.calls,
        }

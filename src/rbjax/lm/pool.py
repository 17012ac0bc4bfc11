"""A pool of store slots over one batched engine: many language-model sessions, one step a day for all.

``SessionPool(slots)`` holds an ``AgentEngine`` of ``slots`` stores. ``open(task)`` puts the task's store
(its snapshot state, its episode key and its tool history) into a free slot and returns a ``Session``: the
21 tools over that store with the benchmark's day protocol. ``end_today`` parks the store; one engine step
serves every parked store, whatever task or day each is on (a store's day depends only on its own key, day
and calls: ``AgentEngine``), so thousands of concurrent episodes cost one step a day.

Two ways to drive a pool, one per pool:
- synchronous: ``session.end_today()`` steps at once; ``pool.end_days(sessions)`` ends many days in one step;
- asyncio (servers, trainers): ``await session.aend_today()`` parks and a ``DayScheduler`` flushes when every
  live session has parked, or ``max_wait`` seconds after the first.

>>> pool = SessionPool.for_task(tasks[0], slots=64)
>>> s = pool.open(tasks[0])
>>> s.call("view_inventory"); s.call("place_order", {...}); s.end_today()
>>> s.finish().reward
"""

from __future__ import annotations

import asyncio
import itertools
import time

import jax
import numpy as np

from rbjax import policies
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.engine.scheduler import DayScheduler
from rbjax.agents.runs.day_start import DayStart, open_day_start, open_day_start_in
from rbjax.agents.runs.loop import names_of
from rbjax.agents.runs.policy import PolicyDriver
from rbjax.checks import need_count
from rbjax.lm.credit import turn_rewards, values
from rbjax.lm.rewards import check_kind
from rbjax.lm.session import Session, SessionError
from rbjax.lm.tasks import Task
from rbjax.runners.paired import check_slice_days


class SessionPool:
    """``slots`` store slots over one ``AgentEngine`` for tasks of one env and params (their slices folders'
    run). reward: the kind of reward sessions report (``rewards.KINDS``). idle_timeout: seconds after which
    ``reap`` closes a session that made no call (None: never). credit: credit each decided day of a finished
    session (``Session.turn_rewards``, ``rbjax.lm.credit``; it costs a play of the reference from every morning
    between two decided days). tool_options: as ``StoreTools`` (code limits, explicit news). ``sessions``:
    {id: Session} of the open sessions."""

    def __init__(
        self,
        start: DayStart,
        slots: int = 64,
        reward: str = "relative",
        idle_timeout: float | None = None,
        max_lines: int = 256,
        max_wait: float = 0.1,
        credit: bool = True,
        **tool_options,
    ):
        need_count("slots", slots)
        self.reward_kind = check_kind(reward)
        self.env, self.params = start.env, start.params
        self.fingerprint = start.run_id
        keys = jax.random.split(jax.random.key(0), int(slots))
        self.engine = AgentEngine(self.env, self.params, keys, max_lines)
        self.slots = int(slots)
        self.idle_timeout, self.tool_options, self.credit = idle_timeout, tool_options, bool(credit)
        self.starts: dict[tuple[str, int], DayStart] = {(start.folder, start.day): start}
        self.free = list(range(self.slots))[::-1]
        self.sessions: dict[str, Session] = {}
        self.scheduler = DayScheduler(self.engine, max_wait)
        self.drivers: dict[str, PolicyDriver] = {}  # the tasks' reference policies, for their continuations
        self._ids = itertools.count()
        self.opened = self.closed = 0

    @property
    def names(self):
        """The product, supplier and date names of the pool's catalogue (``Names``, shared by its stores)."""
        return names_of(self.env)

    @classmethod
    def for_task(cls, task: Task, slots: int = 64, **options) -> SessionPool:
        """A pool for tasks of ``task``'s run (its slices folder's env and params)."""
        return cls(open_day_start(task.from_states, task.day, stores=task.store + 1), slots, **options)

    # ------------------------------------------------------------------ opening and closing
    def start_of(self, task: Task) -> DayStart:
        """The ``DayStart`` of ``task``'s snapshot day (read once per (folder, day)), with the history of its
        store; ValueError when its run's env or params are not the pool's."""
        key = (task.from_states, task.day)
        start = self.starts.get(key)
        if start is None or start.history.num_stores <= task.store:
            try:  # read into the pool's own env: its programs, its engine
                start = open_day_start_in(self.env, task.from_states, task.day, stores=task.store + 1)
            except ValueError as e:
                raise ValueError(
                    f"task {task.id}: its day cannot be read into this pool's env: {e}"
                ) from None
            if start.run_id != self.fingerprint:
                raise ValueError(
                    f"task {task.id}: its run ({task.from_states}) has another env or params than this pool's"
                )
            self.starts[key] = start
        return start

    def open(self, task: Task, session_id: str | None = None) -> Session:
        """A new session on ``task`` in a free slot: the store on the task's morning, its first day begun (the
        runner's two morning views issued). ValueError for a task that does not fit; SessionError when every
        slot is taken."""
        if not self.free:
            raise SessionError(f"every one of the pool's {self.slots} slots is taken (close a session first)")
        if task.tail:
            self.reference_driver(task.reference)  # an unknown reference fails here, not at the last day
        start = self.start_of(task)
        try:  # the rule of every slice (runners.paired), the task's days and its continuation together
            check_slice_days(task.day, task.days + task.tail, start.horizon)
        except ValueError as e:
            raise ValueError(
                f"task {task.id} ({task.days} days + {task.tail} of continuation): {e}"
            ) from None
        if task.store >= start.snapshot.num_stores or np.asarray(start.snapshot.state.done)[task.store]:
            raise ValueError(f"task {task.id}: store {task.store} is not an open store of day {task.day}")
        sid = session_id or f"s{next(self._ids)}"
        if sid in self.sessions:
            raise SessionError(f"session {sid!r} is already open")
        session = Session.seated(self, sid, task, self.free.pop(), start)
        self.sessions[sid] = session
        self.scheduler.join(session.slot)
        self.opened += 1
        return session

    def open_between_steps(self, task: Task, session_id: str | None = None) -> Session:
        """``open`` on the engine's worker thread, so that loading the store never overlaps a batched step that
        another thread's ``end_today`` started (servers, trainers with threads); blocks until opened."""
        return self.scheduler.submit(self.open, task, session_id).result()

    async def aopen(self, task: Task, session_id: str | None = None) -> Session:
        """``open_between_steps`` for coroutines: the event loop runs on while the store loads."""
        return await asyncio.wrap_future(self.scheduler.submit(self.open, task, session_id))

    def close(self, session: Session | str) -> None:
        """Free a session's slot (its store is never stepped again); closing twice is harmless."""
        session = self.sessions.pop(session if isinstance(session, str) else session.id, None)
        if session is None:
            return
        session.closed = True
        session.mornings = []  # a closed session is never credited: its kept states go now
        self.scheduler.leave(session.slot)
        self.free.append(session.slot)
        self.closed += 1

    def get(self, session_id: str) -> Session:
        """The open session ``session_id``; SessionError when there is none."""
        try:
            return self.sessions[session_id]
        except KeyError:
            raise SessionError(
                f"no open session {session_id!r} (closed, timed out or never opened)"
            ) from None

    def reap(self, now: float | None = None) -> list[str]:
        """Close the sessions idle longer than ``idle_timeout``; returns their ids."""
        if self.idle_timeout is None:
            return []
        now = time.monotonic() if now is None else now
        idle = [s.id for s in self.sessions.values() if now - s.last_call > self.idle_timeout]
        for sid in idle:
            self.close(sid)
        return idle

    # ------------------------------------------------------------------ days
    def end_today(self, sessions: list[Session]) -> dict[str, str]:
        """``Session.end_today`` for ``sessions`` together (synchronous driving): each ends its decided day, in
        one engine step for all; returns {id: end_today's text}."""
        for s in sessions:
            s.check_open()
        for s in sessions:
            s.decided_days += 1
        return self.end_days(sessions)

    def end_days(self, sessions: list[Session]) -> dict[str, str]:
        """End today for ``sessions`` in one engine step (synchronous driving), then play the continuation of
        those whose decided days are over, one step a day for all of them; returns {id: end_today's text and
        the next morning's views, or the episode's end}."""
        for s in sessions:
            s.check_open()
        stepped = self.engine.step({s.slot: s.tools.day_action() for s in sessions})
        texts = {s.id: s.after_step(stepped[s.slot]) for s in sessions}
        self.play_tails([s for s in sessions if s.in_tail])
        self.settle([s for s in sessions if s.done])
        return {s.id: s.closing(texts[s.id]) for s in sessions}

    def play_tails(self, sessions: list[Session]) -> None:
        """Play the continuation of ``sessions`` to its end (synchronous): each day their reference's calls,
        then one engine step for all of them."""
        while live := [s for s in sessions if s.in_tail]:
            stepped = self.engine.step({s.slot: s.tail_action() for s in live})
            for s in live:
                s.after_step(stepped[s.slot])

    def settle(self, sessions: list[Session]) -> None:
        """Credit the days of ``sessions`` whose episode is over and not yet credited (``Session.turn_rewards``,
        ``rbjax.lm.credit``): the reference played from every morning between two of their decided days, one
        engine step a day for all of them (the sessions given together: ``end_days`` gives those whose episodes
        ended in one step; ``Session.asettle`` one). Nothing when the pool credits no day. A failure leaves
        ``turn_rewards`` None and says why in ``credit_error``: the episode itself is over and scored."""
        todo = [s for s in sessions if s.awaiting_credit]
        mornings = [m for s in todo for m in s.mornings]
        ends = [s.end for s in todo for _ in s.mornings]
        refs = [s.task.reference for s in todo for _ in s.mornings]
        try:
            v = values(
                self.env, self.params, mornings, ends, refs, self.engine.max_lines, **self.tool_options
            )
        except Exception as e:  # the credit never breaks an episode that is over: said in its info
            for s in todo:
                s.credit_error, s.mornings = f"{type(e).__name__}: {e}"[:300], []
            return
        at = 0
        for s in todo:
            between, at = v[at : at + len(s.mornings)], at + len(s.mornings)
            t = s.task
            s.turn_rewards = turn_rewards(s.start_net_worth + t.reference_gain, between, s.net_worth, t.scale)
            s.mornings = []  # their states and ledgers are no longer needed

    def credits(self, task: Task) -> bool:
        """Whether the days of a session on ``task`` are credited: the pool credits days and the task has a
        reference policy (a full episode's task, reference ``none``, has none to value a morning with)."""
        return self.credit and task.reference in policies.NAMES

    def reference_driver(self, name: str) -> PolicyDriver:
        """The ``PolicyDriver`` of reference policy ``name`` over the pool's engine (made once; every slot's
        action computed once per engine step). ValueError for a policy that cannot be made."""
        if name not in self.drivers:
            self.drivers[name] = PolicyDriver(self.engine, *policies.make(name, self.env))
        return self.drivers[name]

    def reference_action(self, name: str, slot: int):
        """Reference policy ``name``'s action for slot ``slot`` this morning (an ``Action`` of numpy leaves),
        with the keys ``rollout`` gives the policy."""
        return self.reference_driver(name).action(slot)

    def close_all(self) -> None:
        """Close every open session and stop the scheduler's worker thread."""
        for sid in list(self.sessions):
            self.close(sid)
        self.scheduler.close()

"""``end_today`` for many agents at once: one batched step for every store whose agent ended its day.

Agents run as asyncio tasks and may be on different days. ``DayScheduler.end_day`` parks a store's action
and awaits its result. A flush steps the parked stores in one ``AgentEngine.step`` (in a worker thread,
so the event loop keeps serving the other agents) when every live agent is parked, or ``max_wait``
seconds after the first one parked. Results do not depend on which stores share a flush
(``engine.AgentEngine``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor


class DayScheduler:
    """The ``end_today`` meeting point of one run's agents over one ``AgentEngine`` (``engine``).

    ``join(store)`` when a store's agent starts, ``end_day(store, action)`` at each of its ``end_today``,
    ``leave(store)`` when it is done, ``close()`` at the end of the run. ``flushes`` counts the engine
    steps taken.
    """

    def __init__(self, engine, max_wait: float = 0.1):
        """``max_wait``: seconds a flush waits for the other live agents after the first store parks."""
        self.engine, self.max_wait = engine, max_wait
        self.live: set[int] = set()
        self.parked: dict[int, tuple] = {}  # {store: (action, future, after or None)}
        self.flushing = False
        self.flushes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rbjax-engine")

    def join(self, store: int) -> None:
        """The store's agent takes part: a flush waits for it (or ``max_wait``)."""
        self.live.add(store)

    def leave(self, store: int) -> None:
        """The store's agent is finished; the others no longer wait for it."""
        self.live.discard(store)
        self._maybe_flush()

    async def end_day(self, store: int, action, after=None):
        """Step ``store`` with ``action`` (a ``DayDraft.to_action()``: price, set_price, shelf [J]; lines
        [L] each; or a function returning one, called on the engine's thread just before the step, for an
        action made from the engine's state) in the next flush; returns its (DayInfo, DayDetail) rows
        (``AgentEngine.step``), or raises the engine's error. after: ``after(store)`` called on the engine's
        thread just after the step (to read the device state, which a later step gives away); then returns
        (rows, what it returned)."""
        future = asyncio.get_running_loop().create_future()
        self.parked[store] = (action, future, after)
        self._maybe_flush()
        return await future

    def _maybe_flush(self) -> None:
        if not self.parked or self.flushing:
            return
        if len(self.parked) >= len(self.live):
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            asyncio.get_running_loop().create_task(self._flush())
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.max_wait, self._timeout)

    def _timeout(self) -> None:
        self._timer = None
        if self.parked and not self.flushing:
            asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        self.flushing = True
        batch, self.parked = self.parked, {}
        try:
            results = await asyncio.get_running_loop().run_in_executor(self._executor, self._step, batch)
        except Exception as e:  # every parked agent sees the engine's error
            for _, future, _ in batch.values():
                if not future.done():
                    future.set_exception(e)
        else:
            # an agent cancelled while its store was stepped (a client that timed out or left) is skipped:
            # the others in the flush still get their days
            for s, (_, future, _) in batch.items():
                if not future.done():
                    future.set_result(results[s])
        finally:
            self.flushes += 1
            self.flushing = False
        self._maybe_flush()

    def _step(self, batch: dict) -> dict:
        results = self.engine.step({s: a() if callable(a) else a for s, (a, _, _) in batch.items()})
        return {
            s: results[s] if after is None else (results[s], after(s)) for s, (_, _, after) in batch.items()
        }

    def submit(self, fn, *args):
        """Run ``fn(*args)`` on the engine's worker thread, after any step under way and never during one
        (for work that changes the engine's arrays, such as loading a store); returns a
        ``concurrent.futures.Future``. ``await asyncio.wrap_future(...)`` it from a coroutine."""
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        """Shut the engine's worker thread down, without waiting for a step under way."""
        self._executor.shutdown(wait=False)

"""rbjax.agents.engine.scheduler: an agent cancelled while its store is being stepped (a client that timed out
or left) does not take the other agents of the flush down with it."""

import asyncio
import threading

from rbjax.agents.engine.scheduler import DayScheduler


class SlowEngine:
    """Steps return {store: action} after the test lets them (``go``)."""

    def __init__(self):
        self.go, self.started = threading.Event(), threading.Event()

    def step(self, actions):
        self.started.set()
        self.go.wait(10)
        return dict(actions)


def test_a_cancelled_agent_leaves_the_others_their_days_and_the_scheduler_running():
    engine = SlowEngine()
    scheduler = DayScheduler(engine, max_wait=0.01)

    async def main():
        for s in (0, 1, 2):
            scheduler.join(s)
        days = [asyncio.create_task(scheduler.end_day(s, f"a{s}")) for s in (0, 1, 2)]
        await asyncio.to_thread(engine.started.wait, 10)
        days[1].cancel()  # its client gave up while the step runs
        engine.go.set()
        got = await asyncio.wait_for(asyncio.gather(*days, return_exceptions=True), 10)
        assert got[0] == "a0" and got[2] == "a2" and isinstance(got[1], asyncio.CancelledError)
        assert await asyncio.wait_for(scheduler.end_day(0, "b0"), 5) == "b0"  # the next days still flush

    asyncio.run(main())
    scheduler.close()
    assert scheduler.flushes == 2

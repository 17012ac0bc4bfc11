"""The pools of the Inspect face (``rbjax.lm.faces.inspect_eval``): one ``SessionPool`` per kind of sample and
options, kept by ``rbjax.programs`` (its ``clear()`` drops them) and shared by every sample of the process, and
the start of a full-episode run's stores."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os

from inspect_ai.solver import TaskState

from rbjax import programs
from rbjax.env import EnvOptions

EPISODE = "episode"  # the source policy named in a full episode's task ids: no slices folder, the opening day
_OPENING: dict = {}  # {event loop: asyncio.Lock} (opening_lock): a lock, not a cache of envs or programs


def setup_jax() -> None:
    """The ``rbjax`` command's JAX setup (the persistent compilation cache, one CPU device) when this process
    has run no JAX computation yet; otherwise only the cache."""
    import rbjax

    with contextlib.suppress(RuntimeError):  # the backend started already (a user's session): devices stay
        rbjax.setup(devices=1)


@dataclasses.dataclass
class Shared:
    """A pool and the slots its samples wait for (a semaphore of the event loop that made it)."""

    pool: object
    loop: asyncio.AbstractEventLoop | None = None
    free: asyncio.Semaphore | None = None
    references: asyncio.Future | None = None  # {policy: [stores] final net worth} of -T ceiling

    def reference_finals(self, settings: dict) -> asyncio.Future:
        """The ceiling's and the oracle's final net worth on the run's stores (``agents.analysis.ceiling``),
        played once in a thread, started by the first sample that asks."""
        from rbjax.agents.analysis.ceiling import reference_finals

        loop = asyncio.get_running_loop()
        if self.references is None or self.references.get_loop() is not loop:
            self.references = loop.create_task(asyncio.to_thread(reference_finals, settings))
        return self.references

    def slots(self) -> asyncio.Semaphore:
        """The semaphore of the pool's free slots on the running event loop (a new one for a new loop)."""
        loop = asyncio.get_running_loop()
        if self.loop is not loop:  # another eval's loop: every sample of the last one has left
            self.loop, self.free = loop, asyncio.Semaphore(self.pool.slots)
        return self.free


POOL_KIND = "inspect.pool"  # the pools' kind in rbjax.programs: one per kind of sample and options


async def shared_pool(state: TaskState) -> tuple[Shared, object]:
    """The process's pool for the sample's kind and options (made on first use, in a thread: the engine
    compiles its programs) and the sample's ``rbjax.lm.Task``."""
    from rbjax.lm.pool import SessionPool
    from rbjax.lm.tasks import Task as LmTask
    from rbjax.lm.tasks import task_of

    meta = state.metadata
    options = dict(meta["pool"])
    if meta["kind"] == "slice":
        lm_task = LmTask.from_row(meta["task"], f"sample {state.sample_id}")
        key = ("slices", os.path.abspath(lm_task.from_states), tuple(sorted(options.items())))
        make = lambda: SessionPool.for_task(lm_task, **options)  # noqa: E731
    else:
        env = dict(meta["env"], stores=meta["stores"])
        key = ("episodes", tuple(sorted(env.items())), tuple(sorted(options.items())))
        make = lambda: SessionPool(episode_start(**env), reward="gain", **options)  # noqa: E731
    build = lambda: Shared(setup_jax() or make())  # noqa: E731
    async with opening_lock():  # one pool per kind and options, kept by rbjax.programs (its clear() drops it)
        shared = programs.held(POOL_KIND).get((key,))  # on the loop: a thread only to build one
        if shared is None:
            shared = await asyncio.to_thread(programs.cached, POOL_KIND, build, None, (key,))
    if meta["kind"] == "episode":
        if meta.get("ceiling"):  # played while the agents play
            shared.reference_finals(env)
        start = next(iter(shared.pool.starts.values()))
        lm_task = task_of(start, meta["store"], start.horizon, "none", 0.0)
    return shared, lm_task


def opening_lock() -> asyncio.Lock:
    """One lock per event loop (an eval's), so concurrent first samples make one pool."""
    loop = asyncio.get_running_loop()
    if loop not in _OPENING:
        _OPENING.clear()  # an earlier eval's loop is over
        _OPENING[loop] = asyncio.Lock()
    return _OPENING[loop]


def episode_start(stores: int, days: int, seed: int, grouping: str, supplier_attempts: int, data: str | None):
    """The ``DayStart`` of ``stores`` fresh stores on their opening day: the stores of ``rbjax agents run
    --stores N --days D --seed S`` (keys ``split(key(seed), N)``, each store reset as ``AgentEngine`` resets
    it), their opening ledgers as tool history; no slices folder (the pool knows this start from its
    construction)."""
    import jax
    import numpy as np

    from rbjax.agents.engine.batch import AgentEngine
    from rbjax.agents.runs import history
    from rbjax.agents.runs.day_start import DayStart
    from rbjax.agents.runs.loop import make_stores
    from rbjax.files.snapshots import Snapshot
    from rbjax.programs import env_and_params

    env, params = env_and_params(EnvOptions(data, grouping, supplier_attempts, days))
    keys = jax.random.split(jax.random.key(seed), stores)
    engine = AgentEngine(env, params, keys)
    state = jax.tree.map(lambda x: np.asarray(x)[:stores], jax.device_get(engine.state))
    snapshot = Snapshot(state=state, keys=keys, day=0, params=params)
    manifest = {
        "policy": EPISODE,
        "seed": seed,
        "grouping": grouping,
        "supplier_attempts": supplier_attempts,
        "data": data,
        "days": days,
    }
    folder = f"{EPISODE}:seed={seed}:stores={stores}"
    ledgers = [t.ledger for t in make_stores(engine, None)]
    news = len(engine.today(0).news.mode)
    # no news on show before the first morning: no slot stays (a fresh StoreTools' news_remain=None)
    past = history.ToolHistory(0, folder, ledgers, [[] for _ in ledgers], np.zeros((stores, news), np.int32))
    return DayStart(folder, 0, manifest, "", env, params, snapshot, past)

"""An OpenEnv (0.10) face of ``rbjax.lm``: each OpenEnv session is an ``rbjax.lm`` session of one shared pool.

``make_app(tasks_path)`` returns the ASGI app (``openenv``'s ``create_app``; run it with uvicorn, or
``rbjax lm serve --face openenv``). Every OpenEnv session gets its own ``RbjaxEnvironment`` (an
``MCPEnvironment``) whose 21 MCP tools, named and described as the benchmark's, act on one store slot of the
app's ``SessionPool``; ``end_today`` awaits the pool's batched step, shared by every session on the
server's event loop.

- ``reset(task=<id of a served task, or its row unchanged>)`` opens a session (closing this instance's
  previous one; without ``task``, the served tasks in turn, in the file's order, so a trainer that resets with
  no arguments goes through the whole file); its observation holds the morning's views (``text``), the session
  and task ids, ``tool_names`` and ``info``. The session always runs and is scored with the server's own task
  (its folder, reference gain and scale): a row that differs from the served task of its id in any field, an
  unknown id or anything else is refused before anything is opened, with a one-line error (a 400 ``{"error"}``
  from ``POST /reset``; an error frame over the websocket, which ``EnvClient.reset`` raises as
  ``RuntimeError``);
- a tool call answers ``{"text", "done", "reward", "day", "turn_rewards"}`` (``MCPToolClient.call_tool``'s
  value; turn_rewards: each decided day's credit once the episode is over, ``rbjax.lm.credit``, else null);
  through ``step`` (``GenericEnvClient``) the observation's ``done`` is set too, its ``reward`` 0.0 until the
  episode is over and then the session's (a step reward summing to the episode's, as OpenEnv's validator
  asks), and its ``metadata["turn_rewards"]`` once the episode is over. A bad argument is the
  tool's error text, as the model would see it. An unknown tool name is not: ``MCPToolClient.call_tool``
  gets a JSON-RPC error and raises ``RuntimeError``, and ``step`` answers an observation whose ``error`` is
  ``tool_not_found``. A call on a finished episode is an MCP error too;
- ``state``: {episode_id, step_count, session, task, day, done, reward};
- the session is closed when OpenEnv closes the instance (the client disconnects or closes its session, or it
  is idle ``idle_timeout`` seconds); ``GET /rbjax/health`` shows the pool's slots.

``openenv``, ``fastmcp``, ``mcp``, ``fastapi``, ``pydantic`` and ``uvicorn`` (``pip install 'rbjax[openenv]'``)
are imported only when this module's classes or ``make_app`` are used.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
from typing import Any

from rbjax.agents.tools.specs import TOOL_SPECS, describe
from rbjax.lm.http.protocol import served_task
from rbjax.lm.pool import SessionPool
from rbjax.lm.session import SessionError
from rbjax.lm.tasks import read_tasks

RESULT_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "done": {"type": "boolean"},
        "reward": {"type": ["number", "null"]},
        "day": {"type": "integer"},
        "turn_rewards": {"type": ["array", "null"], "items": {"type": "number"}},
    },
    "required": ["text", "done", "reward", "day"],
}


def make_app(
    tasks_path: str,
    slots: int = 256,
    idle_timeout: float | None = 600,
    background: bool = False,
    **pool_options,
):
    """The OpenEnv ASGI app over a new pool of ``slots`` stores for the tasks of ``tasks_path``.
    idle_timeout: seconds after which OpenEnv closes a session that made no request (None: never).
    background: build the pool (its first compilations: about 25 s on a cold cache and 2 cores) on a thread,
    so the app answers ``/health`` at once, as OpenEnv's runtime checks and container probes ask (30 s); a
    reset waits for it, and a pool that failed to build fails every reset with its error. False: built here.
    pool_options: more ``SessionPool`` options (reward, max_wait, code limits). Each app holds its own pool
    and tasks (``app.state.rbjax``, a ``Served``); the module keeps none."""
    from fastapi.responses import JSONResponse
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import ConcurrencyConfig

    tasks = read_tasks(tasks_path)  # a bad tasks file fails here, in the foreground
    served = Served(lambda: SessionPool.for_task(tasks[0], slots=slots, **pool_options), tasks, background)
    c = classes(served)
    app = create_app(
        c["RbjaxEnvironment"],
        CallToolAction,
        CallToolObservation,
        env_name="rbjax",
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=slots, session_timeout=idle_timeout or None),
        state_cls=c["RbjaxState"],
        reset_observation_cls=c["MorningObservation"],
    )

    @app.exception_handler(TaskRefused)
    async def refused(request, error: TaskRefused):
        return JSONResponse({"error": str(error)}, status_code=400)

    @app.get("/rbjax/health")
    async def health() -> dict:
        if not served.ready.is_set() or served.error is not None:
            return {"ready": False, "error": served.error and str(served.error)}
        pool = served.pool
        return {
            "ready": True,
            "slots": pool.slots,
            "open": len(pool.sessions),
            "free": len(pool.free),
            "opened": pool.opened,
            "closed": pool.closed,
            "flushes": pool.scheduler.flushes,
        }

    @app.get("/rbjax/tasks")
    async def task_ids() -> list:
        return list(served.tasks)

    app.state.rbjax = served
    app.router.on_shutdown.append(served.close)  # the pool's stores and threads go with the app
    return app


class TaskRefused(ValueError):
    """A reset whose ``task`` is not served: a 400 ``{"error": ...}`` over HTTP (``make_app``'s handler), an
    error frame over OpenEnv's websocket (its own handler), one line either way."""


class Served:
    """One app's served state: its pool (``build()`` here or on a thread, ``background``; ``ready`` is set once
    it is built or failed, ``pool`` the SessionPool, ``error`` the exception of a failed build), its tasks ({id:
    Task} a client may name by id), the turn of a reset without ``task``, and the server's event loop (seen at
    the first async reset)."""

    def __init__(self, build, tasks, background: bool):
        self.tasks = {t.id: t for t in tasks}
        self.turn, self.loop = 0, None
        self.ready, self.pool, self.error = threading.Event(), None, None
        if background:
            threading.Thread(target=self._build, args=(build,), name="rbjax-pool", daemon=True).start()
        else:
            self.pool = build()
            self.ready.set()

    def _build(self, build) -> None:
        try:
            self.pool = build()
        except Exception as e:  # noqa: BLE001 (kept, and raised at every reset: the server stays up to say so)
            self.error = e
            print(f"rbjax: the session pool failed to build: {e}", file=sys.stderr, flush=True)
        finally:
            self.ready.set()

    def close(self) -> None:
        """Close every session of the pool, once it is built (the app's shutdown)."""
        if self.ready.is_set() and self.pool is not None:
            self.pool.close_all()

    def session_pool(self):
        """The SessionPool, waiting for one still being built; RuntimeError when its build failed."""
        self.ready.wait()
        if self.error is not None:
            raise RuntimeError(f"the rbjax session pool failed to build: {self.error}")
        return self.pool

    def task_of(self, spec):
        """The served Task a reset's ``task`` names: a served task's id, or its row unchanged
        (``rbjax.lm.http.protocol.served_task``); None: the served tasks in turn; TaskRefused (one line)
        otherwise."""
        if spec is None and self.tasks:
            served = list(self.tasks.values())
            self.turn += 1
            return served[(self.turn - 1) % len(served)]
        try:
            return served_task(spec, self.tasks, "GET /rbjax/tasks")
        except ValueError as e:
            raise TaskRefused(f"reset: {e}") from None

    def close_session(self, session) -> None:
        """Close ``session`` on the server's loop (the scheduler's bookkeeping lives there); OpenEnv calls
        ``close()`` from a worker thread."""
        pool, loop = session.pool, self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop or loop.is_closed():
            pool.close(session)
        else:
            loop.call_soon_threadsafe(pool.close, session)


def __getattr__(name):
    if name in ("RbjaxEnvironment", "RbjaxState", "MorningObservation"):
        return _unbound()[name]  # an environment of no app refuses to reset: build one with make_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache  # classes, not envs or programs: one pair per process, so ``RbjaxState`` is one class
def _observation_classes() -> tuple[type, type]:
    """(RbjaxState, MorningObservation): the pydantic models of ``state`` and of a reset's observation."""
    from openenv.core.env_server.types import Observation, State
    from pydantic import Field

    class RbjaxState(State):
        # state: {episode_id, step_count} and the session's {session, task, day, done, reward}
        session: str | None = None
        task: str | None = None
        day: int | None = None
        done: bool = False
        reward: float | None = None

    class MorningObservation(Observation):
        """A reset's observation: the morning's views (``text``), the session, its task and ``info``."""

        text: str = ""
        session: str | None = None
        task: str | None = None
        tool_names: list = Field(default_factory=list)
        info: dict = Field(default_factory=dict)

    return RbjaxState, MorningObservation


def _forward_tool_class() -> type:
    """ForwardTool: the fastmcp ``Tool`` class of the benchmark's tools, each bound to one environment."""
    from fastmcp.tools import Tool
    from fastmcp.tools.base import ToolResult
    from mcp.types import TextContent
    from pydantic import Field
    from pydantic.json_schema import SkipJsonSchema

    class ForwardTool(Tool):
        """A benchmark tool of one environment instance: the arguments go to the session as they are (a bad
        one is the tool's error text, not a schema error)."""

        env: SkipJsonSchema[Any] = Field(default=None, exclude=True)

        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            """The tool's answer: its text, and {"text", "done", "reward", "day"} as structured content."""
            out = await self.env.forward(self.name, arguments)
            return ToolResult(content=[TextContent(type="text", text=out["text"])], structured_content=out)

    return ForwardTool


def _mcp_server(env, forward_tool: type):
    """A ``FastMCP`` server of the benchmark's tools (``TOOL_SPECS``, described as every face describes them),
    each forwarding to ``env``."""
    from fastmcp import FastMCP

    mcp = FastMCP("rbjax")
    for spec in TOOL_SPECS:
        mcp.add_tool(
            forward_tool(
                name=spec["name"],
                description=describe(spec),
                parameters=spec["parameters"],
                output_schema=RESULT_SCHEMA,
                env=env,
            )
        )
    return mcp


class _Episodes:
    """The session half of ``RbjaxEnvironment`` (``_environment_class`` adds OpenEnv's): the instance's
    ``rbjax.lm`` session of the app's pool, its episode id and step count. ``_state_cls`` and
    ``_observation_cls``: RbjaxState and MorningObservation."""

    async def reset_async(self, seed=None, episode_id=None, task=None, **kwargs):
        """Open a session of ``task`` (a served task's id or row) on the server's loop, closing the previous
        one: a MorningObservation. TaskRefused for a task not served."""
        served = self._app()
        served.loop = asyncio.get_running_loop()
        found = served.task_of(task)
        pool = (
            served.session_pool() if served.ready.is_set() else await asyncio.to_thread(served.session_pool)
        )
        self.drop()
        # loading a store changes the engine's arrays: on the thread of the batched steps, never during one
        self.session = await pool.aopen(found)
        return self._opened(episode_id)

    def reset(self, seed=None, episode_id=None, task=None, **kwargs):
        """``reset_async`` from a thread outside the server's loop: a MorningObservation."""
        served = self._app()
        pool, found = served.session_pool(), served.task_of(task)
        self.drop()
        self.session = pool.open_between_steps(found)
        return self._opened(episode_id)

    def _opened(self, episode_id):
        s = self.session
        self.episode_id, self.steps, self.rewarded = episode_id, 0, False
        return self._observation_cls(
            text=s.morning,
            session=s.id,
            task=s.task.id,
            tool_names=[t["name"] for t in TOOL_SPECS],
            info=s.info(),
            done=False,
            reward=None,
        )

    async def forward(self, name: str, args: dict) -> dict:
        """Tool ``name`` on the session: {"text", "done", "reward", "day", "turn_rewards"}; ToolError when no
        episode is open or the session refuses the call."""
        from fastmcp.exceptions import ToolError

        s = self.session
        if s is None:
            raise ToolError("no episode: call reset(task=...) first")
        try:
            text = await s.acall(name, args)
        except SessionError as e:
            raise ToolError(str(e)) from None
        return {
            "text": text,
            "done": s.done,
            "reward": s.reward,
            "day": s.day,
            "turn_rewards": s.turn_rewards,
        }

    @property
    def state(self):
        """RbjaxState: the episode's id and steps, and the open session's id, task, day, done and reward."""
        s = self.session
        if s is None:
            return self._state_cls(episode_id=self.episode_id, step_count=self.steps)
        return self._state_cls(
            episode_id=self.episode_id,
            step_count=self.steps,
            session=s.id,
            task=s.task.id,
            day=s.day,
            done=s.done,
            reward=s.reward,
        )

    def drop(self) -> None:
        """Close the open session, if any (on the server's loop)."""
        s, self.session = self.session, None
        if s is not None:
            self._served.close_session(s)

    def _app(self) -> Served:
        if self._served is None:
            raise RuntimeError(
                "no rbjax pool: build the app with rbjax.lm.faces.openenv_env.make_app(tasks_path)"
            )
        return self._served


def _environment_class(
    state_cls: type, observation_cls: type, forward_tool: type, served: Served | None
) -> type:
    """RbjaxEnvironment, the ``MCPEnvironment`` of one OpenEnv session (see the module's docstring)."""
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolObservation
    from openenv.core.env_server.types import Observation

    class RbjaxEnvironment(_Episodes, MCPEnvironment):
        """One OpenEnv session: an ``rbjax.lm`` session of the app's pool, opened by ``reset``."""

        SUPPORTS_CONCURRENT_SESSIONS = True
        _state_cls, _observation_cls, _served = state_cls, observation_cls, served

        def __init__(self):
            super().__init__(_mcp_server(self, forward_tool))
            self.session = None
            self.episode_id = None
            self.steps, self.rewarded = 0, False  # rewarded: the episode's reward was reported

        async def step_async(self, action, timeout_s=None, **kwargs):
            """OpenEnv's step (an MCP action), the observation's ``done`` and ``reward`` the session's."""
            obs = await super().step_async(action, timeout_s=timeout_s, **kwargs)
            self.steps += 1
            s = self.session
            if isinstance(obs, CallToolObservation) and s is not None:
                # the episode's reward on the step that ends it, 0.0 on every other (after it too), so a
                # client's step rewards sum to the episode's
                obs.done, obs.reward = s.done, (s.reward if s.done and not self.rewarded else 0.0)
                self.rewarded = self.rewarded or s.done
                if s.turn_rewards is not None:  # per-day credit, once the episode is over
                    obs.metadata = {**(obs.metadata or {}), "turn_rewards": list(s.turn_rewards)}
            return obs

        def _step_impl(self, action, timeout_s=None, **kwargs) -> Observation:
            return Observation(metadata={"error": f"rbjax takes MCP tool calls, not {type(action).__name__}"})

        def close(self) -> None:
            """OpenEnv closes the instance: close its session too."""
            self.drop()
            super().close()

    return RbjaxEnvironment


@functools.cache  # classes, not envs or programs: the module's attributes are one set of classes
def _unbound() -> dict:
    return classes(None)


def classes(served: Served | None) -> dict:
    """The OpenEnv classes of one app (``served``; None: an environment that refuses to reset), made on use
    (so that importing this module needs no OpenEnv): {"RbjaxEnvironment", "RbjaxState", "MorningObservation":
    class}; the pydantic models are made once."""
    state_cls, observation_cls = _observation_classes()
    return {
        "RbjaxEnvironment": _environment_class(state_cls, observation_cls, _forward_tool_class(), served),
        "RbjaxState": state_cls,
        "MorningObservation": observation_cls,
    }

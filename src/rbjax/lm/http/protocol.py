"""The JSON protocol of ``rbjax lm serve``, whatever carries it: routes, bodies, error shapes and limits.

    POST   /sessions              {"task": <id of a served task | its row, unchanged>, "session_id": str?,
                                   "keep": bool?}
                                  -> {"session": id, "morning": text, "info": {...}, "tools": [names]}
    POST   /sessions/{id}/call    {"tool": name, "args": {...}}
                                  -> {"text": str, "done": bool, "reward": float | null, "info": {...}}
    POST   /sessions/{id}/finish  -> {"info": {...}}  (plays to the task's horizon with no new decisions)
    GET    /sessions/{id}         -> {"info": {...}}
    DELETE /sessions/{id}         -> {"closed": true}
    GET    /health                -> {"slots", "open", "free", "opened", "closed", "flushes"}
    GET    /tools                 -> the tools as OpenAI function specs
    GET    /tasks                 -> the ids of the tasks the server was started with

``end_today`` (a ``call``) answers after the pool's next batched step: the step runs when every open session
has ended its day, or ``max_wait`` seconds after the first one did (``DayScheduler``). A tool's failure (an
unknown tool, a bad argument) is a 200 whose text is the tool's error, as the model would see it.

The server trusts no field of a client's task: ``task`` names one of the tasks it was started with, by id or
by a row equal to that task's row in every field (extra columns are ignored), and the session runs and is
scored with the server's own task (its folder, reference gain and scale). Any other row, such as one with
another ``from_states``, ``reference_gain`` or ``scale``, is refused before anything is opened.

Errors are one JSON line ``{"error": "..."}``: 400 (bad JSON, bad body, a task that is not served, bytes that
are not an HTTP request), 404 (no such session or route), 409 (the session is finished, or its id is taken),
503 (every slot is taken). A client's mistake never stops the server.

A session belongs to the connection that opened it (``owned``) and is closed when that connection closes,
unless it was opened with ``"keep": true``. The transport (``rbjax.lm.http.server``) reads a request's bytes
within the limits below and hands ``JsonApi.handle`` its method, target and body.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.parse

from rbjax.agents.tools.specs import TOOL_NAMES, openai_functions
from rbjax.lm.session import SessionError
from rbjax.lm.tasks import FIELDS, Task

log = logging.getLogger("rbjax.lm.http")

MAX_BODY = 4 << 20  # bytes of a request's body
MAX_HEAD = 64 << 10  # bytes of a request line or header line
MAX_HEADERS = 100  # header lines of a request
REQUEST_TIMEOUT = 30.0  # seconds from a request's first byte to its last, and to hand over its answer
SESSION_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}")
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict", 413: "Payload Too Large"}
REASONS[503] = "Service Unavailable"
REASONS[500] = "Internal Server Error"


class HttpError(Exception):
    """A request the server refuses: an HTTP ``status`` (int) and a one-line reason (str)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class JsonApi:
    """The routes over ``pool`` (``SessionPool``); ``tasks``: {id: Task}, the tasks a client may open.

    ``handle(method, target, body, owned)`` answers one request as (status, JSON payload); ``release(owned)``
    closes a connection's sessions when it ends. No sockets here: any transport can carry it."""

    def __init__(self, pool, tasks: dict):
        self.pool, self.tasks = pool, tasks
        self.tool_names, self.specs = list(TOOL_NAMES), openai_functions()

    async def handle(
        self, method: str, target: str, body: bytes, owned: dict | None = None
    ) -> tuple[int, object]:
        """(status, JSON payload) of one request. method: upper-case HTTP method; target: the request's
        target as sent (``/sessions/a%20b/call?x``); body: its bytes (b"" for none); owned: {session id:
        Session} of the connection, which ``open`` adds to (None: the sessions belong to no connection).
        Every failure is a status and ``{"error": str}``."""
        owned = {} if owned is None else owned
        try:
            return 200, await self.route(method, target, body, owned)
        except HttpError as e:
            if e.status >= 500:
                log.warning("%s %s: %d %s", method, target, e.status, e)
            return e.status, {"error": str(e)}
        except Exception as e:
            log.error("%s %s failed: %s: %s", method, target, type(e).__name__, e)
            return 500, {"error": f"{type(e).__name__}: {e}"[:500]}

    async def route(self, method: str, target: str, body: bytes, owned: dict):
        """The payload of the route ``method target`` names (``handle``'s arguments); HttpError otherwise."""
        path = urllib.parse.urlsplit(target).path
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        if method == "GET" and parts == ["health"]:
            return self.health()
        if method == "GET" and parts == ["tools"]:
            return self.specs
        if method == "GET" and parts == ["tasks"]:
            return list(self.tasks)
        if parts == ["sessions"] and method == "POST":
            return await self.open(json_body(body), owned)
        if len(parts) == 2 and parts[0] == "sessions":
            if method == "GET":
                return {"info": self.session(parts[1]).info()}
            if method == "DELETE":
                self.session(parts[1])
                self.pool.close(parts[1])
                owned.pop(parts[1], None)
                return {"closed": True}
        if len(parts) == 3 and parts[0] == "sessions" and method == "POST":
            if parts[2] == "call":
                return await self.call(parts[1], json_body(body))
            if parts[2] == "finish":
                return await self.finish(parts[1])
        raise HttpError(404, f"no route {method} {path}"[:300])

    def release(self, owned: dict) -> None:
        """Close the sessions of ``owned`` ({id: Session}) that are still the pool's: a connection ended."""
        for sid, session in owned.items():
            if self.pool.sessions.get(sid) is session:
                self.pool.close(sid)

    # ------------------------------------------------------------------ routes
    def health(self) -> dict:
        """{slots, open, free, opened, closed, flushes}: the pool's counts (ints)."""
        p = self.pool
        return {
            "slots": p.slots,
            "open": len(p.sessions),
            "free": len(p.free),
            "opened": p.opened,
            "closed": p.closed,
            "flushes": p.scheduler.flushes,
        }

    def session(self, sid: str):
        """The open ``Session`` of id ``sid``; a 404 otherwise."""
        try:
            return self.pool.get(sid)
        except SessionError as e:
            raise HttpError(404, str(e)) from None

    def task_of(self, spec):
        """The served ``Task`` that ``spec`` (the body's ``task``) names; a 400 for anything else."""
        try:
            return served_task(spec, self.tasks, "GET /tasks")
        except ValueError as e:
            raise HttpError(400, str(e)) from None

    async def open(self, body: dict, owned: dict) -> dict:
        """``POST /sessions``: {session, morning, info, tools} of a new session on the body's task."""
        if "task" not in body:
            raise HttpError(400, "body field 'task' is missing")
        task = self.task_of(body["task"])
        sid, keep = body.get("session_id"), body.get("keep", False)
        if sid is not None and not (isinstance(sid, str) and SESSION_ID.fullmatch(sid)):
            raise HttpError(
                400, "body field 'session_id' must be 1-128 of the characters A-Z a-z 0-9 . _ ~ -"
            )
        if not isinstance(keep, bool):
            raise HttpError(400, "body field 'keep' must be true or false")
        if sid is not None and sid in self.pool.sessions:
            raise HttpError(409, f"session {sid!r} is already open")
        if not self.pool.free:
            raise HttpError(503, f"every one of the server's {self.pool.slots} slots is taken; retry later")
        # Loading a store changes the engine's arrays: done on the thread that runs the batched steps, so it
        # never overlaps one.
        try:
            session = await self.pool.aopen(task, sid)
        except ValueError as e:
            raise HttpError(400, str(e)) from None
        except SessionError as e:
            raise HttpError(503 if not self.pool.free else 409, str(e)) from None
        if not keep:
            owned[session.id] = session
        return {
            "session": session.id,
            "morning": session.morning,
            "info": session.info(),
            "tools": self.tool_names,
        }

    async def call(self, sid: str, body: dict) -> dict:
        """``POST /sessions/{sid}/call``: {text, done, reward, info} of the body's tool call."""
        tool = body.get("tool")
        if not isinstance(tool, str):
            raise HttpError(400, "body field 'tool' must be a tool's name (a string)")
        session = self.session(sid)
        try:
            text = await session.acall(tool, body.get("args"))
        except SessionError as e:
            raise HttpError(409, str(e)) from None
        return {"text": text, "done": session.done, "reward": session.reward, "info": session.info()}

    async def finish(self, sid: str) -> dict:
        """``POST /sessions/{sid}/finish``: {info} once the session has played to its horizon."""
        session = self.session(sid)
        try:
            return {"info": await session.afinish()}
        except SessionError as e:
            raise HttpError(409, str(e)) from None


async def reap(pool, every: float) -> None:
    """Close ``pool``'s idle sessions (``SessionPool.reap``) every ``every`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(every)
        try:
            gone = pool.reap()
        except Exception as e:  # never let the reaper die
            log.warning("reap failed: %s: %s", type(e).__name__, e)
            continue
        if gone:
            log.info("closed %d idle session(s): %s", len(gone), ", ".join(gone[:10]))


# ---------------------------------------------------------------------- the tasks a client may open
def served_task(spec, tasks: dict, listing: str):
    """The served ``Task`` a client names. spec: a served task's id (str), or a task row (dict) whose parsed
    ``Task`` equals, field by field, the served task of its id (a dataset's extra columns are ignored).
    tasks: {id: Task} the server was started with; listing: where a client finds their ids (for the error).

    The served ``Task`` object is returned, never one made from the row: a client cannot make the server open
    another folder, or score with another reference gain or scale. ValueError (one line) otherwise."""
    if isinstance(spec, str):
        if spec not in tasks:
            raise ValueError(f"no task {spec!r} among the served tasks ({listing})"[:300])
        return tasks[spec]
    if not isinstance(spec, dict):
        raise ValueError("field 'task' must be a served task's id (a string) or its row (an object)")
    try:
        row = Task.from_row(spec, "task")
    except (ValueError, TypeError) as e:
        raise ValueError(str(e)[:300]) from None
    served = tasks.get(row.id)
    if served is None:
        raise ValueError(f"task row {row.id!r} is not a served task ({listing})"[:300])
    differ = [name for name in FIELDS if getattr(row, name) != getattr(served, name)]  # not the panel's
    if differ:  # (descriptive) fields, which a dataset may leave out
        raise ValueError(
            f"task row {row.id!r} differs from the served task in {', '.join(differ)}: send the served row "
            "unchanged, or its id"[:300]
        )
    return served


# ---------------------------------------------------------------------- bodies
def json_body(body: bytes) -> dict:
    """The JSON object of a request's ``body`` (bytes; empty: {}); a 400 for anything else."""
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise HttpError(400, f"the body is not JSON ({e})"[:300]) from None
    except RecursionError:  # "[[[[...": deeper than the parser's stack
        raise HttpError(400, "the body is not JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise HttpError(400, "the body must be a JSON object")
    return data


def encode(payload) -> bytes:
    """``payload`` (JSON-like; numpy scalars and arrays allowed) as UTF-8 JSON; NaN and infinities refused."""
    return json.dumps(payload, allow_nan=False, default=plain).encode()


def plain(x):
    """A numpy scalar or array ``x`` as Python numbers and lists (``json.dumps``'s ``default``)."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON")

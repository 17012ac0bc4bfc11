"""A JSON-over-HTTP face of one ``SessionPool``: many clients' sessions, one batched engine step a day for all.

Standard library only (``asyncio.start_server``): HTTP/1.1 with keep-alive and ``Content-Length`` bodies,
one JSON object in and out. Start it with ``rbjax lm serve --tasks FILE`` or ``serve(tasks_path)``.

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

Errors are one JSON line ``{"error": "..."}``: 400 (bad JSON, bad body, a task that is not served), 404 (no
such session or route), 409 (the session is finished, or its id is taken), 503 (every slot is taken). A
client's mistake never stops the server.

A session belongs to the connection that opened it and is closed when that connection closes, unless it was
opened with ``"keep": true``; with ``idle_timeout`` set, sessions that made no call for that long are closed
too. The engine runs one thing at a time: opening a session (loading its store) goes through the same
worker thread as the batched steps.

>>> with Client("http://127.0.0.1:8777") as c:
...     s = c.open("oracle-s0-d004-st0000-n2")
...     c.call(s, "view_inventory")
...     while not c.call(s, "end_today")["done"]: ...
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import http.client
import json
import logging
import re
import time
import urllib.parse

log = logging.getLogger("rbjax.lm.server")

MAX_BODY = 4 << 20  # bytes of a request's body
MAX_HEAD = 64 << 10  # bytes of a request line or header line
MAX_HEADERS = 100
SESSION_ID = re.compile(r"[A-Za-z0-9._~-]{1,128}")
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict", 413: "Payload Too Large"}
REASONS[503] = "Service Unavailable"
REASONS[500] = "Internal Server Error"


class HttpError(Exception):
    """A request the server refuses: an HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class BadRequest(Exception):
    """Bytes that are not an HTTP request: answered with a 400, then the connection is closed."""


class JsonServer:
    """The routes over ``pool`` (``SessionPool``); ``tasks``: {id: Task} a client may name by id.

    ``start(host, port)`` listens, ``wait()`` returns once ``stop()`` is called (from any thread), ``shutdown()``
    closes the listener, the connections and every session. ``url`` is the address once listening."""

    def __init__(self, pool, tasks: dict, reap_every: float | None = None):
        from rbjax.agents.tools.specs import TOOL_NAMES, openai_functions

        self.pool, self.tasks = pool, tasks
        self.tool_names, self.specs = list(TOOL_NAMES), openai_functions()
        self.reap_every = reap_every
        self.server: asyncio.AbstractServer | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.url = None
        self.connections: set[asyncio.Task] = set()
        self._stopped: asyncio.Event | None = None
        self._reaper: asyncio.Task | None = None

    # ------------------------------------------------------------------ life
    async def start(self, host: str = "127.0.0.1", port: int = 8777) -> None:
        self.loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        # a listen backlog for every slot: a trainer may open all its sessions at once
        backlog = max(128, self.pool.slots)
        self.server = await asyncio.start_server(
            self._connection, host, port, limit=MAX_HEAD, backlog=backlog
        )
        bound = self.server.sockets[0].getsockname()
        self.url = f"http://{bound[0]}:{bound[1]}"
        if self.reap_every:
            self._reaper = asyncio.create_task(self._reap())

    async def wait(self) -> None:
        await self._stopped.wait()

    def stop(self) -> None:
        """Ask ``wait`` to return; safe from any thread."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stopped.set)

    async def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        if self.server is not None:
            self.server.close()
        for task in list(self.connections):
            task.cancel()
        if self.connections:
            await asyncio.gather(*self.connections, return_exceptions=True)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)
        self.pool.close_all()

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(self.reap_every)
            try:
                gone = self.pool.reap()
            except Exception as e:  # never let the reaper die
                log.warning("reap failed: %s: %s", type(e).__name__, e)
                continue
            if gone:
                log.info("closed %d idle session(s): %s", len(gone), ", ".join(gone[:10]))

    # ------------------------------------------------------------------ connections
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self.connections.add(task)
        owned: dict[str, object] = {}  # the sessions this connection opened without "keep"
        try:
            while True:
                try:
                    request = await read_request(reader)
                except BadRequest as e:
                    log.info("bad request from %s: %s", peer(writer), e)
                    await respond(writer, 400, {"error": str(e)}, close=True)
                    return
                if request is None:  # the client closed the connection
                    return
                method, path, body, keep_alive = request
                status, payload = await self.handle(method, path, body, owned)
                await respond(writer, status, payload, close=not keep_alive)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception as e:  # a bug of ours: log it, drop this connection, keep serving the others
            log.error("connection %s failed: %s: %s", peer(writer), type(e).__name__, e)
        finally:
            for sid, session in owned.items():
                if self.pool.sessions.get(sid) is session:
                    self.pool.close(sid)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self.connections.discard(task)

    async def handle(self, method: str, path: str, body: bytes, owned: dict) -> tuple[int, object]:
        """(status, JSON payload) of one request; every failure is a status and a one-line error."""
        try:
            return 200, await self.route(method, path, body, owned)
        except HttpError as e:
            if e.status >= 500:
                log.warning("%s %s: %d %s", method, path, e.status, e)
            return e.status, {"error": str(e)}
        except Exception as e:
            log.error("%s %s failed: %s: %s", method, path, type(e).__name__, e)
            return 500, {"error": f"{type(e).__name__}: {e}"[:500]}

    async def route(self, method: str, path: str, body: bytes, owned: dict):
        parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(path).path.split("/") if p]
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
        raise HttpError(404, f"no route {method} {urllib.parse.urlsplit(path).path}"[:300])

    # ------------------------------------------------------------------ routes
    def health(self) -> dict:
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
        from rbjax.lm.session import SessionError

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
        from rbjax.lm.session import SessionError

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
        from rbjax.lm.session import SessionError

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
        from rbjax.lm.session import SessionError

        session = self.session(sid)
        try:
            return {"info": await session.afinish()}
        except SessionError as e:
            raise HttpError(409, str(e)) from None


# ---------------------------------------------------------------------- the tasks a client may open
def served_task(spec, tasks: dict, listing: str):
    """The served ``Task`` a client names. spec: a served task's id (str), or a task row (dict) whose parsed
    ``Task`` equals, field by field, the served task of its id (a dataset's extra columns are ignored).
    tasks: {id: Task} the server was started with; listing: where a client finds their ids (for the error).

    The served ``Task`` object is returned, never one made from the row: a client cannot make the server open
    another folder, or score with another reference gain or scale. ValueError (one line) otherwise."""
    from rbjax.lm.tasks import Task

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
    if row != served:
        differ = [
            f.name for f in dataclasses.fields(served) if getattr(row, f.name) != getattr(served, f.name)
        ]
        raise ValueError(
            f"task row {row.id!r} differs from the served task in {', '.join(differ)}: send the served row "
            "unchanged, or its id"[:300]
        )
    return served


# ---------------------------------------------------------------------- HTTP/1.1
async def read_request(reader: asyncio.StreamReader):
    """(method, target, body, keep_alive) of the next request; None at a clean end of the connection;
    BadRequest for bytes that are not an HTTP/1.x request with a JSON-sized body."""
    try:
        line = await reader.readline()
        while line in (b"\r\n", b"\n"):  # tolerated blank lines between requests
            line = await reader.readline()
        if not line:
            return None
        words = line.decode("latin-1").split()
        if len(words) != 3 or not words[2].startswith("HTTP/1.") or not words[1].startswith("/"):
            raise BadRequest("not an HTTP/1.1 request line")
        method, target, version = words
        headers = {}
        while True:
            h = await reader.readline()
            if not h:
                raise BadRequest("the connection ended inside the headers")
            if h in (b"\r\n", b"\n"):
                break
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep or len(headers) >= MAX_HEADERS:
                raise BadRequest("malformed or too many header lines")
            headers[name.strip().lower()] = value.strip()
    except (asyncio.LimitOverrunError, ValueError) as e:  # a line longer than MAX_HEAD
        raise BadRequest(f"request line or header too long ({type(e).__name__})") from None
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest("chunked bodies are not supported: send Content-Length")
    try:
        size = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest("Content-Length is not a number") from None
    if size < 0 or size > MAX_BODY:
        raise BadRequest(f"Content-Length must be 0..{MAX_BODY}")
    try:
        body = await reader.readexactly(size) if size else b""
    except asyncio.IncompleteReadError:
        raise BadRequest("the connection ended inside the body") from None
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
    return method.upper(), target, body, keep_alive


def json_body(body: bytes) -> dict:
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise HttpError(400, f"the body is not JSON ({e})"[:300]) from None
    if not isinstance(data, dict):
        raise HttpError(400, "the body must be a JSON object")
    return data


async def respond(writer: asyncio.StreamWriter, status: int, payload, close: bool = False) -> None:
    data = json.dumps(payload, allow_nan=False, default=_plain).encode()
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    writer.write(head.encode() + data)
    await writer.drain()


def _plain(x):
    """numpy scalars and arrays as JSON; NaN is refused by ``allow_nan=False`` upstream of a client."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON")


def peer(writer) -> str:
    p = writer.get_extra_info("peername")
    return f"{p[0]}:{p[1]}" if p else "?"


# ---------------------------------------------------------------------- entry point
async def serve(
    tasks_path: str,
    host: str = "127.0.0.1",
    port: int = 8777,
    slots: int = 256,
    idle_timeout: float | None = 600.0,
    ready=None,
    **pool_options,
) -> None:
    """Serve the tasks of ``tasks_path`` (``read_tasks``) from one pool of ``slots`` stores until cancelled or
    ``stop()``. The pool is made for the first task's run (tasks of other runs with the same env and params
    may be opened too). idle_timeout: seconds after which a session that made no call is closed (None: never).
    ready: called with the ``JsonServer`` once it listens (``.url``, ``.pool``, ``.stop()``). pool_options:
    more ``SessionPool`` options (reward, max_wait, code limits)."""
    from rbjax.lm.pool import SessionPool
    from rbjax.lm.tasks import read_tasks

    tasks = read_tasks(tasks_path)
    pool = SessionPool.for_task(tasks[0], slots=slots, idle_timeout=idle_timeout, **pool_options)
    reap_every = None if idle_timeout is None else max(0.5, min(5.0, idle_timeout / 4))
    server = JsonServer(pool, {t.id: t for t in tasks}, reap_every)
    await server.start(host, port)
    try:
        if ready is not None:
            ready(server)
        await server.wait()
    finally:
        await server.shutdown()


# ---------------------------------------------------------------------- client
class ServerError(Exception):
    """The server's answer to a refused request: ``status`` and its one-line ``error``."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status, self.error = status, message


class Client:
    """One keep-alive connection to a ``JsonServer`` (``http.client``). A session is an id or ``open``'s dict.
    The sessions opened without ``keep`` close when the connection does (``disconnect``, or leaving a
    ``with`` block). A refused request raises ``ServerError``."""

    def __init__(self, url: str = "http://127.0.0.1:8777", timeout: float | None = 600.0):
        parts = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        raw = response.read()
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = {"error": raw[:300].decode("utf-8", "replace")}
        if response.status >= 400:
            message = payload.get("error") if isinstance(payload, dict) else str(payload)
            raise ServerError(response.status, message)
        return payload

    def open(self, task, session_id: str | None = None, keep: bool = False) -> dict:
        """A session on ``task``: a served task's id, or a served ``Task`` or its row, unchanged (the server refuses
        any other row). Returns {session, morning, info, tools}."""
        if hasattr(task, "to_row"):
            task = task.to_row()
        body = {"task": task, "keep": keep}
        if session_id is not None:
            body["session_id"] = session_id
        return self.request("POST", "/sessions", body)

    def call(self, session, tool: str, args: dict | None = None) -> dict:
        """{text, done, reward, info} of one tool call (``end_today`` included)."""
        return self.request("POST", f"/sessions/{_sid(session)}/call", {"tool": tool, "args": args or {}})

    def finish(self, session) -> dict:
        return self.request("POST", f"/sessions/{_sid(session)}/finish", {})["info"]

    def info(self, session) -> dict:
        return self.request("GET", f"/sessions/{_sid(session)}")["info"]

    def close(self, session) -> None:
        self.request("DELETE", f"/sessions/{_sid(session)}")

    def health(self) -> dict:
        return self.request("GET", "/health")

    def tools(self) -> list:
        return self.request("GET", "/tools")

    def tasks(self) -> list:
        return self.request("GET", "/tasks")

    def disconnect(self) -> None:
        self.conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.disconnect()


def _sid(session) -> str:
    sid = session["session"] if isinstance(session, dict) else session
    return urllib.parse.quote(str(sid), safe="")


def wait_for(url: str, timeout: float = 60.0) -> dict:
    """The server's health once it answers (a process just started); TimeoutError after ``timeout`` s."""
    end = time.monotonic() + timeout
    while True:
        try:
            with Client(url, timeout=5) as c:
                return c.health()
        except OSError:
            if time.monotonic() > end:
                raise TimeoutError(f"no server at {url} after {timeout:.0f} s") from None
            time.sleep(0.2)

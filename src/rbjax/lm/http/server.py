"""The transport of the JSON protocol (``rbjax.lm.http.protocol``): HTTP/1.1 over ``asyncio.start_server``.

Standard library only: keep-alive, ``Content-Length`` bodies (chunked ones are refused), ``Expect:
100-continue`` answered. Start it with ``rbjax lm serve --tasks FILE`` or ``serve(tasks_path)``.

What a client cannot do to it, each answered with one JSON line ``{"error": ...}`` (a 400) and the connection
closed: a request line or header line over ``MAX_HEAD`` bytes, more than ``MAX_HEADERS`` header lines, a
``Content-Length`` over ``MAX_BODY`` or not a number, a chunked body, bytes that are not an HTTP/1.x request,
a request whose bytes take more than ``request_timeout`` seconds from the first to the last. A client that
does not read its answers is dropped once its answer has waited ``request_timeout`` seconds. A connection may
wait as long as it likes *between* requests: its sessions are closed when it closes (``JsonApi.release``);
with ``idle_timeout`` set, sessions that made no call for that long are closed too. The engine runs one thing
at a time: opening a session (loading its store) goes through the same worker thread as the batched steps.
"""

from __future__ import annotations

import asyncio
import contextlib

from rbjax.lm.http.protocol import (
    MAX_BODY,
    MAX_HEAD,
    MAX_HEADERS,
    REASONS,
    REQUEST_TIMEOUT,
    JsonApi,
    encode,
    log,
    reap,
)
from rbjax.lm.pool import SessionPool
from rbjax.lm.tasks import read_tasks

BLANK = (b"\r\n", b"\n")
DEADLINE = getattr(asyncio, "timeout", None)  # Python 3.11+: a deadline without a task of its own


class BadRequest(Exception):
    """Bytes that are not an HTTP request: answered with a 400, then the connection is closed."""


class JsonServer:
    """The JSON protocol over ``pool`` (``SessionPool``); ``tasks``: {id: Task} a client may name by id.

    ``start(host, port)`` listens, ``wait()`` returns once ``stop()`` is called (from any thread), ``shutdown()``
    closes the listener, the connections and every session. ``url`` is the address once listening.
    reap_every: seconds between idle-session sweeps (None: none); request_timeout: seconds a request's bytes,
    and a client's reading of its answer, may take."""

    def __init__(
        self, pool, tasks: dict, reap_every: float | None = None, request_timeout: float = REQUEST_TIMEOUT
    ):
        self.api = JsonApi(pool, tasks)
        self.pool, self.tasks = pool, tasks
        self.reap_every, self.request_timeout = reap_every, request_timeout
        self.server: asyncio.AbstractServer | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.url = None
        self.connections: set[asyncio.Task] = set()
        self._stopped: asyncio.Event | None = None
        self._reaper: asyncio.Task | None = None

    # ------------------------------------------------------------------ life
    async def start(self, host: str = "127.0.0.1", port: int = 8777) -> None:
        """Listen on ``host``:``port`` (0: a free port; ``url`` says which)."""
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
            self._reaper = asyncio.create_task(reap(self.pool, self.reap_every))

    async def wait(self) -> None:
        """Return once ``stop()`` was called."""
        await self._stopped.wait()

    def stop(self) -> None:
        """Ask ``wait`` to return; safe from any thread."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stopped.set)

    async def shutdown(self) -> None:
        """Close the listener, every connection and every session."""
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

    # ------------------------------------------------------------------ connections
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self.connections.add(task)
        owned: dict[str, object] = {}  # the sessions this connection opened without "keep"
        try:
            while True:
                try:
                    request = await read_request(reader, writer, self.request_timeout)
                except BadRequest as e:
                    log.info("bad request from %s: %s", peer(writer), e)
                    await respond(writer, 400, {"error": str(e)}, True, self.request_timeout)
                    return
                if request is None:  # the client closed the connection
                    return
                method, target, body, keep_alive = request
                status, payload = await self.api.handle(method, target, body, owned)
                await respond(writer, status, payload, not keep_alive, self.request_timeout)
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except asyncio.TimeoutError:  # the client reads none of its answers: drop it, unsent bytes and all
            log.info("dropped %s: it read no answer for %.0f s", peer(writer), self.request_timeout)
            writer.transport.abort()
        except Exception as e:  # a bug of ours: log it, drop this connection, keep serving the others
            log.error("connection %s failed: %s: %s", peer(writer), type(e).__name__, e)
        finally:
            self.api.release(owned)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self.connections.discard(task)


# ---------------------------------------------------------------------- HTTP/1.1
async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None = None, timeout: float = REQUEST_TIMEOUT
):
    """(method, target, body, keep_alive) of the next request: str, str, bytes, bool. None at a clean end of
    the connection. BadRequest for bytes that are not an HTTP/1.x request with a JSON-sized body, or whose
    bytes, from the first, take more than ``timeout`` seconds. The wait for the first byte has no limit (a
    keep-alive client may think between requests). writer: where ``100 Continue`` goes (None: nowhere)."""
    first = await reader.read(1)
    while first in (b"\r", b"\n"):  # blank lines between requests (RFC 9112) start no deadline
        first = await reader.read(1)
    if not first:
        return None
    try:
        if DEADLINE is None:  # Python 3.10: a task of its own for the request
            return await asyncio.wait_for(read_rest(reader, writer, first), timeout)
        async with DEADLINE(timeout):
            return await read_rest(reader, writer, first)
    except asyncio.TimeoutError:
        raise BadRequest(f"the request was not sent within {timeout:g} s") from None


async def read_rest(reader: asyncio.StreamReader, writer, first: bytes):
    """``read_request`` once the request's ``first`` byte has arrived (blank lines before it skipped)."""
    head = await read_head(reader, first)
    if head is None:
        return None
    method, target, version, headers = head
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest("chunked bodies are not supported: send Content-Length")
    try:
        size = int(headers.get("content-length", "0"))
    except ValueError:
        raise BadRequest("Content-Length is not a number") from None
    if size < 0 or size > MAX_BODY:
        raise BadRequest(f"Content-Length must be 0..{MAX_BODY}")
    if size and writer is not None and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    try:
        body = await reader.readexactly(size) if size else b""
    except asyncio.IncompleteReadError:
        raise BadRequest("the connection ended inside the body") from None
    connection = headers.get("connection", "").lower()
    keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
    return method.upper(), target, body, keep_alive


async def read_head(reader: asyncio.StreamReader, first: bytes):
    """(method, target, version, {lower-case name: value}) of a request line and its headers, the line's
    ``first`` byte already read; None if the connection ended among blank lines. BadRequest for a
    line over ``MAX_HEAD`` bytes, more than ``MAX_HEADERS`` headers, or no HTTP/1.x request line."""
    try:
        line = first if first == b"\n" else first + await reader.readline()
        while line in BLANK:  # tolerated blank lines between requests
            line = await reader.readline()
            if not line:
                return None
        words = line.decode("latin-1").split()
        if len(words) != 3 or not words[2].startswith("HTTP/1.") or not words[1].startswith("/"):
            raise BadRequest("not an HTTP/1.1 request line")
        headers = {}
        while True:
            h = await reader.readline()
            if not h:
                raise BadRequest("the connection ended inside the headers")
            if h in BLANK:
                break
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep or len(headers) >= MAX_HEADERS:
                raise BadRequest("malformed or too many header lines")
            headers[name.strip().lower()] = value.strip()
    except (asyncio.LimitOverrunError, ValueError) as e:  # a line longer than MAX_HEAD
        raise BadRequest(f"request line or header too long ({type(e).__name__})") from None
    return words[0], words[1], words[2], headers


async def respond(
    writer: asyncio.StreamWriter, status: int, payload, close: bool = False, timeout: float = REQUEST_TIMEOUT
) -> None:
    """Write ``status`` and ``payload`` (JSON-like) as one HTTP/1.1 response (``Connection: close`` if
    ``close``). asyncio.TimeoutError if the client has not taken it ``timeout`` seconds later."""
    data = encode(payload)
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    writer.write(head.encode() + data)
    transport = writer.transport
    if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:  # the client lags
        await asyncio.wait_for(writer.drain(), timeout)
    else:
        await writer.drain()


def peer(writer: asyncio.StreamWriter) -> str:
    """``host:port`` of the client on ``writer``'s connection ("?" if unknown)."""
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
    request_timeout: float = REQUEST_TIMEOUT,
    **pool_options,
) -> None:
    """Serve the tasks of ``tasks_path`` (``read_tasks``) from one pool of ``slots`` stores until cancelled or
    ``stop()``. The pool is made for the first task's run (tasks of other runs with the same env and params
    may be opened too). idle_timeout: seconds after which a session that made no call is closed (None: never).
    ready: called with the ``JsonServer`` once it listens (``.url``, ``.pool``, ``.stop()``). request_timeout:
    seconds a request's bytes may take (``JsonServer``). pool_options: more ``SessionPool`` options (reward,
    max_wait, code limits)."""
    tasks = read_tasks(tasks_path)
    pool = SessionPool.for_task(tasks[0], slots=slots, idle_timeout=idle_timeout, **pool_options)
    reap_every = None if idle_timeout is None else max(0.5, min(5.0, idle_timeout / 4))
    server = JsonServer(pool, {t.id: t for t in tasks}, reap_every, request_timeout)
    await server.start(host, port)
    try:
        if ready is not None:
            ready(server)
        await server.wait()
    finally:
        await server.shutdown()

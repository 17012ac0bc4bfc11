"""rbjax.lm.http.server against clients that misbehave: oversized heads and bodies, too many headers, slow
senders and readers, malformed request lines and lengths, chunked and non-JSON bodies. Each gets a one-line
JSON error or a closed connection, and the server goes on serving a normal client.

The transport does not depend on the engine: the server runs over a stand-in pool (no sessions, no
compilation), with a short request timeout so that slow clients are dropped within the test's time."""

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
from types import SimpleNamespace

import pytest

from rbjax.lm.http import MAX_BODY, MAX_HEAD, MAX_HEADERS, Client, JsonServer

TIMEOUT = 1.0  # the server's request timeout in these tests (seconds)


class StandInPool:
    """What the transport reaches of a ``SessionPool``: its counts, no sessions."""

    slots, opened, closed = 4, 0, 0

    def __init__(self):
        self.sessions, self.free = {}, [0, 1, 2, 3]
        self.scheduler = SimpleNamespace(flushes=0)

    def get(self, sid):
        from rbjax.lm.session import SessionError

        raise SessionError(f"no session {sid!r}")

    def close_all(self):
        pass


@pytest.fixture(scope="module")
def server():
    box, ready = {}, threading.Event()

    async def main():
        s = JsonServer(StandInPool(), {}, request_timeout=TIMEOUT)
        await s.start("127.0.0.1", 0)
        box["server"] = s
        ready.set()
        try:
            await s.wait()
        finally:
            await s.shutdown()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(60), "the server did not start"
    yield box["server"]
    box["server"].stop()
    thread.join(30)


@pytest.fixture(autouse=True)
def still_serving(server):
    """After every test: a normal client is served, and no connection of the test is left open."""
    yield
    with Client(server.url, timeout=5) as c:
        assert c.health()["slots"] == StandInPool.slots
    end = time.monotonic() + 5
    while len(server.connections) > 0 and time.monotonic() < end:
        time.sleep(0.05)
    assert not server.connections, f"{len(server.connections)} connection(s) left open"


def address(server) -> tuple[str, int]:
    host, port = server.url.rsplit("/", 1)[1].split(":")
    return host, int(port)


def exchange(server, data: bytes, hang_up: bool = False, wait: float = 5.0) -> bytes:
    """Send ``data`` on a new connection and read until the server closes it (a reset ends the reading
    too); a socket.timeout if the server neither closes it nor stops sending within ``wait`` seconds.
    hang_up: close our sending side after ``data``."""
    answer = b""
    with socket.create_connection(address(server), timeout=wait) as sock:
        try:
            sock.sendall(data)
            if hang_up:
                sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    return answer


def responses(answer: bytes) -> list[tuple[int, dict]]:
    """(status, JSON payload) of each response in ``answer``; each payload must be one JSON line."""
    out = []
    while answer:
        head, _, rest = answer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        if status == 100:  # the go-ahead for a body: no body of its own
            answer = rest
            continue
        size = next(int(h.split(":")[1]) for h in lines[1:] if h.lower().startswith("content-length:"))
        body, answer = rest[:size], rest[size:]
        assert b"\n" not in body, body[:200]
        out.append((status, json.loads(body)))
    return out


def refused(server, data: bytes, said: str, reset_ok: bool = False) -> None:
    """``data`` is answered with one 400 whose error holds ``said``, and the connection is closed. reset_ok:
    the server may hang up before we read its answer (it closes with our bytes unread: a reset)."""
    answer = exchange(server, data)
    if reset_ok and answer == b"":
        return
    got = responses(answer)
    assert len(got) == 1 and got[0][0] == 400 and said in got[0][1]["error"], got


# ---------------------------------------------------------------------- sizes
def test_an_oversized_request_line_is_refused(server):
    line = b"GET /health?" + b"a" * MAX_HEAD + b" HTTP/1.1\r\n\r\n"
    refused(server, line, "too long", reset_ok=True)


def test_an_oversized_header_line_is_refused(server):
    head = b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * MAX_HEAD + b"\r\n\r\n"
    refused(server, head, "too long", reset_ok=True)


def test_too_many_headers_are_refused(server):
    lines = b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADERS + 1))
    refused(server, b"GET /health HTTP/1.1\r\n" + lines + b"\r\n", "too many header lines")
    ok = b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADERS - 1))  # as many as allowed: served
    got = responses(exchange(server, b"GET /health HTTP/1.1\r\nConnection: close\r\n" + ok + b"\r\n"))
    assert [s for s, _ in got] == [200]


def test_an_oversized_body_is_refused_before_it_is_read(server):
    head = b"POST /sessions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1)
    refused(server, head + b"{", "Content-Length must be 0..")


def test_a_body_longer_than_its_content_length_is_not_a_second_request(server):
    """The bytes past ``Content-Length`` are read as the next request: refused, and the connection closed."""
    body = b'{"task": "x"}' + b" " * (MAX_BODY + 1)
    answer = exchange(server, b"POST /sessions HTTP/1.1\r\nContent-Length: 13\r\n\r\n" + body)
    got = responses(answer) if answer else []
    assert got[:1] in ([], [(400, {"error": "no task 'x' among the served tasks (GET /tasks)"})]), got
    assert len(got) <= 2 and all(s == 400 for s, _ in got), got


def test_an_oversized_body_without_content_length_is_not_a_request(server):
    junk = b"{" * (MAX_BODY + 1)
    answer = exchange(server, b"POST /sessions HTTP/1.1\r\n\r\n" + junk)
    got = responses(answer) if answer else []
    assert [s for s, _ in got] in ([], [400], [400, 400]), got  # an empty body, then junk: refused


# ---------------------------------------------------------------------- slow clients
def test_a_stalled_request_is_dropped_and_others_are_served(server):
    with socket.create_connection(address(server), timeout=10) as slow:
        for byte in b"GET /health HTTP/1.1\r\nHost: x":  # a head sent byte by byte, never finished
            slow.sendall(bytes([byte]))
            time.sleep(0.01)
        with Client(server.url, timeout=5) as c:  # meanwhile, a normal client is served
            assert c.health()["slots"] == StandInPool.slots
        start, answer = time.monotonic(), b""
        while chunk := slow.recv(65536):
            answer += chunk
    assert time.monotonic() - start < 3 * TIMEOUT + 1
    got = responses(answer)
    assert len(got) == 1 and got[0][0] == 400 and "not sent within" in got[0][1]["error"], got


def test_a_trickling_request_is_dropped(server):
    """A byte every 0.1 s keeps every read short: the limit is on the whole request."""
    answer = b""
    with socket.create_connection(address(server), timeout=10) as slow:
        start = time.monotonic()
        with contextlib.suppress(OSError):
            for byte in b"POST /sessions HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + b" " * 1000:
                slow.sendall(bytes([byte]))
                time.sleep(0.1)
                if time.monotonic() - start > 5 * TIMEOUT:
                    break
            while chunk := slow.recv(65536):
                answer += chunk
    assert time.monotonic() - start < 3 * TIMEOUT + 1, "the trickle was not cut off"
    assert answer == b"" or "not sent within" in responses(answer)[0][1]["error"]


def test_a_body_shorter_than_its_content_length_is_dropped(server):
    refused(server, b"POST /sessions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{}", "not sent within")


def test_a_client_that_reads_no_answer_is_dropped(server):
    """Requests sent, answers never read: once an answer has waited ``TIMEOUT`` the connection is dropped."""
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(address(server))
    try:
        slow.settimeout(10)
        with contextlib.suppress(OSError):
            slow.sendall(b"GET /tools HTTP/1.1\r\n\r\n" * 2000)
        with Client(server.url, timeout=5) as c:
            assert c.health()["slots"] == StandInPool.slots
        end = time.monotonic() + 3 * TIMEOUT + 2
        while server.connections and time.monotonic() < end:
            time.sleep(0.05)
        assert not server.connections, "the client that reads nothing is still connected"
    finally:
        slow.close()


# ---------------------------------------------------------------------- malformed requests
@pytest.mark.parametrize(
    "line",
    [
        b"\x00\xff\x13garbage\r\n\r\n",
        b"GET /health\r\n\r\n",
        b"GET health HTTP/1.1\r\n\r\n",
        b"GET /health HTTP/2.0\r\n\r\n",
        b"GET /health HTTP/1.1 extra\r\n\r\n",
    ],
)
def test_a_malformed_request_line_is_refused(server, line):
    refused(server, line, "not an HTTP/1.1 request line")


def test_a_header_line_without_a_colon_is_refused(server):
    refused(server, b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n", "malformed")


@pytest.mark.parametrize(
    "value,said", [("nope", "not a number"), ("", "not a number"), ("-5", "must be 0..")]
)
def test_a_bad_content_length_is_refused(server, value, said):
    refused(server, f"POST /sessions HTTP/1.1\r\nContent-Length: {value}\r\n\r\n{{}}".encode(), said)


def test_a_chunked_body_is_refused(server):
    head = b"POST /sessions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    refused(server, head, "chunked bodies are not supported: send Content-Length")


def test_the_end_of_a_connection_inside_a_request_is_handled(server):
    for data in (b"GET /health HTTP/1.1\r\nHost", b"POST /sessions HTTP/1.1\r\nContent-Length: 9\r\n\r\n{"):
        answer = exchange(server, data, hang_up=True)
        assert answer == b"" or responses(answer)[0][0] == 400


# ---------------------------------------------------------------------- bodies: the connection goes on
@pytest.mark.parametrize(
    "body,said",
    [
        (b"{not json", "the body is not JSON"),
        (b"\xff\xfe{}", "the body is not JSON"),
        (b"[1, 2]", "the body must be a JSON object"),
        (b'"task"', "the body must be a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "the body is not JSON (nested too deeply)"),
    ],
    ids=["not-json", "not-utf8", "array", "string", "nested-100k"],
)
def test_a_body_that_is_no_json_object_is_a_400_on_a_live_connection(server, body, said):
    conn = http.client.HTTPConnection(*address(server), timeout=10)
    try:
        conn.request("POST", "/sessions", body=body)
        resp = conn.getresponse()
        raw = resp.read()
        assert resp.status == 400 and b"\n" not in raw and said in json.loads(raw)["error"], raw[:200]
        conn.request("GET", "/health")  # the same connection goes on
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["slots"] == StandInPool.slots
    finally:
        conn.close()


def test_expect_100_continue_is_answered_before_the_body(server):
    """curl sends ``Expect: 100-continue`` with bodies over 1 KB, and waits a second for the go-ahead."""
    with socket.create_connection(address(server), timeout=TIMEOUT / 2) as sock:
        sock.sendall(b"POST /sessions HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"{}")
        answer = sock.recv(65536)
    assert responses(answer) == [(400, {"error": "body field 'task' is missing"})]


def test_blank_lines_between_requests_start_no_deadline(server):
    """RFC 9112: a server ignores blank lines before a request line; a keep-alive client that sends a stray CRLF
    and then thinks for longer than the request timeout is still served (and keeps its sessions)."""
    get = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(address(server), timeout=5) as sock:
        sock.sendall(get + b"\r\n")
        first = sock.recv(65536)
        time.sleep(TIMEOUT * 1.5)
        sock.sendall(get)
        second = sock.recv(65536)
    assert [status for status, _ in responses(first + second)] == [200, 200]

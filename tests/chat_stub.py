"""A small OpenAI-compatible chat server for the tests: ``POST /v1/chat/completions`` on 127.0.0.1, in a
thread, answering from a script. Nothing leaves the machine.

``script(request, n) -> reply``: ``request`` is the request's JSON, ``n`` counts requests from 0. A reply is
``Stream(content, reasoning, usage, cached, tool_calls, finish, error)`` (server-sent chunks: reasoning
deltas, content deltas, native tool-call deltas, a chunk with the finish reason, a usage chunk, ``[DONE]``;
or, for a request without ``"stream": true``, one JSON reply with the same fields), ``Status(code)`` (an
error reply: 401, 429, 500, ...), ``Malformed()`` (a chunk that is not JSON) or ``Hang()`` (the headers and
one chunk, then nothing until the server stops).

What llama.cpp's server does, as ``Stream`` fields: ``usage=None`` sends no usage chunk (it sends none, even
when asked); ``finish=None`` ends with ``[DONE]`` but no finish reason (a stream cut short while other
requests are in flight); ``Stream("", finish=None)`` is an empty reply; ``error="..."`` sends the content,
then an ``{"error": ...}`` event inside the 200 stream, and stops. ``ChatStub(script, context=N)`` answers a
prompt over N tokens (characters / 4) with that error event, as llama.cpp does for a context overflow (a
400 for a request that is not streamed).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclasses.dataclass
class Stream:
    content: str
    reasoning: str = ""
    usage: tuple[int, int] = (100, 10)  # prompt, completion tokens
    cached: int = 0
    tool_calls: tuple = ()  # native calls: (name, arguments JSON text) pairs, streamed in two pieces each
    finish: str | None = "stop"  # None: no finish_reason at all
    error: str | None = None  # an {"error": ...} event after the content, inside the 200 stream


@dataclasses.dataclass
class Status:
    code: int


@dataclasses.dataclass
class Malformed:
    pass


@dataclasses.dataclass
class Hang:
    pass


class ChatStub:
    """``with ChatStub(script) as stub:`` serves at ``stub.url`` (``http://127.0.0.1:PORT/v1``);
    ``stub.requests`` keeps every request's JSON, ``stub.headers`` its headers (lower-case names)."""

    def __init__(self, script, context: int | None = None):
        self.script, self.context = script, context
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    n = len(stub.requests)
                    stub.requests.append(body)
                    stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path != "/v1/chat/completions":
                    return self._status(404)
                prompt = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
                if stub.context is not None and prompt > stub.context:
                    message = (
                        f"the request ({prompt} tokens) exceeds the available context size ({stub.context})"
                    )
                    reply = Stream("", usage=None, error=message)
                else:
                    reply = stub.script(body, n)
                if isinstance(reply, Status):
                    return self._status(reply.code)
                if not body.get("stream") and isinstance(reply, Stream):
                    return self._status(400, reply.error) if reply.error else self._json(body, reply)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if isinstance(reply, Malformed):
                    self._send("data: {this is not json\n\n")
                elif isinstance(reply, Hang):
                    self._send(_chunk(body, {"content": ""}))
                    stub.stopping.wait(60)
                else:
                    for piece in _pieces(reply.reasoning):
                        self._send(_chunk(body, {"reasoning_content": piece}))
                    for piece in _pieces(reply.content):
                        self._send(_chunk(body, {"content": piece}))
                    for i, (name, args) in enumerate(reply.tool_calls):
                        head = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name}}
                        self._send(_chunk(body, {"tool_calls": [head]}))
                        for piece in _pieces(args):
                            tail = {"index": i, "function": {"arguments": piece}}
                            self._send(_chunk(body, {"tool_calls": [tail]}))
                    if reply.error is not None:  # llama.cpp: the error as an event, then the stream ends
                        error = {"code": 400, "message": reply.error, "type": "exceed_context_size_error"}
                        self._send("data: " + json.dumps({"error": error}) + "\n\n")
                        self.close_connection = True
                        return
                    if reply.finish is not None:
                        self._send(_chunk(body, {}, finish=reply.finish))
                    if reply.usage is not None:
                        usage = _usage(reply)
                        self._send(
                            "data: " + json.dumps({**_head(body), "choices": [], "usage": usage}) + "\n\n"
                        )
                    self._send("data: [DONE]\n\n")
                self.close_connection = True

            def _json(self, body, reply):
                message = {"role": "assistant", "content": reply.content}
                if reply.reasoning:
                    message["reasoning_content"] = reply.reasoning
                if reply.tool_calls:
                    message["tool_calls"] = [
                        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                        for i, (name, args) in enumerate(reply.tool_calls)
                    ]
                choice = {"index": 0, "message": message, "finish_reason": reply.finish}
                payload = {**_head(body), "object": "chat.completion", "choices": [choice]}
                if reply.usage is not None:
                    payload["usage"] = _usage(reply)
                self._write(200, payload)

            def _status(self, code, message=None):
                self._write(
                    code, {"error": {"message": message or f"scripted status {code}", "type": "stub"}}
                )

            def _write(self, code, obj):
                payload = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _send(self, text):
                try:
                    self.wfile.write(text.encode())
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def _head(body):
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": body.get("model", ""),
    }


def _usage(reply):
    prompt, completion = reply.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": reply.cached},
    }


def _chunk(body, delta, finish=None):
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return "data: " + json.dumps({**_head(body), "choices": [choice]}) + "\n\n"


def _pieces(text, size=7):
    return [text[i : i + size] for i in range(0, len(text), size)]

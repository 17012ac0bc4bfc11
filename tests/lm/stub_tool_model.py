"""A scripted stand-in for a model behind an OpenAI-compatible Chat Completions endpoint (127.0.0.1 only).

It answers ``POST /v1/chat/completions`` (streamed as SSE ``chat.completion.chunk`` events with native
``delta.tool_calls``, as verifiers' harnesses ask, or as one JSON object without ``stream``) and
``GET /v1/models``. The policy reads only the conversation, so equal conversations get equal replies:

* no tool called yet, or the last call was ``end_today`` and the episode goes on: call ``view_inventory``;
* the last call was ``view_inventory`` (or any other tool): call ``end_today``;
* the last tool text says the episode is over: reply with plain text (the harness then stops).

    server, url = start()            # url: http://127.0.0.1:PORT/v1
    ...
    server.shutdown()

or ``python tests/lm/stub_tool_model.py --port 8766 --log requests.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OVER = "episode is over"


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def last_tool_name(messages: list[dict]) -> str | None:
    """The name of the tool the latest assistant message called (None if none has)."""
    for m in reversed(messages):
        if m.get("role") == "assistant" and m.get("tool_calls"):
            return m["tool_calls"][-1]["function"]["name"]
    return None


def decide(body: dict) -> tuple[str, str, dict | None]:
    """("tool", name, args) or ("text", reply, None) for a chat request."""
    messages = body.get("messages") or []
    last = last_tool_name(messages)
    if messages and messages[-1].get("role") == "tool" and OVER in text_of(messages[-1]):
        return "text", "The episode is over.", None
    if last in (None, "end_today"):
        return "tool", "view_inventory", {}
    return "tool", "end_today", {}


class Handler(BaseHTTPRequestHandler):
    log_path: str | None = None
    lock = threading.Lock()

    def log_message(self, *args) -> None:
        pass

    def send_json(self, payload: dict, status: int = 200) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self.send_json({"object": "list", "data": [{"id": "stub-model", "object": "model"}]})
        else:
            self.send_json({"error": {"message": f"no route {self.path}"}}, 404)

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.send_json({"error": {"message": f"no route {self.path}"}}, 404)
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        kind, what, args = decide(body)
        model = body.get("model", "stub-model")
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        call_id = "call_" + uuid.uuid4().hex[:12]
        if self.log_path:
            tools = [t["function"]["name"] for t in body.get("tools", [])]
            line = {"stream": bool(body.get("stream")), "n_messages": len(body.get("messages", []))}
            line.update(n_tools=len(tools), reply=[kind, what, args])
            line["first_user"] = next(
                (text_of(m) for m in body.get("messages", []) if m.get("role") == "user"), ""
            )
            with self.lock, open(self.log_path, "a") as f:
                f.write(json.dumps(line) + "\n")
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            if kind == "text":
                message = {"role": "assistant", "content": what}
            else:
                fn = {"name": what, "arguments": json.dumps(args)}
                message = {"role": "assistant", "content": None}
                message["tool_calls"] = [{"id": call_id, "type": "function", "function": fn}]
            choice = {
                "index": 0,
                "message": message,
                "finish_reason": "stop" if kind == "text" else "tool_calls",
            }
            out = {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model}
            self.send_json({**out, "choices": [choice], "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def chunk(delta: dict | None, finish: str | None = None, with_usage: bool = False) -> None:
            event = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
            }
            event["choices"] = (
                [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            )
            if with_usage:
                event["usage"] = usage
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if kind == "text":
            chunk({"content": what})
            chunk({}, "stop")
        else:
            head = {
                "index": 0,
                "id": call_id,
                "type": "function",
                "function": {"name": what, "arguments": ""},
            }
            chunk({"tool_calls": [head]})
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]})
            chunk({}, "tool_calls")
        chunk(None, with_usage=True)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def start(port: int = 0, log_path: str | None = None) -> tuple[ThreadingHTTPServer, str]:
    """Serve on 127.0.0.1:``port`` (0: any free port) in a daemon thread; (server, base URL ending in /v1)."""
    handler = type("StubHandler", (Handler,), {"log_path": log_path})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8766)
    ap.add_argument("--log", default=None, help="append one JSON line per request here")
    a = ap.parse_args()
    server, url = start(a.port, a.log)
    print(url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()

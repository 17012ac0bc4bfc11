"""``execute_code``: the reference's constrained Python, run in a worker process with time and memory limits.

The parent checks the code (length, then the reference's AST rules), starts ``_sandbox_worker.py`` (a
stdlib-only script in a fresh ``python -I -S``), and answers the worker's read-tool calls itself, so the
inner calls are executed and logged by the store's own tools. The worker sets an address-space limit
(``memory_mb``) before running the code; the parent kills it ``timeout`` seconds after the worker reports
ready, so a slow start on a busy machine does not eat the code's time (rbjax decision: the reference has no
limit; the start itself may take up to ``STARTUP_LIMIT`` seconds). Either way the store goes on: the limit
is reported as the call's error.
The AST rules are not a security boundary; the worker process is the containment.
"""

from __future__ import annotations

import ast
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable

from rbjax.agents._sandbox_worker import ALLOWED_IMPORTS
from rbjax.agents.formats import ToolError

MAX_CODE = 20_000
MAX_STDOUT, MAX_RESULT = 10_000, 5_000
STARTUP_LIMIT = 60.0  # seconds for the worker's interpreter and imports, before the code's own time starts
BANNED_NODES = {
    ast.Global: "global",
    ast.Nonlocal: "nonlocal",
    ast.ClassDef: "class",
    ast.AsyncFunctionDef: "async def",
    ast.With: "with",
    ast.AsyncWith: "async with",
    ast.Raise: "raise",
}
BANNED_NAMES = {
    "__builtins__", "__import__", "eval", "exec", "compile", "open", "globals", "locals", "vars", "dir",
    "help", "input", "super", "place_order", "modify_sku_price",
}  # fmt: skip
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_sandbox_worker.py")


def check(code) -> str | None:
    """None when the code may run, else the reference's message for the first rule it breaks.

    Raises ToolError for a missing or over-long snippet (the reference's pre-checks raise too).
    """
    if not isinstance(code, str) or not code.strip():
        raise ToolError("code must be a non-empty string")
    if len(code) > MAX_CODE:
        raise ToolError(f"code is too long; keep execute_code snippets under {MAX_CODE} characters")
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return f"SyntaxError: {e.msg} (line {e.lineno})"
    for node in ast.walk(tree):
        if type(node) in BANNED_NODES:
            return f"Unsupported code construct: {BANNED_NODES[type(node)]}"
        if isinstance(node, ast.Name) and (node.id in BANNED_NAMES or "__" in node.id):
            return f"Unsupported name in execute_code: {node.id}"
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            return f"Unsupported attribute access in execute_code: {node.attr}"
        if isinstance(node, ast.ImportFrom):
            if node.level:
                return "Unsupported relative import in execute_code"
            if any(a.name == "*" for a in node.names):
                return "Unsupported star import in execute_code"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in modules:
                if m.split(".")[0] not in ALLOWED_IMPORTS:
                    return f"Unsupported import module in execute_code: {m}"
    return None


def run(
    code: str,
    variables: dict,
    tools: list[str],
    call_tool: Callable[[str, dict], object],
    timeout: float = 30.0,
    memory_mb: int = 512,
) -> dict:
    """Run checked ``code`` in a worker. Returns {stdout, result, error}; ``call_tool(name, args)`` answers
    the worker's tool calls with a payload (or raises: the code sees the exception)."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    deadline, started, pending = time.monotonic() + STARTUP_LIMIT, False, bytearray()
    try:
        _send(proc, {"code": code, "variables": variables, "tools": tools, "memory_mb": memory_mb})
        while True:
            line = _read_line(proc.stdout.fileno(), pending, deadline)
            if line is None and not started:
                return _failure(f"TimeoutError: execute_code worker did not start within {STARTUP_LIMIT:g} s")
            if line is None:
                return _failure(f"TimeoutError: execute_code stopped after {timeout:g} s (time limit)")
            if not line:
                proc.wait(timeout=5)
                return _failure(
                    f"MemoryError: execute_code worker stopped (exit code {proc.returncode}); "
                    f"the memory limit is {memory_mb} MB"
                )
            msg = json.loads(line)
            if "ready" in msg:
                deadline, started = time.monotonic() + timeout, True
                continue
            if "done" in msg:
                return msg["done"]
            try:
                reply = {"ok": call_tool(msg["call"], msg["args"])}
            except Exception as e:  # the code sees the tool's error as an exception
                reply = {"error": f"{type(e).__name__}: {e}"}
            _send(proc, reply)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            f.close()


def _read_line(fd: int, pending: bytearray, deadline: float) -> bytes | None:
    """The worker's next line from its raw pipe (b"" once it has exited), or None at the deadline.

    Raw reads, because a buffered reader may already hold the next line (the worker writes "ready" and its
    first tool call back to back), and select() on the pipe would then wait for data that has arrived.
    """
    while b"\n" not in pending:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b""
        pending += chunk
    end = pending.index(b"\n")
    line = bytes(pending[:end])
    del pending[: end + 1]
    return line


def _send(proc, msg: dict) -> None:
    try:
        proc.stdin.write((json.dumps(msg, default=str) + "\n").encode())
        proc.stdin.flush()
    except BrokenPipeError:
        pass  # the worker died; its exit is read next


def _failure(error: str) -> dict:
    return {"stdout": "", "result": None, "error": error}


def render(out: dict) -> str:
    """The reference's text for a result {stdout, result, error}."""
    parts = ["## Code Execution Result"]
    cut = lambda s, n: s if len(s) <= n else s[:n] + "\n... (truncated)"
    if out.get("stdout"):
        parts += ["### Output", "```", cut(out["stdout"], MAX_STDOUT), "```"]
    if out.get("result") is not None:
        r = out["result"]
        shown = r if isinstance(r, str) else json.dumps(r, ensure_ascii=False, indent=2, default=str)
        parts += ["### Return Value", "```", cut(shown, MAX_RESULT), "```"]
    if out.get("error"):
        parts += ["### Error", "```", out["error"], "```"]
    if len(parts) == 1:
        parts.append("(No output)")
    return "\n".join(parts)

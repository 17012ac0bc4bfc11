"""The ``execute_code`` worker: a stdlib-only script run as ``python -I -S _sandbox_worker.py``.

Protocol, one JSON object per line: the parent sends {code, variables, tools, memory_mb}; the worker answers
{"ready": true} once its imports and limits are set (the parent's time limit starts there); it asks
{"call": name, "args": {...}} for every read-tool call and gets {"ok": payload} or {"error": text}; it
ends with {"done": {stdout, result, error}}. It never imports rbjax.
"""

import builtins
import collections
import datetime
import io
import json
import math
import resource
import sys

SAFE_BUILTINS = (
    "abs all any bool dict enumerate filter float int isinstance len list map max min print range round set "
    "sorted str sum tuple zip reversed"
).split()
ALLOWED_IMPORTS = (
    "collections",
    "datetime",
    "decimal",
    "functools",
    "itertools",
    "json",
    "math",
    "operator",
    "statistics",
)
PROTOCOL_IN, PROTOCOL_OUT = sys.stdin, sys.stdout


class ToolCallError(Exception):
    pass


def send(msg):
    PROTOCOL_OUT.write(json.dumps(msg, default=str) + "\n")
    PROTOCOL_OUT.flush()


def tool(name):
    def call(**kwargs):
        send({"call": name, "args": kwargs})
        reply = json.loads(PROTOCOL_IN.readline())
        if "error" in reply:
            raise ToolCallError(reply["error"])
        return reply["ok"]

    call.__name__ = name
    return call


def safe_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level or name.split(".")[0] not in ALLOWED_IMPORTS:
        raise ImportError(f"Unsupported import module in execute_code: {name}")
    return builtins.__import__(name, globals, locals, fromlist, level)


def json_safe(x):
    try:
        return json.loads(json.dumps(x, default=str))
    except (TypeError, ValueError):
        return str(x)


def main():
    request = json.loads(PROTOCOL_IN.readline())
    for modname in ALLOWED_IMPORTS:  # imported before the limit, so a low limit still lets them load
        __import__(modname)
    limit = request["memory_mb"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    allowed = {k: getattr(builtins, k) for k in SAFE_BUILTINS}
    allowed["__import__"] = safe_import
    namespace = {
        "__builtins__": allowed,
        "json": json,
        "math": math,
        "datetime": datetime,
        "date": datetime.date,
        "timedelta": datetime.timedelta,
        "defaultdict": collections.defaultdict,
        **request["variables"],
        **{name: tool(name) for name in request["tools"]},
    }
    stdout = io.StringIO()
    send({"ready": True})
    sys.stdout = stdout
    result, error = None, None
    try:
        code = request["code"]
        try:
            compiled = compile(code, "<execute_code>", "eval")
        except SyntaxError:
            exec(compile(code, "<execute_code>", "exec"), namespace)
            result = namespace.get("result", namespace.get("output"))
        else:
            result = eval(compiled, namespace)
    except MemoryError:
        error = f"MemoryError: the code exceeded the memory limit of {request['memory_mb']} MB"
    except BaseException as e:  # the code's own error is the call's error, as in the reference
        error = f"{type(e).__name__}: {e}"
    sys.stdout = PROTOCOL_OUT
    send({"done": {"stdout": stdout.getvalue(), "result": json_safe(result), "error": error}})


if __name__ == "__main__":
    main()

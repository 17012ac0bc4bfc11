"""execute_code as a hostile model would use it: every attack below must fail.

The snippets go straight to ``sandbox.run`` (the AST rules are skipped: the containment must not depend on
them), except where the store's own path is the point. Each names the class of escape it stands for.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import pytest
from agent_store import make_store

from rbjax.agents import sandbox, seccomp

pytestmark = pytest.mark.skipif(seccomp.unavailable() is not None, reason="execute_code needs seccomp")

KEY = "sk-test-do-not-leak-0123456789"
MODULES = (
    "M = json.codecs.sys.modules\nos = M['os']\nopen_ = M['builtins'].open\nErr = M['builtins'].OSError\n"
)


@pytest.fixture(autouse=True)
def secret(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def run(code: str, tools=("view_notes",), calls=None, **limits) -> dict:
    """The worker's answer; ``calls`` collects the calls the parent answered."""
    answered = [] if calls is None else calls
    answer = lambda name, args: answered.append((name, args)) or {"notes": []}
    return sandbox.run(code, {"funds": 1.0}, list(tools), answer, **{"timeout": 10.0, **limits})


def refused(out: dict) -> bool:
    return out["error"] is not None and "Operation not permitted" in out["error"]


def test_ordinary_code_runs_inside_the_filter():
    code = (
        "import statistics, decimal, functools, itertools, operator, collections\n"
        "result = [statistics.stdev([1.0, 2, 4]), str(decimal.Decimal('1.1') * 3),\n"
        "  datetime.datetime.strptime('1991-09-07', '%Y-%m-%d').isoformat(), date.today().year > 2000,\n"
        "  collections.Counter('abca').most_common(1), functools.reduce(operator.add, range(10)),\n"
        "  list(itertools.accumulate([1, 2])), statistics.NormalDist(0, 1).inv_cdf(0.5), view_notes()]\n"
        "print(funds)"
    )
    out = run(code)
    assert out["error"] is None, out["error"]
    expected = [1.5275252316519468, "3.3", "1991-09-07T00:00:00", True, [["a", 2]], 45, [1, 3], 0.0]
    assert out["result"] == expected + [{"notes": []}]
    assert out["stdout"] == "1.0\n"


def test_the_key_is_not_in_the_worker_environment():
    out = run(MODULES + "result = dict(os.environ)")
    assert out["error"] is None and KEY not in str(out["result"]) and "OPENAI_API_KEY" not in out["result"]


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "/proc/self/environ", "/proc/{ppid}/environ", "/proc/{ppid}/cmdline"],
)
def test_no_file_can_be_read(path):
    import os

    out = run(MODULES + f"result = open_({path.format(ppid=os.getpid())!r}).read()")
    assert refused(out) and KEY not in str(out)


def test_no_file_can_be_written_anywhere(tmp_path):
    targets = [tmp_path / "checkpoint.pkl", tmp_path / "sub"]
    code = MODULES + (
        f"try:\n    open_({str(targets[0])!r}, 'wb').write(b'x')\nexcept Err as e:\n    print(e)\n"
        f"try:\n    os.mkdir({str(targets[1])!r})\nexcept Err as e:\n    print(e)\n"
        "open_('here.txt', 'w').write('x')"  # the scratch folder is not writable either
    )
    out = run(code)
    assert refused(out) and out["stdout"].count("Operation not permitted") == 2
    assert not any(t.exists() for t in targets)


@pytest.mark.parametrize(
    "code",
    [
        "result = os.fork()",
        "result = os.system('echo escaped')",
        "result = os.popen('echo escaped').read()",
        "result = os.posix_spawn('/bin/sh', ['sh', '-c', 'echo escaped'], {})",
        "result = os.execv('/bin/sh', ['sh'])",
        "result = M['_thread'].start_new_thread(print, ('escaped',))",
    ],
)
def test_no_process_or_thread_can_be_started(code):
    out = run(MODULES + code)
    assert "escaped" not in str(out["result"]) + out["stdout"]
    assert out["result"] in (None, 127 << 8)  # os.system reports its shell's failure to start as 127
    assert out["error"] is None or "Operation not permitted" in out["error"] or "Error" in out["error"]


def test_no_socket_reaches_a_local_server():
    """The worker cannot load a socket module (next test); here the filter itself is put to the test, in a
    process that loaded ``socket`` before it contained itself as the worker does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    script = (
        "import runpy, socket, sys\n"
        f"worker = runpy.run_path({sandbox.WORKER!r})\n"
        f"worker['contain'](256, 10, bytes.fromhex({seccomp.program().hex()!r}))\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=1)\n"
        "    print('connected')\n"
        "except OSError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60)
    try:
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    assert "Operation not permitted" in out.stdout, out.stdout + out.stderr


def test_modules_that_would_open_a_way_out_cannot_load():
    for module in ("subprocess", "ctypes", "socket", "shutil"):
        out = run(f"M = json.codecs.sys.modules\nresult = M['builtins'].__import__({module!r}).__name__")
        assert out["result"] is None and out["error"], module


def test_no_signal_reaches_the_parent():
    out = run(MODULES + "os.kill(os.getppid(), 9)")
    assert refused(out)


def test_the_parent_answers_only_the_tools_it_forwards():
    calls = []
    code = (
        "import operator\n"
        "worker = operator.attrgetter('__globals__')(view_notes)\n"  # the stub's own module
        "answers = []\n"
        "for name in ['place_order', 'modify_sku_price', 'set_shelf_skus', 'add_note', 'execute_code']:\n"
        "    try:\n"
        "        worker['tool'](name)(code='x', items=[], content='x')\n"
        "    except worker['ToolCallError'] as e:\n"
        "        answers.append(str(e))\n"
        "result = answers"
    )
    out = run(code, calls=calls)
    assert calls == [] and len(out["result"]) == 5
    assert all("cannot be called from execute_code" in a for a in out["result"])


def test_a_forged_message_is_refused_not_trusted():
    code = (
        "import operator\nsend = operator.attrgetter('__globals__')(view_notes)['send']\n"
        "send({'call': 'view_notes', 'args': 'not an object'})\n"
        "result = 1"
    )
    assert run(code)["error"] is None  # the answer was an error the forged call never read
    flood = "import operator\nout = operator.attrgetter('__globals__')(view_notes)['PROTOCOL_OUT']\n"
    out = run(flood + "out.write('x' * (6 * 2 ** 20))\nout.flush()")
    assert out["error"].startswith("OutputLimitError")


def test_huge_output_is_capped_before_it_reaches_the_store():
    out = run("print('x' * 40_000_000)\nresult = 'y' * 40_000_000")
    assert len(out["stdout"]) <= sandbox.MAX_STDOUT + len(sandbox.TRUNCATED)
    assert len(out["result"]) <= sandbox.MAX_RESULT + len(sandbox.TRUNCATED)
    assert out["stdout"].endswith(sandbox.TRUNCATED)


def test_the_store_path_keeps_the_trace_small_and_the_store_intact(env, tmp_path):
    from rbjax.agents.trace import TraceWriter

    store = make_store(env)
    store.trace = TraceWriter(str(tmp_path / "tool_calls.jsonl"))
    notes = list(store.ledger.notes)
    code = (
        "import operator\nhelper = operator.attrgetter('__globals__')(view_notes)['tool']\n"
        "print('x' * 40_000_000)\n"
        "helper('add_note')(content='planted')"
    )
    res = store.call("execute_code", {"code": code})
    store.trace.flush()
    assert not res.ok and "add_note cannot be called from execute_code" in res.text
    assert store.ledger.notes == notes and not store.draft.orders
    assert (tmp_path / "tool_calls.jsonl").stat().st_size < 50_000


def test_a_long_snippet_does_not_hold_up_the_other_stores(env):
    store = make_store(env)
    store.code_timeout = 1.5

    async def main():
        ticks = 0

        async def other_store():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticker = asyncio.create_task(other_store())
        res = await store.call_async("execute_code", {"code": "while True:\n    pass"})
        ticker.cancel()
        return res, ticks

    start = time.perf_counter()
    res, ticks = asyncio.run(main())
    assert res.payload["error"].startswith("TimeoutError") and time.perf_counter() - start >= 1.5
    assert ticks >= 20  # the event loop went on serving (1.5 s at one tick per 20 ms, with room)


def test_the_filter_refuses_another_architecture():
    assert seccomp.program("x86_64") != seccomp.program("aarch64")
    rows = len(seccomp.program()) // 8
    assert rows == 4 + len(set(seccomp.allowed().values())) + 2
    assert not {"open", "openat", "socket", "clone", "fork", "execve", "kill"} & set(seccomp.allowed())

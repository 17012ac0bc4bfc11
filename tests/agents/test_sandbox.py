"""execute_code as a hostile model would use it: every attack below must fail.

The snippets go straight to ``sandbox.run`` (the AST rules are skipped: the containment must not depend on
them), except where the store's own path is the point. Each names the class of escape it stands for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from agent_store import make_store

from rbjax.agents.sandbox import parent as sandbox
from rbjax.agents.sandbox import seccomp

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
    "code, refusal",
    [
        ("result = os.fork()", "PermissionError: [Errno 1] Operation not permitted"),
        ("result = os.system('echo escaped')", None),  # no error: the shell's failure to start is its status
        ("result = os.popen('echo escaped').read()", "PermissionError: [Errno 1] Operation not permitted"),
        (
            "result = os.posix_spawn('/bin/sh', ['sh', '-c', 'echo escaped'], {})",
            "PermissionError: [Errno 1] Operation not permitted",
        ),
        ("result = os.execv('/bin/sh', ['sh'])", "PermissionError: [Errno 1] Operation not permitted"),
        (
            "result = M['_thread'].start_new_thread(print, ('escaped',))",
            "RuntimeError: can't start new thread",
        ),
    ],
)
def test_no_process_or_thread_can_be_started(code, refusal):
    """Each attempt is refused on the spot: an exec that worked would turn the worker into a shell that waits
    on the protocol pipe (a TimeoutError) or dies (a stopped worker), and neither is a refusal."""
    out = run(MODULES + code)
    assert "escaped" not in str(out["result"]) + out["stdout"]
    assert not (out["error"] or "").startswith(("TimeoutError", "MemoryError")), out["error"]
    if refusal is None:  # os.system reports its shell's failure to start as exit status 127
        assert out["result"] == 127 << 8 and out["error"] is None, out
    else:
        assert out["result"] is None and out["error"].startswith(refusal), out["error"]


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
        assert out["result"] is None, module
        assert refused(out) and out["error"].startswith(("ImportError", "PermissionError")), out["error"]


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
    """The worker's own ``send`` forges calls the stub would never make; the parent answers each with an error
    (read back here) and calls no tool."""
    calls = []
    code = (
        "import operator\nworker = operator.attrgetter('__globals__')(view_notes)\nresult = []\n"
        "for msg in [{'call': 'view_notes', 'args': 'not an object'}, {'call': 'view_notes', 'args': [1]},\n"
        "            {'call': 'view_notes'}, {'call': ['view_notes'], 'args': {}}, {'args': {}}]:\n"
        "    worker['send'](msg)\n"
        "    result.append(json.loads(worker['PROTOCOL_IN'].readline()))\n"
        "result.append(view_notes())"  # a well-formed call still works afterwards
    )
    out = run(code, calls=calls)
    assert out["error"] is None, out["error"]
    assert out["result"][:3] == [{"error": "TypeError: view_notes() arguments must be an object"}] * 3
    assert out["result"][3] == {"error": "ToolError: ['view_notes'] cannot be called from execute_code"}
    assert out["result"][4] == {"error": "ToolError: None cannot be called from execute_code"}
    assert out["result"][5] == {"notes": []} and calls == [("view_notes", {})]
    out = run("import operator\noperator.attrgetter('__globals__')(view_notes)['send'](['view_notes'])")
    assert out["error"] == "OutputLimitError: execute_code stopped: not an object"
    flood = "import operator\nout = operator.attrgetter('__globals__')(view_notes)['PROTOCOL_OUT']\n"
    out = run(flood + "out.write('x' * (6 * 2 ** 20))\nout.flush()")
    assert out["error"].startswith("OutputLimitError")


def _stat(pid: int) -> list:
    """Fields 3 on of /proc/<pid>/stat, as ints where they are: state, ppid, pgrp, ..."""
    with open(f"/proc/{pid}/stat") as f:
        return [int(x) if x.lstrip("-").isdigit() else x for x in f.read().rsplit(")", 1)[1].split()]


def _group_alive(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not exited (zombies, which only wait to be reaped, excluded)."""
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                state, _, group = _stat(int(entry))[:3]
            except (OSError, IndexError):
                continue
            if group == pgid and state != "Z":
                alive.append(int(entry))
    return alive


def test_the_scratch_folder_is_the_working_directory_and_is_removed(monkeypatch):
    made = []

    def mkdtemp(**kwargs):
        path = tempfile_mkdtemp(**kwargs)
        made.append((path, os.stat(path).st_ino))
        return path

    tempfile_mkdtemp = sandbox.tempfile.mkdtemp
    monkeypatch.setattr(sandbox.tempfile, "mkdtemp", mkdtemp)
    out = run(MODULES + "result = os.stat('.').st_ino")
    assert out["error"] is None and len(made) == 1 and out["result"] == made[0][1]
    assert not os.path.exists(made[0][0])
    out = run("while True:\n    pass", timeout=0.5)  # a timeout removes it too
    assert out["error"].startswith("TimeoutError") and len(made) == 2 and not os.path.exists(made[1][0])


def test_the_worker_process_group_is_killed_as_a_whole(monkeypatch, tmp_path):
    """The filter leaves the code no way to start a process, so the group's other member is started the only
    way left: by the worker's own command line, before Python starts (a shell that puts a ``sleep`` in the
    background and execs the worker, keeping its pid and group). After a timeout both are gone."""
    popen, pidfile = subprocess.Popen, tmp_path / "sleep.pid"

    def with_a_sibling(args, **kwargs):
        script = f'/bin/sleep 60 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}; exec "$@"'
        return popen(["/bin/sh", "-c", script, "sh", *args], **kwargs)

    monkeypatch.setattr(sandbox.subprocess, "Popen", with_a_sibling)
    seen = {}

    def answer(name, args):  # while the worker runs: its pid, and the group of each
        seen.update(worker=args["pid"], sibling=int(pidfile.read_text()))
        seen.update({f"{k}_group": _stat(seen[k])[2] for k in ("worker", "sibling")})
        return {"notes": []}

    code = MODULES + "view_notes(pid=os.getpid())\nwhile True:\n    pass"
    try:
        out = sandbox.run(code, {}, ["view_notes"], answer, timeout=1.0)
        monkeypatch.undo()
        assert out["error"] == "TimeoutError: execute_code stopped after 1 s (time limit)"
        group = seen["worker"]  # a group of its own, led by the worker, with the sibling in it
        assert seen["worker_group"] == seen["sibling_group"] == group != os.getpgrp()
        deadline = time.monotonic() + 10
        while _group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _group_alive(group) == []
    finally:
        with contextlib.suppress(ProcessLookupError, ValueError, FileNotFoundError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_the_worker_dies_with_its_parent():
    """PR_SET_PDEATHSIG: a parent killed outright (no ``finally`` runs, nothing kills the group) takes its
    worker with it, instead of leaving it to spin until its CPU limit."""
    code = MODULES + "view_notes(pid=os.getpid())\nwhile True:\n    pass"
    script = (
        "from rbjax.agents.sandbox import parent as sandbox\n"
        "def answer(name, args):\n"
        "    print(args['pid'], flush=True)\n"
        "    return {'notes': []}\n"
        f"sandbox.run({code!r}, {{}}, ['view_notes'], answer, timeout=60.0)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(parent.stdout.readline())
        assert _stat(worker)[0] != "Z"  # running
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(worker)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if worker is not None and _running(worker):
            os.kill(worker, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        return _stat(pid)[0] != "Z"
    except (OSError, IndexError):
        return False


def test_huge_output_is_capped_before_it_reaches_the_store():
    out = run("print('x' * 40_000_000)\nresult = 'y' * 40_000_000")
    assert len(out["stdout"]) <= sandbox.MAX_STDOUT + len(sandbox.TRUNCATED)
    assert len(out["result"]) <= sandbox.MAX_RESULT + len(sandbox.TRUNCATED)
    assert out["stdout"].endswith(sandbox.TRUNCATED)


def test_the_store_path_keeps_the_trace_small_and_the_store_intact(env, tmp_path):
    from rbjax.agents.tools.trace import TraceWriter

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

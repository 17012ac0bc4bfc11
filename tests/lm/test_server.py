"""rbjax.lm.http: the JSON-over-HTTP face of a SessionPool, served from a thread on a free local port."""

import asyncio
import json
import shutil
import socket
import threading
import time

import pytest

from rbjax.lm.http import Client, ServerError, serve

# a slices run, its tasks and the engine's programs, as the other files of tests/lm/ that play sessions (the quick
# lane keeps the transport's own tests: test_server_robustness.py, over a stand-in pool)
pytestmark = pytest.mark.slow

SLOTS = 16  # one engine batch for every test of the file, the agents' tests' size (batch_bucket: 16)


@pytest.fixture(scope="module")
def server(tasks_file):
    box, ready = {}, threading.Event()

    def on_ready(s):
        box["server"] = s
        ready.set()

    def run():
        try:
            asyncio.run(serve(str(tasks_file), port=0, slots=SLOTS, idle_timeout=600.0, ready=on_ready))
        except BaseException as e:  # seen by the fixture instead of hanging it
            box["error"] = e
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(300), "the server did not start"
    assert "error" not in box, box.get("error")
    yield box["server"]
    box["server"].stop()
    thread.join(30)


@pytest.fixture
def client(server):
    with Client(server.url) as c:
        yield c


def wait_free(client, free, timeout=5.0):
    end = time.monotonic() + timeout
    while client.health()["free"] != free and time.monotonic() < end:
        time.sleep(0.05)
    return client.health()


def play(client, session, days_cap=10):
    """The same calls every time: two views, an order line, end_today until the episode is over."""
    texts = [client.call(session, "view_inventory")["text"]]
    texts.append(client.call(session, "view_funds_and_date")["text"])
    for _ in range(days_cap):
        r = client.call(session, "end_today")
        texts.append(r["text"])
        if r["done"]:
            return r, texts
    raise AssertionError("the episode did not end")


def test_sessions_on_two_tasks_repeat_exactly(server, client, tasks_file):
    ids = client.tasks()
    assert len(ids) == 2 and len(client.tools()) == 21
    a1, a2, b = client.open(ids[0]), client.open(ids[0]), client.open(ids[1])
    assert len(a1["tools"]) == 21 and "end_today" in a1["tools"]
    assert a1["morning"] == a2["morning"] and a1["morning"] != b["morning"]
    assert a1["info"]["task"] == ids[0] and b["info"]["task"] == ids[1] and not a1["info"]["done"]
    results = {k: play(client, s) for k, s in (("a1", a1), ("a2", a2), ("b", b))}
    (ra1, ta1), (ra2, ta2), (rb, _) = results["a1"], results["a2"], results["b"]
    assert ra1["done"] and ra1["reward"] is not None and rb["reward"] is not None
    assert ra1["reward"] == ra2["reward"] and ra1["info"]["daily"] == ra2["info"]["daily"] and ta1 == ta2
    for r in (ra1, rb):  # each decided day's credit, summing to the (relative) reward
        credits = r["info"]["turn_rewards"]
        assert len(credits) == len(r["info"]["daily"])
        assert sum(credits) == pytest.approx(r["reward"], rel=1e-9, abs=1e-12)
    assert rb["info"]["task"] == ids[1] and rb["info"]["daily"] != ra1["info"]["daily"]
    assert client.info(a1) == ra1["info"]
    # a task row is as good as its id; finish plays the remaining days with no new decisions
    row = json.loads(tasks_file.read_text().splitlines()[0])
    c = client.open(row, session_id="by-row")
    assert c["session"] == "by-row" and c["morning"] == a1["morning"]
    info = client.finish(c)
    assert info["done"] and info["decided_days"] == 0 and info["reward"] is not None
    for s in (a1, a2, b, c):
        client.close(s)
    assert client.health()["open"] == 0


def test_errors_are_statuses_and_tool_errors_are_text(server, client):
    ids = client.tasks()
    s = client.open(ids[1])
    # a tool's failure is its text, not an HTTP error
    r = client.call(s, "no_such_tool", {})
    assert "Unknown tool" in r["text"] and not r["done"]
    r = client.call(s, "place_order", {"items": "lots", "supplier_id": 12345})
    assert r["text"].startswith("Error") and not r["done"]
    r = client.call(s, "view_inventory", ["not", "an", "object"])
    assert r["text"].startswith("Error")

    def status(method, path, body=None, raw=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        client.conn.request(method, path, body=data)
        resp = client.conn.getresponse()
        payload = json.loads(resp.read())
        assert set(payload) == {"error"} or resp.status == 200
        return resp.status

    assert status("POST", "/sessions/nope/call", {"tool": "view_inventory"}) == 404
    assert status("GET", "/sessions/nope") == 404 and status("DELETE", "/sessions/nope") == 404
    assert status("GET", "/no/such/route") == 404 and status("PUT", "/sessions") == 404
    assert status("POST", "/sessions", raw=b"{not json") == 400
    assert status("POST", "/sessions", raw=b"[1, 2]") == 400
    assert status("POST", "/sessions", {"task": "no-such-task"}) == 400
    assert status("POST", "/sessions", {"task": {"id": "x"}}) == 400
    assert status("POST", "/sessions", {"task": ids[0], "session_id": "bad id/"}) == 400
    assert status("POST", "/sessions", {"task": ids[0], "session_id": s["session"]}) == 409
    assert status("POST", f"/sessions/{s['session']}/call", {"args": {}}) == 400
    with pytest.raises(ServerError) as e:
        client.call("nope", "view_inventory")
    assert e.value.status == 404 and "nope" in e.value.error
    info = client.finish(s)
    assert info["done"]
    with pytest.raises(ServerError) as e:
        client.call(s, "view_inventory")
    assert e.value.status == 409 and "finished" in e.value.error
    with pytest.raises(ServerError) as e:
        client.call(s, "end_today")
    assert e.value.status == 409
    assert client.info(s)["done"]  # a finished session still answers until closed
    client.close(s)
    assert client.health()["open"] == 0


def foreign_rows(row: dict, slices_dir, tmp_path) -> dict:
    """Rows with the id of a served task and one field changed: the folder (a copy of the slices folder without
    its tool history, and a folder that does not exist), the reference gain, the scale."""
    copy = tmp_path / "foreign"
    shutil.copytree(slices_dir, copy, ignore=shutil.ignore_patterns("tools_day_*"))
    assert not list(copy.glob("tools_day_*")) and list(copy.glob("day_*"))
    return {
        "from_states": {**row, "from_states": str(copy)},
        "absent folder": {**row, "from_states": str(tmp_path / "nowhere")},
        "reference_gain": {**row, "reference_gain": row["reference_gain"] + 1000.0},
        "scale": {**row, "scale": row["scale"] / 2},
    }


def test_only_served_tasks_open_and_with_the_servers_own_task(
    server, client, tasks_file, slices_dir, tmp_path
):
    rows = [json.loads(line) for line in tasks_file.read_text().splitlines()]
    row = rows[0]
    served = server.tasks[row["id"]]
    # a served id, the served row unchanged (a dataset's extra columns ignored): the server's own Task object
    for spec in (row["id"], row, {**row, "split": "train"}):
        s = client.open(spec)
        assert server.pool.sessions[s["session"]].task is served
        client.close(s)
    refused = foreign_rows(row, slices_dir, tmp_path)
    said = {"from_states": "from_states", "absent folder": "from_states", "reference_gain": "reference_gain"}
    said.update(scale="in scale", unknown="not a served task")
    for what, bad in [*refused.items(), ("unknown", {**row, "id": "no-such-task"})]:
        with pytest.raises(ServerError) as e:
            client.open(bad)
        assert e.value.status == 400 and "\n" not in e.value.error, (what, e.value.error)
        assert said[what] in e.value.error, (what, e.value.error)
    for bad in ("no-such-task", 7, ["a"], {"id": row["id"]}, {**row, "days": "two"}):
        with pytest.raises(ServerError) as e:
            client.open(bad)
        assert e.value.status == 400 and "\n" not in e.value.error
    assert not (tmp_path / "nowhere").exists()
    assert not list((tmp_path / "foreign").glob("tools_day_*")), "a foreign folder's history was made"
    assert all(key[0] == served.from_states for key in server.pool.starts), "a foreign folder was opened"
    assert client.health()["open"] == 0


def test_closing_a_connection_closes_its_sessions(server, client):
    ids = client.tasks()
    other = Client(server.url)
    opened = [other.open(ids[i % 2]) for i in range(3)]
    kept = other.open(ids[0], keep=True)
    other.call(opened[0], "view_inventory")
    assert client.health()["free"] == SLOTS - 4
    other.disconnect()
    health = wait_free(client, SLOTS - 1)
    assert health["free"] == SLOTS - 1 and health["open"] == 1
    for s in opened:
        with pytest.raises(ServerError) as e:
            client.info(s)
        assert e.value.status == 404
    assert client.info(kept)["session"] == kept["session"]  # "keep": another connection takes it over
    client.close(kept)
    assert client.health()["free"] == SLOTS


def test_concurrent_sessions_share_one_step_a_day(server, client):
    ids, n = client.tasks(), SLOTS
    before = server.pool.scheduler.flushes
    barrier, results, errors = threading.Barrier(n), [None] * n, []

    def agent(i):
        try:
            with Client(server.url) as c:
                s = c.open(ids[i % 2])
                barrier.wait(60)
                c.call(s, "view_funds_and_date")
                while not (r := c.call(s, "end_today"))["done"]:
                    pass
                results[i] = r
        except Exception as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    days = len(results[0]["info"]["daily"])
    flushes = server.pool.scheduler.flushes - before
    assert days >= 2 and flushes < n * days, (flushes, n, days)
    assert flushes <= 4 * days  # in practice one step a day for all the stores
    by_task = {}
    for r in results:
        by_task.setdefault(r["info"]["task"], set()).add(r["reward"])
    assert all(len(v) == 1 for v in by_task.values()), by_task  # same task, same calls: same reward
    assert wait_free(client, SLOTS)["free"] == SLOTS  # each agent's connection closed its session
    # every slot taken: 503, and the server goes on
    held = Client(server.url)
    for _ in range(SLOTS):
        held.open(ids[0])
    with pytest.raises(ServerError) as e:
        client.open(ids[0])
    assert e.value.status == 503
    held.disconnect()
    assert wait_free(client, SLOTS)["free"] == SLOTS


def test_garbage_never_stops_the_server(server, client):
    host, port = server.url.rsplit("/", 1)[1].split(":")
    for junk in (
        b"\x00\xff\x13garbage\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: nope\r\n\r\n",
        b"POST /sessions HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
        b"POST /sessions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"A" * 200_000,
        b"POST /sessions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{",  # then the client hangs up
    ):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            answer = b""
            try:  # the server may answer and hang up before reading everything (a reset here)
                sock.sendall(junk)
                sock.shutdown(socket.SHUT_WR)
                while chunk := sock.recv(65536):
                    answer += chunk
            except OSError:
                pass
        assert answer == b"" or answer.startswith(b"HTTP/1.1 400"), answer[:100]
    assert client.health()["open"] == 0
    s = client.open(client.tasks()[0])
    assert not client.call(s, "view_funds_and_date")["done"]
    client.close(s)


def test_serve_command_passes_its_flags_to_the_server(tmp_path, monkeypatch, capsys):
    """``rbjax lm serve``: the flags reach ``serve`` (the reward kind as the pool's option); a bad kind is a
    one-line error before anything is served."""
    from rbjax.cli import main
    from rbjax.lm.http import server as server_module

    seen = []

    async def serve(tasks_path, host, port, slots, idle_timeout, ready=None, **pool_options):
        seen.append((tasks_path, port, slots, idle_timeout, pool_options))

    monkeypatch.setattr(server_module, "serve", serve)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("{}\n")
    line = ["lm", "serve", "--tasks", str(tasks), "--slots", "4", "--port", "0"]
    for flags, reward in (([], "relative"), (["--reward", "gain"], "gain"), (["--reward", "beat"], "beat")):
        main([*line, *flags])
        assert seen.pop() == (str(tasks), 0, 4, 600.0, {"reward": reward})
    main([*line, "--no-turn-rewards"])
    assert seen.pop() == (str(tasks), 0, 4, 600.0, {"reward": "relative", "credit": False})
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*line, "--reward", "nope"])
    err = capsys.readouterr().err.strip()
    assert "--reward" in err and "relative" in err and "\n" not in err and not seen

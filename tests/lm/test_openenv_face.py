"""rbjax.lm.faces.openenv_env: the OpenEnv app under uvicorn, driven by OpenEnv's own clients (skipped without
OpenEnv: ``pip install 'rbjax[openenv]'``)."""

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from test_server import foreign_rows

pytest.importorskip("openenv")
uvicorn = pytest.importorskip("uvicorn")

SLOTS = 8


@pytest.fixture(scope="module")
def app(tasks_file):
    from rbjax.lm.faces.openenv_env import make_app

    # max_wait 1 s: two clients on one loop park within it even on a busy host, so each day is one step
    return make_app(str(tasks_file), slots=SLOTS, idle_timeout=600, max_wait=1.0)


@pytest.fixture(scope="module")
def url(app):
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + 120
    while not server.started and thread.is_alive() and time.monotonic() < end:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    yield f"http://{host}:{port}"
    server.should_exit = True
    thread.join(30)


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=30) as r:
        return json.load(r)


def wait_free(url, free, timeout=5.0):
    end = time.monotonic() + timeout
    while get(url, "/rbjax/health")["free"] != free and time.monotonic() < end:
        time.sleep(0.05)
    return get(url, "/rbjax/health")


def test_two_mcp_sessions_are_isolated_and_share_steps(app, url):
    from openenv.core.mcp_client import MCPToolClient

    from rbjax.agents.tools.specs import TOOL_SPECS, describe

    ids = get(url, "/rbjax/tasks")
    both_open = asyncio.Event()
    opened = []

    async def episode(task):
        async with MCPToolClient(base_url=url) as c:
            r = await c.reset(task=task)
            opened.append(r.observation.session)
            if len(opened) == 2:
                both_open.set()
            await asyncio.wait_for(both_open.wait(), 60)
            assert get(url, "/rbjax/health")["open"] == 2
            listed = {t.name: t.description for t in await c.list_tools()}
            assert listed == {s["name"]: describe(s) for s in TOOL_SPECS}  # the descriptions of every face
            funds = await c.call_tool("view_funds_and_date")
            # an unknown tool is a JSON-RPC error, which MCPToolClient raises; no tool text
            with pytest.raises(RuntimeError, match="Unknown tool: 'no_such_tool'"):
                await c.call_tool("no_such_tool")
            bad = await c.call_tool("place_order", items="lots", supplier_id=3)
            assert bad["text"].startswith("Error") and not bad["done"]  # a tool's error, not a failure
            days = 0
            while not (out := await c.call_tool("end_today"))["done"]:
                days += 1
                assert out["reward"] is None and out["turn_rewards"] is None
            # each decided day's credit, once the episode is over: they sum to the (relative) reward
            assert len(out["turn_rewards"]) == days + 1
            assert sum(out["turn_rewards"]) == pytest.approx(out["reward"], rel=1e-9, abs=1e-12)
            with pytest.raises(RuntimeError, match="finished"):
                await c.call_tool("view_inventory")
            return r.observation, funds, out, days

    async def main():
        return await asyncio.gather(episode(ids[0]), episode(ids[1]))

    before = get(url, "/rbjax/health")["flushes"]
    (obs0, funds0, end0, days0), (obs1, funds1, end1, days1) = asyncio.run(main())
    assert obs0.session != obs1.session and obs0.task == ids[0] and obs1.task == ids[1]
    assert obs0.text != obs1.text and funds0["text"] != funds1["text"]  # each its own store
    assert end0["reward"] is not None and end1["reward"] is not None and days0 == days1 >= 1
    # one step a day for both, the days of the reference's continuation included
    tail = app.state.rbjax.tasks[ids[0]].tail
    assert get(url, "/rbjax/health")["flushes"] - before == days0 + 1 + tail
    assert wait_free(url, SLOTS)["free"] == SLOTS  # leaving the client closed both sessions


def test_generic_client_reset_step_state(url, tasks_file):
    from openenv import GenericEnvClient

    row = json.loads(tasks_file.read_text().splitlines()[0])

    async def main():
        async with GenericEnvClient(base_url=url) as g:
            r = await g.reset(task=row)
            assert r.observation["task"] == row["id"] and "funds balance" in r.observation["text"]
            assert get(url, "/rbjax/health")["open"] == 1
            r = await g.step({"type": "call_tool", "tool_name": "view_inventory", "arguments": {}})
            # a step reward: 0.0 until the episode is over, then the whole of it (OpenEnv's validator asks a number)
            assert r.observation["error"] is None and not r.done and r.reward == 0.0
            r = await g.step({"type": "call_tool", "tool_name": "no_such_tool", "arguments": {}})
            assert (
                r.observation["error"]["error_type"] == "tool_not_found" and r.observation["result"] is None
            )
            state = await g.state()
            assert state["task"] == row["id"] and state["day"] == row["day"] and not state["done"]
            while not r.done:
                r = await g.step({"type": "call_tool", "tool_name": "end_today", "arguments": {}})
            assert r.reward is not None and r.observation["result"]["data"]["done"]
            credits = r.observation["result"]["data"]["turn_rewards"]
            assert len(credits) == row["days"] and sum(credits) == pytest.approx(
                r.reward, rel=1e-9, abs=1e-12
            )
            assert r.observation["metadata"]["turn_rewards"] == credits
            # a step after the end (an MCP error) reports no reward again: the steps' rewards sum to the episode's
            after = await g.step({"type": "call_tool", "tool_name": "view_inventory", "arguments": {}})
            assert after.done and after.reward == 0.0
            state = await g.state()
            assert (
                state["done"]
                and state["reward"] == r.reward
                and state["day"] == row["day"] + row["days"] + row["tail"]
            )
            # a second reset closes the first session of this client
            await g.reset(task=row["id"])
            assert get(url, "/rbjax/health")["open"] == 1
            # without a task, the served tasks in turn, in the file's order
            served = [json.loads(line)["id"] for line in tasks_file.read_text().splitlines()]
            opened = [(await g.reset()).observation["task"] for _ in range(len(served) + 1)]
            assert opened == [*served, served[0]]

    asyncio.run(main())
    assert wait_free(url, SLOTS)["free"] == SLOTS


def post(url, path, body):
    """(status, JSON answer) of a POST."""
    request = urllib.request.Request(
        url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_only_served_tasks_reset_with_the_servers_own_task(app, url, tasks_file, slices_dir, tmp_path):
    from openenv import GenericEnvClient

    row = json.loads(tasks_file.read_text().splitlines()[0])
    served = app.state.rbjax.tasks[row["id"]]
    said = {"from_states": "from_states", "absent folder": "from_states", "reference_gain": "reference_gain"}
    said.update(scale="in scale", unknown="not a served task")
    refused = [*foreign_rows(row, slices_dir, tmp_path).items(), ("unknown", {**row, "id": "no-such-task"})]

    async def main():
        async with GenericEnvClient(base_url=url) as g:
            for spec in (row["id"], row, {**row, "split": "train"}):  # an id, the row, the row with a column
                r = await g.reset(task=spec)
                assert app.state.rbjax.session_pool().sessions[r.observation["session"]].task is served
            for what, bad in refused:
                with pytest.raises(RuntimeError) as e:
                    await g.reset(task=bad)
                assert said[what] in str(e.value) and "\n" not in str(e.value), (what, e.value)
            for bad in ("no-such-task", 7, {"id": row["id"]}):  # no task at all: the tasks in turn
                with pytest.raises(RuntimeError, match="reset: "):
                    await g.reset(task=bad)
            r = await g.reset(task=row["id"])  # the connection still serves
            assert r.observation["task"] == row["id"]

    asyncio.run(main())
    for what, bad in refused:  # over HTTP: a 400 and one line
        status, answer = post(url, "/reset", {"task": bad})
        assert status == 400 and said[what] in answer["error"] and "\n" not in answer["error"], answer
    status, answer = post(url, "/reset", {"task": row})
    assert status == 200 and answer["observation"]["task"] == row["id"]
    assert not (tmp_path / "nowhere").exists()
    assert not list((tmp_path / "foreign").glob("tools_day_*")), "a foreign folder's history was made"
    assert all(key[0] == served.from_states for key in app.state.rbjax.session_pool().starts), (
        "a foreign folder was opened"
    )
    assert wait_free(url, SLOTS)["free"] == SLOTS


def test_demonstrations_replay_through_the_server_with_openenvs_client(url, tasks):
    """A planner's demonstrations (``rbjax lm demos``), each call made again through the OpenEnv server by
    OpenEnv's ``MCPToolClient``: every answer, the opening and the reward are the recorded ones; a row whose
    first price is changed is not."""
    from rbjax.lm.demos import demonstrate
    from rbjax.lm.replay_demos import replay_openenv

    rows = demonstrate(tasks, "plan")
    assert len({r["reward"] for r in rows}) == len(rows)
    report = replay_openenv(rows, url)
    assert [r["same"] for r in report] == [True] * len(rows), report
    tampered = json.loads(json.dumps(rows[0]))
    first = next(m for m in tampered["messages"] if m["role"] == "assistant")
    next(c for c in first["tool_calls"] if c["function"]["name"] == "modify_sku_price")["function"][
        "arguments"
    ]["new_price"] += 0.25
    (got,) = replay_openenv([tampered], url)
    assert not got["same"] and got["first_difference"] is not None
    assert wait_free(url, SLOTS)["free"] == SLOTS

"""The Inspect face (``rbjax.lm.faces.inspect_eval``, ``inspect eval rbjax/retail``) against models no one here
wrote where possible: Inspect's own OpenAI-compatible provider against a chat stub, and Inspect's ``mockllm``.

- a model that calls no tool, through ``inspect eval`` on the command line, scores every task exactly as
  ``rbjax agents run --tasks FILE --model policy:null`` does;
- a scripted model's tool calls (from ``inspect_ai.eval``) score exactly what a ``Session`` making the same
  calls scores; their texts and errors are the session's, calls after ``end_today`` are not run, and the log
  reads back with every tool call;
- a full episode's metrics equal ``rbjax agents run``'s for the same decisions (one stub model for both);
- a failed model call is the sample's error, never a score, and frees the store's slot.

Skipped where Inspect is not installed (``pip install 'rbjax[inspect]'``), except in its own CI environment
(``RBJAX_TEST_ENV=inspect``, ``.ci/run``), where a missing Inspect fails.
"""

import importlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TAIL, TASK_DAYS

if os.environ.get("RBJAX_TEST_ENV") == "inspect":
    importlib.import_module("inspect_ai")  # its own environment: a missing Inspect is a broken install
else:
    pytest.importorskip("inspect_ai")

from chat_stub import ChatStub, Status, Stream  # noqa: E402
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessageAssistant,
    ChatMessageTool,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.tool import ToolCall  # noqa: E402

from rbjax import programs  # noqa: E402
from rbjax.cli import main  # noqa: E402
from rbjax.lm.faces.inspect_eval import retail  # noqa: E402
from rbjax.lm.faces.inspect_pool import POOL_KIND  # noqa: E402
from rbjax.lm.pool import SessionPool  # noqa: E402

pytestmark = pytest.mark.slow  # a slices run, agent runs and Inspect evals

SLOTS = 16  # the engine's smallest batch: one compilation for the pools and the agent runs here
EPISODE = dict(stores=2, days=6, seed=3)


@pytest.fixture(scope="module")
def skus():
    from rbjax.agents.formats import Names
    from rbjax.env import make_env

    env, _ = make_env()
    return Names(env.catalog, env.config.num_suppliers).skus


@pytest.fixture(scope="module")
def null_table(tasks_file, tmp_path_factory):
    """tasks.csv of ``rbjax agents run --tasks FILE --model policy:null``."""
    out = tmp_path_factory.mktemp("null") / "out"
    agents_run("policy:null", out, "--tasks", str(tasks_file), "--progress", "0")
    return pd.read_csv(out / "tasks.csv")


def agents_run(model, out, *args):
    main(["--devices", "1", "agents", "run", "--model", model, "--out", str(out), *args])


def usage() -> ModelUsage:
    return ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)  # offline: no tiktoken count


def reply(*calls) -> ModelOutput:
    """A mock model's reply making ``calls`` ((name, arguments) pairs) in order."""
    message = ChatMessageAssistant(
        content="",
        tool_calls=[
            ToolCall(id=f"c{i}", function=name, arguments=args) for i, (name, args) in enumerate(calls)
        ],
        model="mockllm/model",
    )
    out = ModelOutput.from_message(message)
    out.usage = usage()
    return out


def tool_events(sample) -> list:
    return [e for e in sample.events if e.event == "tool"]


def test_a_model_without_tool_calls_scores_policy_null_on_the_command_line(
    tasks, tasks_file, null_table, tmp_path
):
    """``inspect eval rbjax/retail`` (the entry point) with Inspect's openai-api provider against a stub that
    never calls a tool: the runner ends every day after 5 invalid turns, so each task's reward is
    policy:null's, to the bit."""
    with ChatStub(lambda body, n: Stream("I will think about it tomorrow.")) as stub:
        inspect = Path(sys.executable).with_name("inspect")
        line = [
            str(inspect),
            "eval",
            "rbjax/retail",
            "-T",
            f"tasks={tasks_file}",
            "-T",
            f"slots={SLOTS}",
            "--model",
            "openai-api/stub/stub-model",
            "--model-base-url",
            stub.url,
            "--log-dir",
            str(tmp_path / "logs"),
            "--max-retries",
            "0",
            "--display",
            "none",
        ]
        run = subprocess.run(line, capture_output=True, text=True, env=os.environ | {"STUB_API_KEY": "x"})
        assert run.returncode == 0, run.stderr[-3000:]
        requests = stub.requests
    (path,) = (tmp_path / "logs").glob("*.eval")
    log = read_eval_log(str(path))
    assert log.status == "success" and len(log.samples) == len(tasks)
    rewards = {s.id: s.scores["session_reward"].value for s in log.samples}
    assert rewards == dict(zip(null_table["id"], null_table["relative"], strict=True))
    assert (null_table["relative"] != 0).all()
    for s in log.samples:
        meta = s.scores["session_reward"].metadata
        assert (
            meta["task"] == s.id and meta["days_played"] == TASK_DAYS and meta["tail"]["days_played"] == TAIL
        )
        assert meta["runner_ended_days"] == TASK_DAYS and meta["model_ended_days"] == 0
        assert meta["turns"] == 5 * TASK_DAYS and len(meta["daily"]) == TASK_DAYS
        assert s.metadata["result"] == meta
    assert len(requests) == 5 * TASK_DAYS * len(tasks)
    from rbjax.agents.llm.prompts import Prompts
    from rbjax.agents.runs.day_start import open_day_start
    from rbjax.agents.tools.specs import TOOL_NAMES

    first, rent = requests[0], float(open_day_start(tasks[0].from_states, tasks[0].day).params.rent)
    assert sorted(t["function"]["name"] for t in first["tools"]) == sorted(TOOL_NAMES)
    assert first["messages"][0]["content"] == Prompts().system("react", rent, TOOL_NAMES, native=True)
    later = next(r for r in requests if any(m["role"] == "assistant" for m in r["messages"]))
    assert later["messages"][-1] == {"role": "user", "content": Prompts().no_call}


def scripted_day(skus) -> list:
    """The scripted model's first reply of each day: a price, an order, a bad order (an unknown product) and a
    snippet that tries to leave the sandbox."""
    return [
        ("modify_sku_price", {"sku_id": skus[0], "new_price": 2.49}),
        ("place_order", {"items": [{"sku_id": skus[1], "quantity": 40}], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": "0000000000", "quantity": 1}], "supplier_id": "supplier_1"}),
        ("execute_code", {"code": "import os\nresult = os.listdir('/')"}),
    ]


def test_scripted_tool_calls_score_as_a_session_with_the_same_calls(tasks, tasks_file, null_table, skus):
    """mockllm from ``inspect_ai.eval``: each day one reply with ``scripted_day``'s calls, then one with
    end_today and a call after it (not run). The rewards are those of sessions making the same calls; each
    tool's text is the session's (the bad order's error and the sandbox's refusal included); the log reads
    back with every call."""
    day = scripted_day(skus)

    def model(input, tools, tool_choice, config):
        if not any(isinstance(m, ChatMessageAssistant) for m in input):  # the day's conversation starts
            return reply(*day)
        return reply(("end_today", {}), ("view_inventory", {}))

    (log,) = inspect_eval(
        retail(tasks=str(tasks_file), slots=SLOTS),
        model=get_model("mockllm/model", custom_outputs=model),
        display="none",
        log_dir=str(Path(tasks_file).parent / "logs"),
    )
    assert log.status == "success", log.error
    log = read_eval_log(log.location)
    pool = SessionPool.for_task(tasks[0], slots=SLOTS)
    for task in tasks:
        (sample,) = [s for s in log.samples if s.id == task.id]
        session, texts = pool.open(task), []
        while not session.done:
            texts += [session.call(name, args) for name, args in day]
            texts.append(session.end_today())
        pool.close(session)
        assert sample.scores["session_reward"].value == session.reward
        null = float(null_table.set_index("id").loc[task.id, "relative"])
        assert session.reward != null  # the decisions moved the reward
        meta = sample.scores["session_reward"].metadata
        assert meta["model_ended_days"] == TASK_DAYS and meta["runner_ended_days"] == 0
        assert meta["daily"] == session.info()["daily"] and meta["decided_days"] == TASK_DAYS
        assert meta["turn_rewards"] == pytest.approx(session.info()["turn_rewards"], rel=1e-12, abs=1e-15)
        assert sum(meta["turn_rewards"]) == pytest.approx(session.reward, rel=1e-9, abs=1e-12)
        events = tool_events(sample)
        called = [e.function for e in events]
        assert called == ([n for n, _ in day] + ["end_today", "view_inventory"]) * TASK_DAYS
        results = [e.result for e in events if e.function != "view_inventory"]
        assert results == texts  # the session's texts, errors included
        assert texts[2] == "Error executing place_order: ValueError: Unknown SKU: 0000000000"
        assert "Unsupported import module in execute_code: os" in texts[3]  # the sandbox held
        late = [e.result for e in events if e.function == "view_inventory"]
        assert late == ["Not run: end_today ended the day earlier in this reply."] * TASK_DAYS
    last = [m for m in log.samples[0].messages if isinstance(m, ChatMessageTool)]
    assert last and "episode is over" in last[-2].text  # the last day's end_today


def test_a_limit_ends_the_decisions_and_the_episode_is_still_scored(tasks, tasks_file, skus):
    """An Inspect message limit reached on the first day: the calls made so far stand, the rest of the episode
    is played with no new decisions, and the sample is scored as a session that made those calls and then
    ``finish``ed."""
    day = scripted_day(skus)[:2]

    def model(input, tools, tool_choice, config):
        return reply(*day)  # never ends the day: the limit does

    (log,) = inspect_eval(
        retail(tasks=str(tasks_file), slots=SLOTS),
        model=get_model("mockllm/model", custom_outputs=model),
        display="none",
        log_dir=str(Path(tasks_file).parent / "limited"),
        message_limit=8,
    )
    assert log.status == "success", log.error
    pool = SessionPool.for_task(tasks[0], slots=SLOTS)
    for sample in log.samples:
        (task,) = [t for t in tasks if t.id == sample.id]
        session = pool.open(task)
        made = sum(e.function == day[0][0] for e in tool_events(sample))
        for _ in range(made):
            for name, args in day:
                session.call(name, args)
        session.finish()
        pool.close(session)
        assert sample.limit is not None and sample.limit.type == "message"
        meta = sample.scores["session_reward"].metadata
        assert made >= 1 and meta["model_ended_days"] == 0 and meta["days_played"] == TASK_DAYS
        assert sample.scores["session_reward"].value == session.reward


def stub_decisions(skus):
    """A stub model for both runners (native tool calls): on each day's first turn, shelve 6 products and order
    two of them; then end the day."""

    def script(body, n):
        if any(m.get("role") == "assistant" for m in body["messages"]):
            return Stream("", tool_calls=(("end_today", "{}"),), finish="tool_calls")
        shelf = json.dumps({"sku_ids": list(skus[:6])})
        order = json.dumps(
            {
                "items": [{"sku_id": skus[0], "quantity": 30}, {"sku_id": skus[1], "quantity": 30}],
                "supplier_id": "supplier_2",
            }
        )
        calls = (("set_shelf_skus", shelf), ("place_order", order))
        return Stream("", tool_calls=calls, finish="tool_calls")

    return script


def test_full_episodes_score_agents_runs_metrics(skus, tmp_path):
    """Two stores from their opening day for 6 days, through Inspect (openai-api provider, ``inspect_ai.eval``)
    and through ``rbjax agents run --protocol native``, one stub making the same decisions for both: each
    sample's metrics are its store's row of the run's main table, and its shares of the agent's ceiling and of
    the oracle (``-T ceiling=true``) its store's row of the run's ``ceiling.csv`` (``--ceiling``)."""
    from rbjax.results import metrics

    with ChatStub(stub_decisions(skus)) as stub:
        os.environ.setdefault("STUB_API_KEY", "x")
        (log,) = inspect_eval(
            retail(**EPISODE, slots=SLOTS, ceiling=True),
            model="openai-api/stub/stub-model",
            model_base_url=stub.url,
            display="none",
            log_dir=str(tmp_path / "logs"),
            max_retries=0,
        )
        out = tmp_path / "run"
        flags = ["--base-url", stub.url, "--protocol", "native", "--progress-seconds", "0"]
        flags += ["--stores", str(EPISODE["stores"]), "--days", str(EPISODE["days"])]
        agents_run("local/stub", out, "--seed", str(EPISODE["seed"]), "--ceiling", *flags)
        requests = stub.requests
    assert log.status == "success", log.error
    # each day's first request, from Inspect then from agents run: the same system prompt and day message
    firsts = [
        tuple((m["role"], m["content"]) for m in r["messages"])
        for r in requests
        if not any(m["role"] == "assistant" for m in r["messages"])
    ]
    half = EPISODE["stores"] * EPISODE["days"]
    assert len(firsts) == 2 * half and sorted(firsts[:half]) == sorted(firsts[half:])
    rec = np.load(out / "records.npz")
    from rbjax.state import DayInfo

    table = metrics.store_metrics(DayInfo(**{k: rec[k] for k in rec.files}))
    assert table["total_sales"].sum() > 0  # the decisions sold something: the metrics are not all zero
    by_store = {s.metadata["store"]: s for s in log.samples}
    for store, row in table.iterrows():
        got = by_store[store].scores["episode_metrics"].value
        for m in metrics.MAIN_TABLE:
            want = float(row[m])
            assert got[m] == want or (math.isnan(got[m]) and math.isnan(want)), (store, m, got[m], want)
        assert got["survived"] == float(rec["alive"][store].all())
        meta = by_store[store].scores["episode_metrics"].metadata
        assert meta["days_played"] == EPISODE["days"] and meta["model_ended_days"] == EPISODE["days"]
    names = {r.name for r in log.results.scores[0].metrics.values()}
    assert names == {"mean", "stderr"}
    means = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert means["final_net_worth"] == pytest.approx(table["final_net_worth"].mean())
    ceiling = pd.read_csv(out / "ceiling.csv", index_col="store")
    assert ceiling["plan_obs"].nunique() == len(ceiling)  # the stores differ: a wrong pairing would show
    for store, row in ceiling.iterrows():
        got = by_store[store].scores["episode_metrics"].value
        for name in ("plan_obs", "oracle"):
            assert got[f"{name}_net_worth"] == pytest.approx(row[name], rel=1e-6), (store, name)
            assert got[f"share_of_{name}"] == pytest.approx(row[f"share_of_{name}"], rel=1e-6), (store, name)
    assert means["share_of_plan_obs"] == pytest.approx(ceiling["share_of_plan_obs"].mean())


def test_a_failed_model_call_is_an_error_not_a_score(tasks_file):
    """A refused request (HTTP 400) makes each sample an error with no score, and frees its store's slot."""
    with ChatStub(lambda body, n: Status(400)) as stub:
        os.environ.setdefault("STUB_API_KEY", "x")
        (log,) = inspect_eval(
            retail(tasks=str(tasks_file), slots=SLOTS),
            model="openai-api/stub/stub-model",
            model_base_url=stub.url,
            display="none",
            log_dir=str(Path(tasks_file).parent / "failed"),
            max_retries=0,
            fail_on_error=False,
        )
    assert log.samples and all(s.error is not None and not s.scores for s in log.samples)
    assert not log.results or not log.results.scores or log.results.scores[0].scored_samples == 0
    (shared,) = [p for (k,), p in programs.held(POOL_KIND).items() if k[0] == "slices"]
    assert len(shared.pool.free) == SLOTS and not shared.pool.sessions


def test_arguments_are_checked():
    """Each bad argument is one line naming ``-T NAME`` (a ValueError, and Inspect's PrerequisiteError, which
    Inspect prints without a traceback), raised before any sample starts; an unknown one is refused."""
    from inspect_ai._util.error import PrerequisiteError

    for kwargs, message in [
        ({}, "either -T tasks=FILE"),
        ({"tasks": "t.jsonl", "stores": 2}, "either -T tasks=FILE"),
        ({"tasks": "missing.jsonl"}, "-T tasks='missing.jsonl': missing.jsonl: no such tasks file"),
        ({"stores": 0}, "-T stores=0: stores must be an int >= 1"),
        ({"stores": -1}, "-T stores=-1"),
        ({"stores": 2, "slots": 0}, "-T slots=0: slots must be an int >= 1"),
        ({"stores": 2, "memory": "week"}, "-T memory='week': must be one of day, episode"),
        ({"stores": 2, "code_timeout": 0}, "-T code_timeout=0: code_timeout must be > 0"),
        ({"stores": 2, "grouping": "7"}, "-T grouping='7'"),
        ({"stores": 2, "max_retries": -1}, "-T max_retries=-1"),
        ({"tasks": "t.jsonl", "ceiling": True}, "-T ceiling is for full episodes (-T stores=N)"),
        (
            {"stores": 2, "memroy": "episode"},
            "-T memroy: rbjax/retail has no such parameter (its parameters: tasks,",
        ),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)) as e:
            retail(**kwargs)
        assert isinstance(e.value, PrerequisiteError) and "\n" not in str(e.value), kwargs
    assert retail(stores=2, model="any").config.max_retries == 2  # Inspect passes its model: not refused


@pytest.mark.parametrize(
    "flags", [["tasks=missing.jsonl"], ["stores=-1"], ["stores=1", "memroy=episode"]], ids=lambda f: f[-1]
)
def test_a_bad_argument_on_the_command_line_is_one_line(flags, tmp_path):
    """``inspect eval rbjax/retail -T ...``: a non-zero exit, one line naming the argument, no traceback."""
    inspect = Path(sys.executable).with_name("inspect")
    line = [
        str(inspect),
        "eval",
        "rbjax/retail",
        *[x for f in flags for x in ("-T", f)],
        "--model",
        "mockllm/model",
    ]
    line += ["--log-dir", str(tmp_path)]  # (--display none would hide the message too)
    run = subprocess.run(line, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    said = (run.stdout + run.stderr).strip()
    name = flags[-1].split("=")[0]
    assert run.returncode != 0 and "Traceback" not in said, said[-2000:]
    assert len([x for x in said.splitlines() if f"-T {name}" in x]) == 1, said[-2000:]


def test_a_dead_endpoint_ends_each_sample_with_an_error_within_the_bound(tasks_file):
    """A closed port: the task's default retries (2) end each sample with the connection's error in about 10 s
    of Inspect's backoff (docs/inspect.md states at most 60 s), not after Inspect's unlimited retries."""
    import time

    os.environ.setdefault("STUB_API_KEY", "x")
    start = time.monotonic()
    (log,) = inspect_eval(
        retail(tasks=str(tasks_file), slots=SLOTS),
        model="openai-api/stub/stub-model",
        model_base_url="http://127.0.0.1:1/v1",
        display="none",
        log_dir=str(Path(tasks_file).parent / "dead"),
        fail_on_error=False,
    )
    took = time.monotonic() - start
    assert took < 60, took
    assert log.samples and all(s.error is not None and not s.scores for s in log.samples)
    assert all("onnect" in s.error.message for s in log.samples), log.samples[0].error.message

"""Language-model agents over the batched engine: the frameworks' day rules with scripted models, many
agents at once, resume after a crash, and ``rbjax agents run`` end to end against a local HTTP server."""

import asyncio
import json
import os
import random
import re

import jax
import numpy as np
import pandas as pd
import pytest

from rbjax.agents.llm.client import ChatError, ScriptedModel
from rbjax.agents.llm.frameworks import Rules, _trim
from rbjax.agents.runs.llm_agents import run_llm_agents
from rbjax.agents.tools.trace import read

STORES = 4


@pytest.fixture(scope="module")
def keys():
    return jax.random.split(jax.random.key(0), STORES)  # the CLI's keys for --seed 0


def call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def turn_of(messages):
    """The turn of the day a request belongs to (0-based): assistant messages in its history."""
    return sum(m["role"] == "assistant" for m in messages)


def phase_of(messages):
    system = messages[0]["content"]
    return "reflection" if "analyst" in system else "plan" if "You plan" in system else "execution"


def day_of(messages):
    found = re.search(r"# Day (\d+)", messages[1]["content"])
    return int(found.group(1)) if found else None


def play(env, params, keys, tmp_path, framework, replies=None, days=3, rules=None, model=None, **kw):
    """Run the stores with ``ScriptedModel(replies)``, or ``model`` (a ChatModel or ``fn(store)``)."""
    model = model or ScriptedModel(replies)
    rec, tools, agents = run_llm_agents(
        env,
        params.replace(horizon=np.int32(days)),
        keys,
        framework,
        model,
        str(tmp_path),
        rules=rules or Rules(),
        progress_seconds=0,
        **kw,
    )
    return rec, tools, agents, model


def trace(tmp_path, s=0, timing=True):
    return read(os.path.join(tmp_path, f"store_{s}", "tool_calls.jsonl"), timing)


def test_react_a_day_ends_at_end_today_and_the_calls_after_it_are_dropped(env, params, keys, tmp_path):
    sku = env.catalog.upc[3]
    order = call("place_order", items=[{"sku_id": sku, "quantity": 40}], supplier_id="supplier_2")

    def reply(messages, n):
        if turn_of(messages) == 0:
            return "Reasoning first.\n" + order + call("view_inventory")
        return call("view_notes") + call("end_today") + call("add_note", content="too late")

    rec, tools, _, model = play(env, params, keys, tmp_path, "react", reply)
    assert rec.order_lines.shape == (STORES, 3) and (rec.order_lines == 1).all()
    assert (rec.ordered[:, :, 3] == 40).all()
    t = trace(tmp_path)
    day1 = [r["tool"] for r in t if r["rb_day"] == 1]
    assert day1 == [
        "view_funds_and_date",
        "view_shelf_status",
        "place_order",
        "view_inventory",
        "view_notes",
        "end_today",
    ]
    assert [r["issued_by"] for r in t[:3]] == ["runner", "runner", "model"]
    assert all(r["tool"] != "add_note" for r in t)
    ends = [r for r in t if r["tool"] == "end_today"]
    assert [r["issued_by"] for r in ends] == ["model"] * 3 and not any("forced" in r for r in ends)
    first = model.calls[0]
    assert (
        first[0]["role"] == "system"
        and "<tools>" in first[0]["content"]
        and "end_today" in first[0]["content"]
    )
    assert (
        first[1]["content"].startswith("# Day 1 - ReAct Operations")
        and "## SKU Catalog" in first[1]["content"]
    )
    assert "Current date: 1991-09-07" in first[1]["content"]  # the runner's morning view
    second = next(m for m in model.calls if turn_of(m) == 1)
    assert second[:2] == first and second[2]["role"] == "assistant"  # the day message stays second
    assert second[3]["content"].startswith("<tool_response>\n**Order placed**")
    assert tools["direct_tools_per_day"].tolist() == [6.0] * STORES


def test_five_turns_without_a_successful_call_end_the_day(env, params, keys, tmp_path):
    def reply(messages, n):  # nothing parsable, an unknown product (an error), then silence
        return call("view_sku_prices", sku_ids=["0"]) if turn_of(messages) == 1 else "Let me think."

    rec, tools, agents, model = play(env, params, keys, tmp_path, "react", reply, days=2)
    t = trace(tmp_path)
    ends = [r for r in t if r["tool"] == "end_today"]
    assert [(r["forced"], r["reason"], r["issued_by"]) for r in ends] == [
        (True, "5 consecutive invalid tool-call turns", "runner")
    ] * 2
    assert len(model.calls) == 5 * 2 * STORES
    assert model.calls[1][-1]["content"] == "No valid tool call detected. Continue or call end_today."
    turns = read(os.path.join(tmp_path, "store_0", "turns.jsonl"))
    assert [r["parse_method"] for r in turns[:5]] == ["none", "xml", "none", "none", "none"]


def test_a_successful_call_resets_the_count_and_the_turn_limit_ends_the_day(env, params, keys, tmp_path):
    def reply(messages, n):  # every other turn succeeds: never five failures in a row
        return call("view_notes") if turn_of(messages) % 2 else "hmm"

    rec, *_, model = play(env, params, keys, tmp_path, "react", reply, days=1, rules=Rules(max_turns=9))
    (end,) = [r for r in trace(tmp_path) if r["tool"] == "end_today"]
    assert end["reason"] == "turn limit 9 reached" and len(model.calls) == 9 * STORES


def test_an_api_error_consumes_the_turn_and_the_model_reads_it(env, params, keys, tmp_path):
    def reply(messages, n):
        if turn_of(messages) == 0 and not any("System error" in str(m["content"]) for m in messages):
            return ChatError("APIConnectionError: the endpoint went away (after 4 attempts)")
        return call("end_today")

    play(env, params, keys, tmp_path, "react", reply, days=1)
    turns = read(os.path.join(tmp_path, "store_0", "turns.jsonl"))
    assert [r["parse_method"] for r in turns] == ["error", "xml"] and "went away" in turns[0]["error"]
    assert turns[0]["new_messages"] == [
        {
            "role": "user",
            "content": "System error: APIConnectionError: the endpoint went away (after 4 attempts). Continue.",
        }
    ]


def test_reflection_memory_is_replaced_after_every_day(env, params, keys, tmp_path):
    def reply(messages, n):
        if phase_of(messages) == "reflection":
            day = messages[1]["content"].split("Current Date: ")[1][:10]
            return f"Lesson written on {day}."
        return call("end_today")

    rec, tools, agents, model = play(env, params, keys, tmp_path, "reflection", reply, days=3)
    execution = [m for m in model.calls if phase_of(m) == "execution"]
    memory = [m[1]["content"].split("Learn from past mistakes):\n")[1].split("\n")[0] for m in execution]
    assert sorted(set(memory)) == [
        "(none yet)",
        "Lesson written on 1991-09-08.",
        "Lesson written on 1991-09-09.",
    ]
    reflections = [m for m in model.calls if phase_of(m) == "reflection"]
    assert len(reflections) == 3 * STORES
    assert (
        sum("# Previous reflection\nLesson written on 1991-09-09." in m[1]["content"] for m in reflections)
        == STORES
    )
    assert agents[0].memory["reflection"] == "Lesson written on 1991-09-10."
    tokens = read(os.path.join(tmp_path, "store_0", "tokens.jsonl"))
    assert all(t["reflection"]["total_tokens"] > 0 and t["requests"] == 1 for t in tokens)  # apart


def test_plan_and_act_replans_after_a_round_and_carries_yesterdays_actions(env, params, keys, tmp_path):
    sku = env.catalog.upc[0]

    def reply(messages, n):
        if phase_of(messages) == "plan":
            return "1. Check prices. 2. Set one price."
        if messages[1]["content"].startswith("## Plan"):
            return call("modify_sku_price", sku_id=sku, new_price=2.5)
        return "ok"

    rules = Rules(max_turns=7, round_turns=3)
    rec, *_, model = play(env, params, keys, tmp_path, "plan_and_act", reply, days=2, rules=rules)
    plans = [m for m in model.calls if phase_of(m) == "plan"]
    assert len(plans) == 3 * 2 * STORES  # rounds of 3, 3 and 1 turns each day
    t = trace(tmp_path)
    day1 = [r["tool"] for r in t if r["rb_day"] == 1 and r["issued_by"] == "runner"]
    assert day1 == ["view_funds_and_date", "view_inventory", "view_shelf_status"] * 3 + ["end_today"]
    (end,) = [r for r in t if r["tool"] == "end_today" and r["rb_day"] == 1]
    assert end["reason"] == "turn limit 7 reached"
    day2_plan = next(m for m in plans if "# Day 2 Status" in m[1]["content"])
    assert f'modify_sku_price({{"sku_id": "{sku}", "new_price": 2.5}})' in day2_plan[1]["content"]
    assert "Current Date: 1991-09-08" in day2_plan[1]["content"]  # yesterday's end_today text


def test_five_negative_days_end_the_run(env, params, keys, tmp_path):
    rec, *_, model = play(
        env,
        params.replace(rent=np.float32(40_000.0)),
        keys,
        tmp_path,
        "react",
        lambda m, n: call("end_today"),
        days=9,
    )
    assert rec.alive.sum(1).tolist() == [5] * STORES and (rec.funds[:, 4] < 0).all()
    assert len(model.calls) == 5 * STORES and sum(r["tool"] == "end_today" for r in trace(tmp_path)) == 5


def test_the_history_is_trimmed_from_the_third_assistant_message():
    a = lambda i: {"role": "assistant", "content": str(i)}
    u = lambda i: {"role": "user", "content": str(i)}
    history = [a(0), u(0), a(1), u(1), a(2), u(2), a(3)]
    assert _trim(history) == [a(2), u(2), a(3)]
    assert _trim([a(0), u(0), a(1), u(1)]) == [a(1), u(1)] and _trim([a(0), u(0)]) == [a(0), u(0)]


SKUS = []  # the product each store orders (set by the tests that use PerStore)


class PerStore:
    """A scripted model per store, sharing a latency rule (the runner's ``fn(store) -> ChatModel``)."""

    def __init__(self, latency, serial=False):
        self.latency, self.lock = latency, asyncio.Lock() if serial else None
        self.models = {}

    def __call__(self, s):
        def reply(messages, n):
            turn = turn_of(messages)
            if turn == 0:
                order = [{"sku_id": SKUS[s], "quantity": 20 + s}]
                return call("place_order", items=order, supplier_id="supplier_1") + call(
                    "add_note", content=f"s{s}"
                )
            return call("view_notes") if turn == 1 else call("end_today")

        inner = ScriptedModel(reply, latency=self.latency)
        lock = self.lock

        class Model:
            async def complete(self, messages, tools=None):
                if lock is None:
                    return await inner.complete(messages, tools)
                async with lock:  # one request at a time, in arrival order
                    return await inner.complete(messages, tools)

        self.models[s] = inner
        return Model()


def test_sixteen_agents_with_random_latencies_match_a_run_one_request_at_a_time(env, params, tmp_path):
    SKUS[:] = env.catalog.upc[:16]
    keys16 = jax.random.split(jax.random.key(0), 16)
    rng = random.Random(0)
    runs = {}
    for name, model in (
        ("serial", PerStore(0.0, serial=True)),
        ("concurrent", PerStore(lambda n: rng.random() * 0.02)),
    ):
        out = tmp_path / name
        rec, *_ = play(env, params, keys16, out, "react", model=model, days=3)
        runs[name] = (rec, out)
    (a, out_a), (b, out_b) = runs["serial"], runs["concurrent"]
    for k in vars(a):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)
    assert a.ordered[np.arange(16), 0, np.arange(16)].tolist() == [20 + s for s in range(16)]
    for s in range(16):
        assert trace(out_a, s, timing=False) == trace(out_b, s, timing=False)
        strip = lambda rs: [{k: v for k, v in r.items() if k != "ts"} for r in rs]
        turns = [strip(read(os.path.join(o, f"store_{s}", "turns.jsonl"))) for o in (out_a, out_b)]
        assert turns[0] == turns[1]


def test_a_run_resumed_after_a_crash_equals_an_uninterrupted_run(env, params, keys, tmp_path):
    SKUS[:] = env.catalog.upc[:STORES]

    def model(crash_on):
        factory = PerStore(0.0)

        def make(s):
            inner = factory(s)

            class Model:
                async def complete(self, messages, tools=None):
                    if crash_on is not None and day_of(messages) == crash_on:
                        raise RuntimeError("the endpoint's machine went down")
                    return await inner.complete(messages, tools)

            return Model()

        return make

    whole, *_ = play(env, params, keys, tmp_path / "whole", "reflection", model=model(None), days=4)
    with pytest.raises(RuntimeError, match="went down"):
        play(env, params, keys, tmp_path / "cut", "reflection", model=model(3), days=4)
    assert all(
        len(read(os.path.join(tmp_path / "cut", f"store_{s}", "tokens.jsonl"))) == 2 for s in range(STORES)
    )
    resumed, *_ = play(
        env, params, keys, tmp_path / "cut", "reflection", model=model(None), days=4, resume=True
    )
    for k in vars(whole):
        np.testing.assert_array_equal(getattr(whole, k), getattr(resumed, k), err_msg=k)
    for s in range(STORES):
        assert trace(tmp_path / "whole", s, timing=False) == trace(tmp_path / "cut", s, timing=False)
        days = [r["day"] for r in read(os.path.join(tmp_path / "cut", f"store_{s}", "tokens.jsonl"))]
        assert days == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="other settings"):
        play(env, params, keys[:2], tmp_path / "cut", "reflection", model=model(None), days=4, resume=True)


def test_agents_run_against_a_local_openai_compatible_server(env, tmp_path, monkeypatch, capsys):
    from chat_stub import ChatStub, Hang, Malformed, Status, Stream

    from rbjax.cli import main

    sku = env.catalog.upc[5]
    order = call("place_order", items=[{"sku_id": sku, "quantity": 25}], supplier_id="supplier_2")
    trouble = {0: Status(429), 3: Malformed(), 5: Hang()}

    def script(body, n):
        if n in trouble:
            return trouble[n]
        if turn_of(body["messages"]) == 0:
            return Stream(
                order + call("view_inventory"), reasoning="Stock up on one product.", usage=(900, 40)
            )
        return Stream(call("end_today"), usage=(1000, 5))

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-e2e-secret")
    out = tmp_path / "run"
    with ChatStub(script) as stub:
        flags = ["--base-url", stub.url, "--stores", "4", "--days", "3", "--timeout", "3", "--out", str(out)]
        flags += ["--progress-seconds", "0.001"]
        main(["agents", "run", "--framework", "react", "--model", "local/GPT-5.5-stub", *flags])
    captured = capsys.readouterr()
    printed = captured.out
    assert "paper row: GPT-5.5 (react)" in printed and "tokens_per_day" in printed
    assert "survival: 4/4 stores alive after 3 days (100.0 %)" in printed and (out / "survival.png").exists()
    assert "4/4 stores finished, 12 store-days" in captured.err and "requests/s" in captured.err
    assert all(h["authorization"] == "Bearer sk-test-e2e-secret" for h in stub.headers)
    rec = np.load(out / "records.npz")
    assert (rec["order_lines"] == 1).all() and (rec["ordered"][:, :, 5] == 25).all()
    for s in range(4):
        t = trace(out, s)
        placed = [r for r in t if r["tool"] == "place_order"]
        assert len(placed) == 3 and all(
            r["action_executed"] and r["args"]["items"][0]["sku_id"] == sku for r in placed
        )
        assert sum(r["tool"] == "end_today" for r in t) == 3
    turns = [r for s in range(4) for r in read(os.path.join(out, f"store_{s}", "turns.jsonl"))]
    assert not any(r["error"] for r in turns)  # the 429, the malformed reply and the hang were retried
    assert sum(r["attempts"] - 1 for r in turns if r["attempts"]) == 3
    assert any(r["reasoning_chars"] for r in turns)
    tokens = read(os.path.join(out, "store_0", "tokens.jsonl"))
    assert [t["day"] for t in tokens] == [1, 2, 3] and tokens[0]["completion_tokens"] >= 45
    table = (out / "local_GPT-5.5-stub_react_stores.csv").read_text()
    assert table.count("\n") == 5
    for path in out.rglob("*"):
        if path.is_file():
            assert b"sk-test-e2e-secret" not in path.read_bytes(), path
    main(["agents", "diagnose", str(out)])  # the diagnostics of the run: one order of one product a day
    assert "paper row: GPT-5.5 (react)" in capsys.readouterr().out
    stages = pd.read_csv(out / "four_stage_metrics.csv", index_col="store")
    assert (stages["s1_acted_skus_per_day"] == 1.0).all() and (stages["s2_query_depth_orders"] == 0.0).all()
    assert np.allclose(stages["s4_follow_up_action_rate_7d"], 2 / 3) and (stages["tokens_per_day"] > 0).all()
    assert (
        stages["direct_tools_per_day"] == 5.0
    ).all()  # 2 runner views, the order, the inventory, end_today


def test_agents_run_flag_errors_are_one_line(tmp_path, monkeypatch):
    from rbjax.cli import main

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cases = [
        ([], "--base-url URL is needed"),
        (["--base-url", "ftp://x"], "expected an http:// or https:// URL"),
        (["--base-url", "http://127.0.0.1:9/v1", "--concurrency", "0"], "--concurrency must be >= 1"),
        (["--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "RBJAX_NO_SUCH_VAR"], "is not set"),
        (["--base-url", "http://127.0.0.1:9/v1", "--resume"], "holds no run to resume"),
    ]
    for extra, message in cases:
        with pytest.raises(SystemExit) as e:
            main(["agents", "run", "--model", "m", "--out", str(tmp_path / "x"), "--days", "2", *extra])
        assert message in str(e.value) and "\n" not in str(e.value)


def test_the_native_protocol_sends_tools_and_answers_in_tool_messages(env, params, keys, tmp_path):
    from rbjax.agents.llm.client import Completion
    from rbjax.agents.llm.parse import ToolCall

    code = "inv = view_inventory()\nresult = inv['total_skus']"

    def reply(messages, n):
        if turn_of(messages) == 0:
            calls = [ToolCall("execute_code", {"code": code}, "c1"), ToolCall("view_notes", {}, "c2")]
            return Completion("", tool_calls=calls)
        return Completion("done", tool_calls=[ToolCall("end_today", {}, "c3")])

    model = ScriptedModel(reply)
    _, tools, *_ = play(
        env, params, keys, tmp_path, "react", model=model, days=1, rules=Rules(protocol="native")
    )
    # execute_code runs in a thread, so another store's first request may come before this store's second
    first, second = model.calls[0], next(c for c in model.calls if turn_of(c) == 1)
    assert "function calling" in first[0]["content"] and '"name": "view_notes"' in first[0]["content"]
    assert len(model.last_tools) == 21 and model.last_tools[0]["type"] == "function"
    assert [c["id"] for c in second[2]["tool_calls"]] == ["c1", "c2"]
    assert [(m["role"], m["tool_call_id"]) for m in second[3:5]] == [("tool", "c1"), ("tool", "c2")]
    assert "96" in second[3]["content"]  # execute_code's result
    # runner 2 + execute_code + view_notes + end_today direct; view_inventory inside execute_code
    assert tools["direct_tools_per_day"].tolist() == [5.0] * STORES
    assert tools["total_tools_per_day"].tolist() == [6.0] * STORES

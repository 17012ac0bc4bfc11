"""Issue 29: the endpoint's failures are infrastructure events, not model turns. The chat client against
``chat_stub`` on 127.0.0.1 reproducing llama.cpp's server (no usage chunk, a stream cut short, an error
event inside a 200 stream, a context overflow), and the frameworks' turn loop over a fake store (no engine):
``InfraError`` propagates, calls the parser refuses are answered, the trim reads estimated tokens, and the
requests of a day share their prefix."""

import asyncio
import json
import socket
import types

import numpy as np
import pytest
from chat_stub import ChatStub, Hang, Malformed, Status, Stream
from helpers import need

from rbjax.agents.llm.client import (
    Completion,
    InfraError,
    OpenAIChatModel,
    ScriptedModel,
    Usage,
    estimate_tokens,
)
from rbjax.agents.llm.frameworks import LLMAgent, Rules
from rbjax.agents.llm.prompts import Prompts

need("openai")  # a dev dependency: a skip where it is missing, a failure under CI

KEY = "sk-test-secret"
HI = [{"role": "user", "content": "hi " * 40}]


def complete(model, n=1, tools=None, messages=HI):
    """``n`` requests one after another: each reply, or the exception it raised."""

    async def go():
        out = []
        for _ in range(n):
            try:
                out.append(await model.complete(messages, tools=tools))
            except Exception as e:  # noqa: BLE001
                out.append(e)
        await model.close()
        return out

    return asyncio.run(go())


def model_at(url, **kw):
    return OpenAIChatModel("stub-model", url, api_key=KEY, retry_base=0.01, **kw)


# ------------------------------------------------------------------------------------------ the client
BAD = {
    "empty_reply": Stream("", finish=None),
    "cut_short": Stream("I will look at the inv", finish=None),  # [DONE] without a finish reason
    "length": Stream("", reasoning="Let me think " * 20, finish="length"),
    "stream_error": Stream("", error="the request exceeds the available context size"),
    "malformed": Malformed(),
    "http_500": Status(500),
}


@pytest.mark.parametrize(
    "stream, cause",
    [(True, c) for c in BAD] + [(False, c) for c in BAD if c not in ("malformed", "stream_error")],
)  # malformed and stream_error are failures of a stream only
def test_an_unusable_reply_is_retried_then_an_infra_error_naming_its_cause(cause, stream):
    with ChatStub(lambda body, n: BAD[cause]) as stub:
        model = model_at(stub.url, retries=2, **({} if stream else {"stream": False}))
        (error,) = complete(model)
    assert isinstance(error, InfraError) and error.cause == cause, error
    assert str(error).startswith(f"{cause}: ") and "after 3 attempts" in str(error) and KEY not in str(error)
    assert len(stub.requests) == 3 and model.infra_events == {cause: 3}
    assert bool(stub.requests[0].get("stream")) is stream


def test_a_retry_that_succeeds_counts_the_event_and_returns_the_reply():
    script = [Stream("", finish=None), Stream("partial", finish=None), Stream("ok")]
    with ChatStub(lambda body, n: script[n]) as stub:
        model = model_at(stub.url)
        (reply,) = complete(model)
    assert (reply.text, reply.attempts) == ("ok", 3)
    assert model.infra_events == {"empty_reply": 1, "cut_short": 1}


def test_401_and_403_are_not_retried_and_name_no_key():
    for code in (401, 403):
        with ChatStub(lambda body, n: Status(code)) as stub:
            model = model_at(stub.url)
            (error,) = complete(model)
        assert isinstance(error, InfraError) and error.cause == "auth" and "after 1 attempt" in str(error)
        assert len(stub.requests) == 1 and KEY not in str(error) and model.infra_events == {"auth": 1}


def test_connection_refused_and_a_time_out_are_infra_errors_after_the_retries():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = model_at(f"http://127.0.0.1:{port}/v1", retries=1)
    (error,) = complete(model)
    assert isinstance(error, InfraError) and error.cause == "connection" and "after 2 attempts" in str(error)
    with ChatStub(lambda body, n: Hang()) as stub:
        model = model_at(stub.url, retries=0, timeout=0.5)
        (error,) = complete(model)
    assert isinstance(error, InfraError) and error.cause == "timeout" and model.infra_events == {"timeout": 1}


def test_without_a_usage_chunk_the_tokens_are_estimated_and_marked():
    script = [Stream("Hello, store!", usage=None), Stream("Hello, store!", usage=(120, 7))]
    with ChatStub(lambda body, n: script[n]) as stub:
        model = model_at(stub.url)
        estimated, counted = complete(model, 2)
    assert estimated.usage.estimated and not counted.usage.estimated
    prompt = estimate_tokens(HI)
    assert prompt == 30 and estimated.usage.as_dict() == {
        "prompt_tokens": prompt,
        "completion_tokens": 4,  # 13 characters
        "total_tokens": prompt + 4,
        "cached_prompt_tokens": 0,
        "estimated": True,
        "uncached_prompt_tokens": prompt,
    }
    assert (counted.usage.prompt_tokens, (estimated.usage + counted.usage).estimated) == (120, True)


def test_a_prompt_over_the_context_fails_before_it_is_sent_and_an_overflow_event_is_an_infra_error():
    with ChatStub(lambda body, n: Stream("ok"), context=20) as stub:
        model = model_at(stub.url, context_tokens=25, retries=0)
        (error,) = complete(model)
        assert isinstance(error, InfraError) and error.cause == "context" and not stub.requests
        assert str(error).startswith("prompt of 30 tokens does not fit the endpoint's context of 25")
        model = model_at(stub.url, retries=0)  # the server's own limit: llama.cpp's error event
        (error,) = complete(model)
        assert error.cause == "stream_error" and "exceeds the available context size" in str(error)
        (reply,) = complete(model_at(stub.url), messages=[{"role": "user", "content": "short"}])
    assert reply.text == "ok"


def test_a_reply_that_is_not_streamed_reads_the_message_and_its_usage():
    args = json.dumps({"sku_ids": ["3828111129"]})
    script = [
        Stream("Looking.", "Think.", usage=(50, 5), tool_calls=(("view_sku_prices", args),)),
        Stream("no usage here", usage=None),
    ]
    with ChatStub(lambda body, n: script[n]) as stub:
        model = model_at(stub.url, stream=False)
        tools = [{"type": "function", "function": {"name": "view_sku_prices"}}]
        native, plain = complete(model, 2, tools=tools)
    assert "stream" not in stub.requests[0] and "stream_options" not in stub.requests[0]
    assert (native.text, native.reasoning, native.usage.prompt_tokens) == ("Looking.", "Think.", 50)
    assert [(c.name, c.arguments, c.id) for c in native.tool_calls] == [
        ("view_sku_prices", {"sku_ids": ["3828111129"]}, "call_0")
    ]
    assert plain.usage.estimated and plain.usage.completion_tokens == 4


def test_native_arguments_that_are_not_json_carry_an_error():
    script = [Stream("", tool_calls=(("place_order", '{"items": [1, 2}'),))]
    with ChatStub(lambda body, n: script[n]) as stub:
        (reply,) = complete(model_at(stub.url), tools=[{"type": "function", "function": {"name": "x"}}])
    (c,) = reply.tool_calls
    assert c.arguments == {} and c.error.startswith("invalid JSON arguments: ")


# ------------------------------------------------------------------------------------------ the frameworks
def call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


class FakeStore:
    """The tools an ``LLMAgent`` reaches: every call answers ``{name} ok``."""

    def __init__(self):
        self.turn, self.made, self.store = 0, [], 0
        self.names = types.SimpleNamespace(date=lambda cal: f"1991-09-{7 + cal:02d}")
        self.ledger = types.SimpleNamespace(first_cal=0)

    def call(self, name, args=None, *, issued_by="model", source="direct"):
        self.made.append((name, args, issued_by))
        return types.SimpleNamespace(ok=True, text=f"{name} ok")

    async def call_async(self, name, args=None):
        return self.call(name, args)


CATALOG = types.SimpleNamespace(
    category=np.array([0, 0]),
    category_names=["Dairy"],
    upc=["111", "222"],
    shelf_life=np.array([7, 9]),
    brand=["A", "B"],
    description=["milk", "cheese"],
)


def day(framework, model, rules=None):
    """One day of ``framework`` over a fake store: (forced reason or None, the store, the agent)."""
    agent = LLMAgent(framework, model, Prompts(), rules or Rules(), CATALOG, 1000.0, 600.0)
    store = FakeStore()
    forced = asyncio.run(agent.act(store, types.SimpleNamespace(day=0, cal=0)))
    return forced, store, agent


@pytest.mark.parametrize("framework", ["react", "plan_and_act"])
def test_an_infra_error_is_never_a_turn(framework):
    def reply(messages, n):
        if "You plan" in messages[0]["content"] and n == 0:
            return "1. Look."
        return InfraError("cut_short: the reply stopped (after 4 attempts)", "cut_short")

    model = ScriptedModel(reply)
    with pytest.raises(InfraError, match="cut_short"):
        day(framework, model)
    assert model.n == 1 + (framework == "plan_and_act")  # no further turn was played


def test_an_infra_error_of_the_reflection_call_propagates():
    model = ScriptedModel([call("end_today"), InfraError("http_503: down (after 4 attempts)", "http_503")])
    forced, store, agent = day("reflection", model)
    result = types.SimpleNamespace(text="Day closed.")
    with pytest.raises(InfraError, match="http_503"):
        asyncio.run(agent.after_day(store, agent.today, result))


def test_a_stream_cut_short_against_the_server_stops_the_day_instead_of_counting_a_silent_turn():
    with ChatStub(lambda body, n: Stream("", finish=None, usage=None)) as stub:
        model = model_at(stub.url, retries=1)
        with pytest.raises(InfraError, match="empty_reply"):
            day("react", model)
    assert len(stub.requests) == 2 and model.infra_events == {"empty_reply": 2}


def test_unknown_tools_broken_arguments_and_definitions_in_code_are_answered_not_run():
    code = (
        "```python\ndef end_today():\n    return 1\n\ndef view_inventory():\n    pass\nview_inventory()\n```"
    )
    replies = [
        code,
        '<tool_call>{"name": "buy_everything", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "place_order", "arguments": {"items": [1, 2}</tool_call>',
        call("end_today"),
    ]
    model = ScriptedModel(replies)
    forced, store, agent = day("react", model)
    assert forced is None and [m[0] for m in store.made] == ["view_funds_and_date", "view_shelf_status"]
    last = model.calls[-1]
    assert last[3]["content"] == "No valid tool call detected. Continue or call end_today."
    assert last[5]["content"] == (
        "<tool_response>\nError executing buy_everything: ValueError: Unknown tool: buy_everything\n"
        "</tool_response>"
    )
    assert last[7]["content"].startswith(
        "<tool_response>\nError executing place_order: ValueError: invalid JSON arguments: "
    )


def test_the_requests_of_a_day_extend_each_other_and_the_reference_layout_keeps_the_day_message_last():
    replies = [call("view_notes"), "thinking", call("view_inventory"), call("end_today")]
    model = ScriptedModel(replies)
    day("react", model)
    requests = model.calls
    assert len(requests) == 4 and requests[0][1]["content"].startswith("# Day 1 - ReAct Operations")
    for a, b in zip(requests, requests[1:]):
        assert b[: len(a)] == a  # the whole previous request is the next one's prefix
    model = ScriptedModel(replies)
    day("react", model, Rules(layout="reference"))
    assert all(r[-1] == requests[0][1] for r in model.calls)
    assert [r[1:-1] for r in model.calls] == [r[2:] for r in requests]  # the same messages, moved


def test_the_history_is_trimmed_on_estimated_tokens_when_the_server_sends_no_usage():
    def reply(messages, n):
        return Completion(call("add_note", content="x" * 400), usage=Usage())  # usage unknown

    probe = ScriptedModel([call("end_today")])
    day("react", probe)
    rules = Rules(max_turns=8, max_input_tokens=estimate_tokens(probe.calls[0]) + 300)  # ~3 turns of 110
    model = ScriptedModel(reply)
    forced, *_ = day("react", model, rules)
    assistants = [sum(m["role"] == "assistant" for m in r) for r in model.calls]
    assert forced == "turn limit 8 reached" and max(assistants) < 7, assistants

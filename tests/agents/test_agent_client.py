"""The tool-call parser and the chat client against a real HTTP server on 127.0.0.1 (``chat_stub``)."""

import asyncio
import json

import pytest
from chat_stub import ChatStub, Hang, Malformed, Status, Stream
from helpers import need

from rbjax.agents.llm.client import ChatError, InfraError, OpenAIChatModel, backoff, retryable
from rbjax.agents.llm.parse import parse_tool_calls
from rbjax.agents.tools.specs import TOOL_NAMES

need("openai")  # a dev dependency: a skip where it is missing, a failure under CI


def calls(text):
    found, method = parse_tool_calls(text, TOOL_NAMES)
    return [(c.name, c.arguments) for c in found], method


def errors(text):
    return [c.error for c in parse_tool_calls(text, TOOL_NAMES)[0]]


def test_xml_blocks_parse_in_order_with_string_or_object_arguments():
    text = (
        'I will look.\n<tool_call>{"name": "view_inventory", "arguments": {}}</tool_call>\n'
        '<tool_call>\n```json\n{"name": "view_sku_prices", "arguments": "{\\"sku_ids\\": [\\"1\\"]}"}\n```\n'
        "</tool_call>"
        '<tool_call>{"name": "modify_sku_price", "parameters": {"sku_id": "2", "new_price": 1.5}}'
    )
    assert calls(text) == (
        [
            ("view_inventory", {}),
            ("view_sku_prices", {"sku_ids": ["1"]}),
            ("modify_sku_price", {"sku_id": "2", "new_price": 1.5}),  # an unclosed last block is read
        ],
        "xml",
    )


def test_unknown_names_carry_an_error_and_only_the_first_end_today_is_kept():
    text = (
        '<tool_call>{"name": "buy_everything", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "end_today", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "view_notes", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "end_today", "arguments": {}}</tool_call>'
    )
    assert calls(text) == ([("buy_everything", {}), ("end_today", {}), ("view_notes", {})], "xml")
    assert errors(text) == ["Unknown tool: buy_everything", "", ""]
    # bare JSON: an object with a name but no arguments is data (a product, a supplier), not a call
    assert calls('{"name": "Milk 1L", "price": 2.5}') == ([], "none")
    assert errors('{"name": "buy_everything", "arguments": {}}') == ["Unknown tool: buy_everything"]


def test_malformed_arguments_carry_an_error_and_the_tool_is_still_named():
    text = '<tool_call>{"name": "place_order", "arguments": {"items": [1, 2}</tool_call>'
    assert calls(text) == ([("place_order", {})], "xml")
    assert errors(text)[0].startswith("invalid JSON arguments: Expecting")
    text = '<tool_call>{"name": "view_notes", "arguments": "not json"}</tool_call>'
    assert calls(text) == ([("view_notes", {})], "xml") and errors(text)[0].startswith("invalid JSON")
    text = '<tool_call>{"name": "view_notes", "arguments": [1]}</tool_call>'
    assert errors(text) == ["invalid JSON arguments: expected an object, got list"]
    assert errors('<tool_call>{"name": "view_notes", "arguments": ""}</tool_call>') == [""]
    # a broken end_today does not end the day: it is answered with its error
    text = '<tool_call>{"name": "end_today", "arguments": {]}</tool_call>' + "end_today()"
    assert calls(text)[0] == [("end_today", {})] and errors(text)[0].startswith("invalid JSON")


def test_python_definitions_in_code_are_not_calls():
    text = "Here is a helper:\n```python\ndef end_today():\n    return 0\n```\nI keep working."
    assert calls(text) == ([], "none")
    # a block that defines a tool's name calls its own function; other tools in it are still calls
    text = "```python\ndef view_inventory():\n    return {}\nx = view_inventory()\nview_notes()\n```"
    assert calls(text) == ([("view_notes", {})], "function")
    assert calls("def end_today(): pass\nthen end_today()") == ([("end_today", {})], "function")
    # execute_code's code is an argument, never scanned for calls
    code = "def end_today():\n    return 1\nresult = end_today()"
    text = f"<tool_call>{json.dumps({'name': 'execute_code', 'arguments': {'code': code}})}</tool_call>"
    assert calls(text) == ([("execute_code", {"code": code})], "xml")
    assert calls(f"execute_code(code={code!r})") == ([("execute_code", {"code": code})], "function")


def test_function_style_then_bare_json_are_the_fallbacks():
    text = "First view_sku_prices(sku_ids=['3828111129']) then end_today() and print(x)"
    assert calls(text) == ([("view_sku_prices", {"sku_ids": ["3828111129"]}), ("end_today", {})], "function")
    assert calls("call view_notes(note=some_variable)") == ([("view_notes", {})], "function")
    assert errors("call view_notes(note=some_variable)")[0].startswith("invalid arguments: only literal")
    text = (
        'Plan: [{"name": "view_notes", "arguments": {}}, {"name": "add_note", "arguments": {"content": "a"}}]'
    )
    assert calls(text) == ([("view_notes", {}), ("add_note", {"content": "a"})], "json")
    assert calls("no calls here {not json} (x)") == ([], "none")


def test_the_reference_retry_rule_and_backoff():
    class E(Exception):
        def __init__(self, status):
            self.status_code = status

    assert [retryable(E(s)) for s in (408, 409, 429, 500, 503, 400, 401, 404)] == [True] * 5 + [False] * 3
    assert retryable(TimeoutError()) and retryable(Exception("Connection reset by peer"))
    assert not retryable(ValueError("Expecting property name"))
    waits = [backoff(n, jitter=0.0) for n in (1, 2, 3, 4, 5)]
    assert waits == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert all(2.0 <= backoff(1) <= 2.3 for _ in range(200))


def _complete(model, n=1, tools=None):
    async def go():
        out = []
        for _ in range(n):
            try:
                out.append(await model.complete([{"role": "user", "content": "hi"}], tools=tools))
            except ChatError as e:
                out.append(e)
        await model.close()
        return out

    return asyncio.run(go())


def test_the_client_assembles_a_stream_counts_usage_and_retries_a_429():
    script = [Status(429), Stream("Hello, store!", "Let me think.", (120, 7), cached=100)]
    with ChatStub(lambda body, n: script[n]) as stub:
        model = OpenAIChatModel("stub-model", stub.url, api_key="sk-test-secret", retry_base=0.01)
        (reply,) = _complete(model)
    assert (reply.text, reply.reasoning, reply.attempts) == ("Hello, store!", "Let me think.", 2)
    assert reply.usage.as_dict() == {
        "prompt_tokens": 120,
        "completion_tokens": 7,
        "total_tokens": 127,
        "cached_prompt_tokens": 100,
        "estimated": False,
        "uncached_prompt_tokens": 20,
    }
    body = stub.requests[1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["presence_penalty"]) == (
        0.6,
        0.95,
        10000,
        1.1,
    )
    assert "tools" not in body and stub.headers[1]["authorization"] == "Bearer sk-test-secret"


def test_a_malformed_reply_a_hung_reply_and_exhausted_retries_are_infra_errors_without_the_key():
    script = [Malformed(), Malformed(), Hang(), Stream("after the time-out"), Status(500), Status(503)]
    with ChatStub(lambda body, n: script[n]) as stub:
        model = OpenAIChatModel(
            "stub-model", stub.url, api_key="sk-test-secret", retry_base=0.01, timeout=3.0, retries=1
        )
        malformed, after_hang, failed = _complete(model, 3)
    assert isinstance(malformed, InfraError) and "after 2 attempts" in str(malformed)  # retried
    assert after_hang.text == "after the time-out" and after_hang.attempts == 2  # the hang timed out
    assert isinstance(failed, InfraError) and "after 2 attempts" in str(failed) and len(stub.requests) == 6
    assert all("sk-test-secret" not in str(e) for e in (malformed, failed))
    assert model.infra_events == {"malformed": 2, "timeout": 1, "http_500": 1, "http_503": 1}
    with pytest.raises(TypeError, match="never pickled"):
        import pickle

        pickle.dumps(model)


def test_native_tool_calls_are_assembled_from_their_deltas():
    args = json.dumps({"sku_ids": ["3828111129"]})
    script = [Stream("", tool_calls=(("view_sku_prices", args), ("end_today", "")))]
    with ChatStub(lambda body, n: script[n]) as stub:
        model = OpenAIChatModel("stub-model", stub.url, retry_base=0.01)
        (reply,) = _complete(model, tools=[{"type": "function", "function": {"name": "end_today"}}])
    assert [(c.name, c.arguments, c.id) for c in reply.tool_calls] == [
        ("view_sku_prices", {"sku_ids": ["3828111129"]}, "call_0"),
        ("end_today", {}, "call_1"),
    ]
    assert stub.requests[0]["tool_choice"] == "auto"


def test_requests_in_flight_never_exceed_the_concurrency():
    import threading
    import time

    live, peak, lock = [0], [0], threading.Lock()

    def script(body, n):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.05)
        with lock:
            live[0] -= 1
        return Stream("ok")

    with ChatStub(script) as stub:
        model = OpenAIChatModel("stub-model", stub.url, concurrency=3)

        async def go():
            got = await asyncio.gather(
                *(model.complete([{"role": "user", "content": "x"}]) for _ in range(12))
            )
            await model.close()
            return got

        replies = asyncio.run(go())
    assert [r.text for r in replies] == ["ok"] * 12 and peak[0] == 3


def test_a_prompt_file_overrides_texts_and_an_unknown_field_is_refused(tmp_path):
    from rbjax.agents.llm.prompts import Prompts

    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({"warnings": "- Mind the rent.", "role": {"react": "You keep a shop."}}))
    prompts = Prompts.load(str(path))
    assert prompts.warnings == "- Mind the rent." and prompts.closeout == Prompts().closeout
    system = prompts.system("react", 600.0, ["view_notes", "end_today"])
    assert system.startswith("You keep a shop.") and "Rent of 600 is charged" in system
    assert '"name": "view_notes"' in system and '"name": "place_order"' not in system
    assert prompts.role["plan_and_act"] == Prompts().role["plan_and_act"]  # the other frameworks keep theirs
    native = prompts.system("react", 600.0, ["view_notes"], native=True)
    assert "function calling" in native and "one JSON object inside tags" not in native
    assert '"name": "view_notes"' in native  # listed in text too: some chat templates drop `tools`
    path.write_text(json.dumps({"warning": "typo"}))
    with pytest.raises(ValueError, match="unknown fields \\['warning'\\]"):
        Prompts.load(str(path))


def test_the_compact_catalogue_keeps_ids_shelf_lives_brands_in_under_half_the_text():
    from rbjax.agents.llm.frameworks import Rules
    from rbjax.agents.llm.prompts import CATALOG_HEAD, catalog_text
    from rbjax.data.catalog import load_catalog

    catalog = load_catalog()
    full, compact = catalog_text(catalog, CATALOG_HEAD), catalog_text(catalog, CATALOG_HEAD, compact=True)
    assert len(compact) < 0.5 * len(full), (len(compact), len(full))
    for j in range(catalog.num_products):
        line = f"- {catalog.upc[j]} | {int(catalog.shelf_life[j])} | {catalog.brand[j]} | "
        assert line in compact and f"SKU_id={catalog.upc[j]}" in full
        shown = compact.split(line)[1].split("\n")[0]
        assert 0 < len(shown) <= 51 and catalog.description[j].startswith(shown.removesuffix("..."))
    assert compact.count("## Category:") == full.count("## Category:")
    from rbjax.agents.llm.frameworks import LLMAgent
    from rbjax.agents.llm.prompts import Prompts

    agent = lambda rules: LLMAgent("react", None, Prompts(), rules, catalog, 30_000.0, 600.0)
    assert agent(Rules()).catalog == full and agent(Rules(compact_catalog=True)).catalog == compact

"""rbjax.agents tools on a hand-made store: golden texts, the write tools' drafts, execute_code's limits."""

import json

import numpy as np
import pytest
from agent_store import CAL, GOLDEN, calls, make_store, texts


def test_every_tool_text_matches_the_golden_texts(env):
    expected = json.loads(GOLDEN.read_text())
    got = texts(env)
    assert [(c["store"], c["call"]) for c in got] == [(c["store"], c["call"]) for c in expected]
    differ = [(e["call"], e["args"]) for g, e in zip(got, expected) if g["text"] != e["text"]]
    assert not differ, f"tool texts differ from {GOLDEN.name}: {differ}"


def test_golden_texts_cover_every_tool_and_the_empty_cases(env):
    from rbjax.agents.tools.specs import TOOL_NAMES

    cases = json.loads(GOLDEN.read_text())
    called = {c["call"] for c in cases}
    assert set(TOOL_NAMES) - called == {"execute_code"}  # tested below: its texts depend on the worker
    shown = "\n".join(c["text"] for c in cases)
    for empty in (
        "Inventory is empty.",
        "No SKUs are currently on shelf.",
        "No stockouts today.",
        "N/A",
        "No notes found.",
        "| - |",
    ):
        assert empty in shown
    assert len(calls(make_store(env))) > 50


def test_write_tools_change_the_draft_and_the_action(env):
    store = make_store(env)
    s = store.names.skus
    assert store.call("set_shelf_skus", {"sku_ids": [s[5], s[6]]}).ok
    assert store.call("modify_sku_price", {"sku_id": s[5], "new_price": 4.5}).ok
    action = store.day_action()
    assert np.flatnonzero(action["shelf"]).tolist() == [5, 6]
    assert action["set_price"].sum() == 1 and action["price"][5] == np.float32(4.5)
    assert store.call("modify_sku_price", {"sku_id": s[6], "new_price": -1}).ok is False
    assert store.day_action()["set_price"].sum() == 1  # a refused call changes nothing


def test_a_refused_order_changes_nothing_but_is_kept_for_the_step(env):
    store = make_store(env, funds=100.0)
    s = store.names.skus
    before = store.call("view_inventory").text
    res = store.call(
        "place_order", {"items": [{"sku_id": s[0], "quantity": 1000}], "supplier_id": "supplier_1"}
    )
    assert not res.ok and res.payload["error"] == "Insufficient funds" and res.payload["required"] == 500.0
    assert store.draft.funds == np.float32(100.0) and store.draft.orders == []
    assert store.call("view_inventory").text == before
    assert store.day_action()["lines"]["live"].sum() == 1  # the step refuses it too, and counts it
    assert store.call(
        "place_order", {"items": [{"sku_id": s[0], "quantity": 100}], "supplier_id": "supplier_1"}
    ).ok
    assert store.draft.funds == np.float32(50.0)  # a refusal does not block a later order that fits


def test_a_second_order_of_one_product_and_supplier_keeps_its_own_arrival(env):
    store = make_store(env)
    s = store.names.skus
    store.today.lead[1, 0] = 4  # a slower first line for the second order
    first = store.call(
        "place_order", {"items": [{"sku_id": s[0], "quantity": 10}], "supplier_id": "supplier_1"}
    )
    items = [{"sku_id": s[0], "quantity": 20}, {"sku_id": s[1], "quantity": 5}]
    second = store.call("place_order", {"items": items, "supplier_id": "supplier_1"})
    assert first.payload["arrival_date"] == "1991-09-10" and second.payload["arrival_date"] == "1991-09-11"
    assert [o.arrival - CAL for o in store.draft.orders] == [3, 4]
    lines = store.day_action()["lines"]
    assert lines["lead"][:3].tolist() == [3, 4, 4] and lines["order"][:3].tolist() == [0, 1, 1]
    assert "arrives 1991-09-10" in store.call("view_inventory").text
    assert "arrives 1991-09-11" in store.call("view_inventory").text


@pytest.mark.parametrize(
    "code, error",
    [
        ("global x", "Unsupported code construct: global"),
        ("open('f')", "Unsupported name in execute_code: open"),
        ("x = (1).__class__", "Unsupported attribute access in execute_code: __class__"),
        ("import os", "Unsupported import module in execute_code: os"),
        ("from . import x", "Unsupported relative import in execute_code"),
        ("from math import *", "Unsupported star import in execute_code"),
        ("place_order(items=[], supplier_id='supplier_1')", "Unsupported name in execute_code: place_order"),
    ],
)
def test_execute_code_refuses_the_reference_constructs(env, code, error):
    res = make_store(env).call("execute_code", {"code": code})
    assert not res.ok and res.payload["error"] == error and f"### Error\n```\n{error}\n```" in res.text


def test_execute_code_calls_the_read_tools_and_logs_them_first(env, tmp_path):
    from rbjax.agents.tools.trace import TraceWriter, read

    store = make_store(env)
    store.trace = TraceWriter(str(tmp_path / "tool_calls.jsonl"))
    code = (
        "import statistics\n"
        "p = view_sku_prices(sku_ids=sku_ids[:2])\n"
        "print('funds', funds, current_date)\n"
        "result = {'mean': statistics.mean(p.values()), 'n': len(p)}"
    )
    res = store.call("execute_code", {"code": code})
    assert res.ok and res.payload["result"] == {"mean": pytest.approx((2.39 + 1.5) / 2), "n": 2}
    assert "### Output\n```\nfunds 1000.0 1991-09-07\n\n```" in res.text and "### Return Value" in res.text
    store.trace.flush()
    recs = read(store.trace.path)
    assert [(r["tool"], r["call_source"]) for r in recs] == [
        ("view_sku_prices", "execute_code"),
        ("execute_code", "direct"),
    ]
    assert recs[0]["parent_tool"] == "execute_code"
    assert (
        make_store(env).call("execute_code", {"code": "1 / 0"}).payload["error"]
        == "ZeroDivisionError: division by zero"
    )
    assert (
        make_store(env).call("execute_code", {"code": "x = 1"}).text
        == "## Code Execution Result\n(No output)"
    )
    assert "code must be a non-empty string" in make_store(env).call("execute_code", {"code": ""}).text


def test_execute_code_stops_an_endless_loop_and_a_memory_bomb(env):
    import time

    store = make_store(env)
    store.code_timeout, store.code_memory_mb = 2.0, 256
    start = time.perf_counter()
    loop = store.call("execute_code", {"code": "while True:\n    pass"})
    assert time.perf_counter() - start < 10
    assert not loop.ok and loop.payload["error"].startswith("TimeoutError: execute_code stopped after 2 s")
    store.code_timeout = 60.0  # the memory limit, not the clock, must stop these two
    bomb = store.call("execute_code", {"code": "x = [0] * (10 ** 10)"})
    assert not bomb.ok and bomb.payload["error"].startswith("MemoryError")
    grow = store.call("execute_code", {"code": "x = []\nwhile True:\n    x.append('y' * 10 ** 7)"})
    assert not grow.ok and grow.payload["error"].startswith("MemoryError")
    assert store.call("view_funds_and_date").ok  # the store goes on


def test_execute_code_time_limit_starts_when_the_worker_is_ready(env, tmp_path, monkeypatch):
    from rbjax.agents.sandbox import parent as sandbox

    slow = tmp_path / "slow_worker.py"  # a worker whose start takes longer than the code's time limit
    slow.write_text(
        f"import runpy, time\ntime.sleep(1.5)\nrunpy.run_path({sandbox.WORKER!r}, run_name='__main__')\n"
    )
    monkeypatch.setattr(sandbox, "WORKER", str(slow))
    store = make_store(env)
    store.code_timeout = 1.0
    out = store.call("execute_code", {"code": "result = 6 * 7"})
    assert out.ok and out.payload["result"] == 42


def test_execute_code_reads_lines_the_worker_writes_back_to_back(env, tmp_path, monkeypatch):
    from rbjax.agents.sandbox import parent as sandbox

    # a worker that sends "ready" and a tool call in one write, as a fast worker may
    eager = tmp_path / "eager_worker.py"
    eager.write_text(
        "import json, os, sys\n"
        "sys.stdin.readline()\n"
        'os.write(1, b\'{"ready": true}\\n{"call": "view_notes", "args": {}}\\n\')\n'
        "notes = json.loads(sys.stdin.readline())['ok']\n"
        "os.write(1, json.dumps({'done': {'stdout': '', 'result': notes, 'error': None}}).encode() + b'\\n')\n"
    )
    monkeypatch.setattr(sandbox, "WORKER", str(eager))
    store = make_store(env)
    store.code_timeout = 5.0
    out = store.call("execute_code", {"code": "result = view_notes()"})
    assert out.ok, out.payload["error"]
    assert out.payload["result"] == store.call("view_notes").payload


def test_read_tools_see_a_read_only_view_of_the_store(env, monkeypatch):
    import dataclasses

    from rbjax.agents.tools import views

    store = make_store(env)
    seen = []
    real = views.READ_TOOLS["view_sku_prices"]
    monkeypatch.setitem(
        views.READ_TOOLS, "view_sku_prices", lambda view, **a: seen.append(view) or real(view, **a)
    )
    sku = store.names.skus[0]
    store.call("view_sku_prices", {"sku_ids": [sku]})
    (view,) = seen
    assert isinstance(view, views.StoreView) and not hasattr(view, "draft") and not hasattr(view, "call")
    with pytest.raises(ValueError):
        view.prices[0] = 99.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.funds = 0.0
    assert store.call("modify_sku_price", {"sku_id": sku, "new_price": 3.25}).ok
    assert (
        float(view.prices[0]) != 3.25
        and store.call("view_sku_prices", {"sku_ids": [sku]}).payload[sku] == 3.25
    )

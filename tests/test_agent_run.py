"""rbjax.agents end to end: the engine's order lines, the oracle through the tools against rollout, scheduling,
and ``rbjax agents run`` against ``rbjax run``."""

import asyncio
import os

import jax
import numpy as np
import pytest

import rbjax
from rbjax.agents.engine import AgentEngine
from rbjax.agents.run import make_stores, run_async, run_policy_agents
from rbjax.agents.trace import read

STORES, DAYS = 8, 30


@pytest.fixture(scope="module")
def agent_params(env, params):
    return params.replace(horizon=np.int32(DAYS))


@pytest.fixture(scope="module")
def keys():
    return jax.random.split(jax.random.key(3), STORES)


@pytest.fixture(scope="module")
def oracle_run(env, agent_params, keys, tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle_agents")
    rec, engine, stores = run_policy_agents(
        env, agent_params, rbjax.policies.oracle, rbjax.policies.OracleParams.default(), keys, out=str(out)
    )
    return rec, out


def test_the_oracle_through_the_tools_equals_its_rollout(env, agent_params, keys, oracle_run):
    rec, out = oracle_run
    ref, _ = rbjax.rollout(
        env,
        rbjax.policies.oracle,
        rbjax.policies.OracleParams.default(),
        agent_params,
        keys,
        days=DAYS,
        records="full",
    )
    differ = [k for k in vars(ref) if not np.array_equal(np.asarray(getattr(ref, k)), getattr(rec, k))]
    assert not differ, f"records differ: {differ}"
    assert int(np.asarray(ref.order_lines).sum()) > 1000 and int(np.asarray(ref.refused_orders).sum()) > 0
    trace = read(os.path.join(out, "store_0", "tool_calls.jsonl"))
    ends = [r for r in trace if r["tool"] == "end_today"]
    assert len(ends) == DAYS and [r["rb_day"] for r in ends] == list(range(1, DAYS + 1))
    assert ends[-1]["funds"] == pytest.approx(float(ref.funds[0, -1]))
    placed = sum(r["tool"] == "place_order" and r["action_executed"] for r in trace)
    assert placed == int(np.asarray(ref.order_lines[0]).sum())
    assert [r["issued_by"] for r in trace[:2]] == ["runner", "runner"]


def test_stores_finishing_in_a_random_order_give_the_same_traces_and_records(
    env, agent_params, keys, oracle_run, tmp_path
):
    rec, out = oracle_run
    days = 6  # the first days of the oracle run, each store's end_today after a random delay
    params = agent_params.replace(horizon=np.int32(days))
    shuffled, _, _ = run_policy_agents(
        env,
        params,
        rbjax.policies.oracle,
        rbjax.policies.OracleParams.default(),
        keys,
        out=str(tmp_path),
        jitter=0.05,
    )
    for k in vars(shuffled):
        np.testing.assert_array_equal(getattr(shuffled, k), getattr(rec, k)[:, :days], err_msg=k)
    for s in range(STORES):
        got = read(os.path.join(tmp_path, f"store_{s}", "tool_calls.jsonl"), timing=False)
        want = read(os.path.join(out, f"store_{s}", "tool_calls.jsonl"), timing=False)[: len(got)]
        assert got == want


def test_order_lines_through_the_engine(env, agent_params, keys):
    """Two orders of one product and supplier arrive on their own days; a refused order is refused by the
    step too; the funds the draft shows are the step's funds."""
    engine = AgentEngine(env, agent_params, keys)
    (store, *_) = make_stores(engine, None)
    today = engine.today(0)
    store.begin_day(today)
    fast, slow = int(np.argmin(today.lead[:, 0])), int(np.argmax(today.lead[:, 0]))
    assert today.lead[fast, 0] < today.lead[slow, 0]
    dear = int(np.argmax(today.quote_price[:, 1]))
    s = {0: store.names.skus[fast], 1: store.names.skus[slow], 2: store.names.skus[dear]}
    one = {"items": [{"sku_id": s[0], "quantity": 100}], "supplier_id": "supplier_1"}
    two = {
        "items": [{"sku_id": s[0], "quantity": 50}, {"sku_id": s[1], "quantity": 10}],
        "supplier_id": "supplier_1",
    }
    assert store.call("place_order", one).ok and store.call("place_order", two).ok
    huge = {"items": [{"sku_id": s[2], "quantity": 15000}], "supplier_id": "supplier_2"}
    refused = sum(not store.call("place_order", huge).ok for _ in range(6))
    arrivals = [o.arrival for o in store.draft.orders[:2]]
    shadow = store.draft.funds
    info, detail = engine.step({0: store.day_action()})[0]
    assert float(info.order_cost) == float(np.float32(today.funds) - shadow)
    assert int(info.refused_orders) == refused >= 1 and int(info.ordered[fast]) == 150
    assert arrivals == [today.cal + today.lead[fast, 0], today.cal + today.lead[slow, 0]]
    delivered = {}
    store.finish_day(info, detail, engine.today(0))
    for _ in range(8):
        t = engine.today(0)
        store.begin_day(t)
        info, detail = engine.step({0: store.day_action()})[0]
        if info.delivered[fast]:
            delivered[t.cal + 1] = int(info.delivered[fast])
        store.finish_day(info, detail, engine.today(0))
    assert delivered == {arrivals[0]: 100, arrivals[1]: 50}


def test_a_scripted_agent_day_is_recorded_in_the_ledger_and_trace(env, agent_params, keys, tmp_path):
    engine = AgentEngine(env, agent_params, keys)
    stores = make_stores(engine, str(tmp_path))

    news = {}

    async def act(store, today):
        s = store.names.skus
        news.setdefault(store.store, []).append(
            (today.news_remain.copy(), [n["id"] for n in store.news_today])
        )
        if today.day == 0:
            store.call("set_shelf_skus", {"sku_ids": s[:3]})
            items = [{"sku_id": x, "quantity": 200} for x in s[:3]]
            store.call("place_order", {"items": items, "supplier_id": "supplier_2"})
        store.call("add_note", {"content": f"day {today.day}"})

    days = 10
    engine.params = agent_params.replace(horizon=np.int32(days))
    records = asyncio.run(run_async(engine, stores, act))
    assert all(len(r) == days for r in records.values())
    led = stores[0].ledger
    assert len(led.notes) == days and led.filled == env.config.history_days + days
    recs = read(os.path.join(tmp_path, "store_0", "tool_calls.jsonl"))
    end = [r for r in recs if r["tool"] == "end_today"][-1]
    assert end["result"]["result"]["current_date"] == "1991-09-17"
    assert "Sales by SKU" in "\n".join(r["result"]["formatted"] for r in recs if r["tool"] == "end_today")
    for (remain, ids), (_, next_ids) in zip(news[0], news[0][1:]):  # an item keeps its id while listed
        assert [a == b for a, b in zip(ids, next_ids)] == (remain >= 1).tolist()
    sold = sum(int(i.sold[:3].sum()) for _, i in records[0])
    assert sold == int(led.units[env.config.history_days : led.filled, :3].sum()) > 0


def test_cli_agents_run_matches_rbjax_run(tmp_path, oracle_run):
    from rbjax.cli import main

    a, b = tmp_path / "agents", tmp_path / "run"
    main(
        [
            "agents",
            "run",
            "--model",
            "policy:oracle",
            "--stores",
            "8",
            "--days",
            "30",
            "--seed",
            "0",
            "--out",
            str(a),
        ]
    )
    main(
        [
            "run",
            "--policy",
            "oracle",
            "--stores",
            "8",
            "--days",
            "30",
            "--seed",
            "0",
            "--progress",
            "0",
            "--out",
            str(b),
        ]
    )
    assert (a / "oracle_stores.csv").read_text() == (b / "oracle_stores.csv").read_text()
    assert (a / "store_7" / "tool_calls.jsonl").stat().st_size > 0 and (a / "records.npz").exists()
    with pytest.raises(SystemExit, match="policy:NAME"):
        main(["agents", "run", "--model", "gpt-x", "--out", str(a)])

"""rbjax.agents end to end: the engine's order lines, the oracle through the tools against the golden fixture's
rollout records, scheduling, and the diagnostics of ``rbjax agents run``."""

import asyncio
import os

import golden
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import rbjax
from rbjax.agents.analysis.diagnostics import split_days
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs.loop import make_stores, run_async
from rbjax.agents.runs.policy import run_policy_agents
from rbjax.agents.tools.trace import read
from rbjax.results.metrics import store_metrics
from rbjax.state import DayInfo

STORES, DAYS, SEED = golden.STORES, golden.DAYS, golden.SEED  # the golden fixture's oracle stores


@pytest.fixture(scope="module")
def agent_params(env, params):
    return params.replace(horizon=np.int32(DAYS))


@pytest.fixture(scope="module")
def keys():
    return jax.random.split(jax.random.key(SEED), STORES)  # the CLI's keys for --seed SEED


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``rbjax agents run --model policy:oracle`` over the golden fixture's stores and days."""
    from rbjax.cli import main

    a = tmp_path_factory.mktemp("agents")
    size = f"--stores {STORES} --days {DAYS} --seed {SEED}"
    main(["agents", "run", "--model", "policy:oracle", *size.split(), "--out", str(a)])
    return a


@pytest.mark.slow
def test_agents_run_ceiling_writes_the_share_a_diagnosis_would(tmp_path, capsys):
    """``agents run --ceiling``: the run's share of plan_obs and of the oracle, as diagnose --ceiling computes it
    (an oracle run: 100 % of the oracle on each store). The golden stores and days, as ``cli_run``'s, so that
    its references are the rollouts ``diagnose --ceiling`` plays below (compiled once)."""
    from rbjax.cli import main

    line = f"agents run --model policy:oracle --stores {STORES} --days {DAYS} --seed {SEED} --ceiling --out"
    main([*line.split(), str(tmp_path)])
    assert "of the agent's ceiling (plan_obs)" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "ceiling.csv", index_col="store")
    np.testing.assert_array_equal(table["share_of_oracle"], 1.0)
    assert len(table) == STORES and np.isfinite(table["share_of_plan_obs"]).all()


@pytest.fixture(scope="module")
def golden_oracle():
    """The oracle's records in the golden fixture: ``rbjax.rollout`` of the same stores, bit for bit."""
    return golden.expected_records("oracle")


def test_the_oracle_through_the_tools_equals_its_rollout(cli_run, golden_oracle):
    a, want = cli_run, golden_oracle
    got = np.load(a / "records.npz")
    assert sorted(got.files) == sorted(want) and want["order_lines"].shape == (STORES, DAYS)
    differ = [k for k in want if not np.array_equal(got[k], want[k], equal_nan=True)]
    assert not differ, f"records differ: {differ}"
    assert int(want["order_lines"].sum()) > 800 and int(want["refused_orders"].sum()) > 0
    # the metrics: the run's table is the golden records' table plus the tool columns
    table = pd.read_csv(next(a.glob("*_stores.csv")), index_col="store")
    expected = store_metrics(DayInfo(**{k: jnp.asarray(v) for k, v in want.items()}))
    pd.testing.assert_frame_equal(table[expected.columns], expected, check_exact=True, check_names=False)
    trace = read(os.path.join(a, "store_0", "tool_calls.jsonl"))
    ends = [r for r in trace if r["tool"] == "end_today"]
    assert len(ends) == DAYS and [r["rb_day"] for r in ends] == list(range(1, DAYS + 1))
    assert ends[-1]["funds"] == pytest.approx(float(want["funds"][0, -1]))
    placed = sum(r["tool"] == "place_order" and r["action_executed"] for r in trace)
    assert placed == int(want["order_lines"][0].sum())
    assert [r["issued_by"] for r in trace[:2]] == ["runner", "runner"]
    assert all((a / f"store_{s}" / "tool_calls.jsonl").stat().st_size > 0 for s in range(STORES))


def test_stores_finishing_in_a_random_order_give_the_same_traces_and_records(
    env, agent_params, keys, cli_run, tmp_path
):
    a = cli_run
    days = 6  # the first days of the CLI's run, each store's end_today after a random delay
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
    want = np.load(a / "records.npz")
    for k in vars(shuffled):
        np.testing.assert_array_equal(getattr(shuffled, k), want[k][:, :days], err_msg=k)
    for s in range(STORES):
        got = read(os.path.join(tmp_path, f"store_{s}", "tool_calls.jsonl"), timing=False)
        expected = read(os.path.join(a, f"store_{s}", "tool_calls.jsonl"), timing=False)[: len(got)]
        assert got == expected


def test_cli_agents_run_refuses_an_unknown_policy(tmp_path):
    from rbjax.cli import main

    with pytest.raises(SystemExit, match="policy:NAME with NAME one of"):
        main(["agents", "run", "--model", "policy:nonesuch", "--out", str(tmp_path)])


def test_order_lines_through_the_engine(env, agent_params, keys):
    """Two orders of one product and supplier arrive on their own days; a refused order is refused by the
    step too; the funds the draft shows are the step's funds."""
    engine = AgentEngine(env, agent_params, keys)
    (store, *_) = make_stores(engine, None)
    today = engine.today(0)
    store.begin_day(today)
    fast, slow = int(np.argmin(today.lead[:, 0])), int(np.argmax(today.lead[:, 0]))
    assert today.lead[fast, 0] < today.lead[slow, 0]
    dear = int(np.argmax(today.suppliers.quote_price[:, 1]))
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


def test_a_store_not_stepped_keeps_its_morning(env, agent_params, keys):
    """A step of some stores leaves the others' morning as it was, observation included (on hand and waiting
    units): a store's day does not depend on which stores share a flush."""
    engine = AgentEngine(env, agent_params, keys[:2])
    stores = make_stores(engine, None)
    for _ in range(3):  # both stores order every product, then sell and receive
        for s in stores:
            today = engine.today(s.store)
            s.begin_day(today)
            j = int(np.argmin(today.lead[:, 0]))
            s.call(
                "place_order",
                {"items": [{"sku_id": s.names.skus[j], "quantity": 200}], "supplier_id": "supplier_1"},
            )
        stepped = engine.step({s.store: s.day_action() for s in stores})
        for s in stores:
            s.finish_day(*stepped[s.store], engine.today(s.store))
    stores[0].begin_day(engine.today(0))
    before = engine.today(1)
    engine.step({0: stores[0].day_action()})
    after = engine.today(1)
    for field in ("on_hand", "waiting", "prices", "shelf"):
        np.testing.assert_array_equal(getattr(after, field), getattr(before, field), err_msg=field)
    assert (after.day, after.funds) == (before.day, before.funds)
    assert engine.today(0).day == 4


def test_a_scripted_agent_day_is_recorded_in_the_ledger_and_trace(env, agent_params, keys, tmp_path):
    engine = AgentEngine(env, agent_params, keys)
    stores = make_stores(engine, str(tmp_path))

    news = {}

    async def act(store, today):
        s = store.names.skus
        news.setdefault(store.store, []).append(
            (today.news.remain.copy(), [n["id"] for n in store.news_today])
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


def test_the_oracles_diagnostics_through_the_tools_follow_from_its_rules(cli_run, capsys):
    from rbjax.cli import main

    a = cli_run
    main(["agents", "diagnose", str(a)])
    printed = capsys.readouterr().out
    assert "paper row: Oracle (quality_based)" in printed
    table = pd.read_csv(a / "four_stage_metrics.csv", index_col="store")
    assert len(table) == STORES and (a / "four_stages.png").exists()
    assert f"survival: {STORES}/{STORES} stores alive after {DAYS} days (100.0 %)" in printed
    assert (a / "survival.png").exists() and (a / "survival_by_run.png").exists()  # the run's, the diagnosis'
    assert (table["s1_acted_skus_per_day"] == 40.0).all()  # two products of each of 20 categories, daily
    assert (table["s1_missed_high_demand_rate"] == 0.0).all()
    assert (table["s3_quality_rank"] == 1.0).all() and (table["s3_quality_first_rate"] == 1.0).all()
    # the reference oracle's evidence: quotes and sales before a price, the inventory too before an order
    assert (table["s2_query_depth_orders"] == 0.75).all() and (table["s2_query_depth_prices"] == 0.5).all()
    assert (table["s2_missing_critical_evidence_rate"] == 1.0).all()
    # acting on the same products every day: only the last day's events go unfollowed
    assert (table["s4_focus_continuity"] == 1.0).all()
    for store in range(STORES):
        days = split_days(read(os.path.join(a, f"store_{store}", "tool_calls.jsonl")))
        events = [len(d.events) for d in days]
        assert len(days) == DAYS and min(events) >= 40
        expected = 1 - events[-1] / sum(events)
        assert table["s4_follow_up_action_rate_7d"][store] == pytest.approx(expected, abs=1e-12)
    run_metrics = pd.read_csv(a / "run_metrics.csv", index_col="store")
    assert (run_metrics["survival_days"] == DAYS).all() and "direct_tools_per_day" in run_metrics
    main(["agents", "diagnose", str(a), "--oracle-convention"])
    table = pd.read_csv(a / "four_stage_metrics.csv", index_col="store")
    assert (table["s2_query_depth"] == 1.0).all() and (
        table["s2_missing_critical_evidence_rate"] == 0.0
    ).all()


def test_the_oracle_manages_two_products_per_label_40_or_38():
    """Through the tools the oracle acts on every managed product every day (40 under 20 categories, the
    diagnostics test above); its shelf plan manages two per label: 40 of 20 categories, 38 of 19 labels."""
    from types import SimpleNamespace

    from rbjax.policies.oracle import shelf_plan

    catalog = rbjax.load_catalog()
    profit = jax.random.uniform(jax.random.key(3), (len(catalog.upc),))
    for labels, managed in ((catalog.category, 40), (catalog.category_ref19, 38)):
        obs = SimpleNamespace(category=jax.numpy.asarray(labels), history_profit=profit, shelf_capacity=40)
        plan, _ = shelf_plan(rbjax.policies.OracleParams.default(), obs)
        assert int(plan.sum()) == managed


@pytest.mark.slow
def test_every_refusal_of_a_used_folder_names_a_command_that_works(tmp_path):
    """A policy run cannot be resumed: each refusal (a fresh run into a used folder, --resume, replaying a run
    cut mid-day) names only --overwrite, and the command it names then runs."""
    import re

    from rbjax.cli import main

    line = [
        "agents",
        "run",
        "--model",
        "policy:oracle",
        "--stores",
        "2",
        "--days",
        "2",
        "--out",
        str(tmp_path),
    ]
    main(line)

    def refusal(argv) -> str:
        with pytest.raises(SystemExit) as e:
            main(argv)
        return str(e.value)

    cut = tmp_path / "store_1" / "tool_calls.jsonl"
    whole = cut.read_text()
    cut.write_text("".join(whole.splitlines(keepends=True)[:-1]))  # the last end_today gone
    messages = [refusal(line), refusal([*line, "--resume"]), refusal(["agents", "replay", str(tmp_path)])]
    for message in messages:
        named = re.findall(r"--[a-z][a-z-]*", re.sub(r"^rbjax: (--[a-z-]+: )?", "", message))
        assert named and set(named) <= {"--overwrite", "--out"}, message
    main([*line, "--overwrite"])  # what every refusal named
    assert len(cut.read_text().splitlines()) == len(whole.splitlines())  # the whole run again


@pytest.mark.slow
def test_diagnose_shows_the_share_of_the_agents_ceiling_on_the_same_stores_and_keys(cli_run, capsys, env):
    """``agents diagnose --ceiling``: the oracle's run through the tools is 100 % of the oracle on every store
    (the same stores and keys, so the same records), and its share of the agent's ceiling is its net worth over
    ``plan_obs``'s on those stores, played here again."""
    from rbjax.cli import main
    from rbjax.policies import make

    a = cli_run
    main(["agents", "diagnose", str(a), "--ceiling"])
    printed = capsys.readouterr().out
    assert (
        f"paired on the same {STORES} stores and keys" in printed
        and "of the agent's ceiling (plan_obs)" in printed
    )
    table = pd.read_csv(a / "ceiling.csv", index_col="store")
    assert len(table) == STORES
    np.testing.assert_array_equal(table["share_of_oracle"], 1.0)
    params = env.default_params().replace(horizon=np.int32(DAYS))
    planner, plan_params = make("plan_obs", env)
    keys = jax.random.split(jax.random.key(SEED), STORES)
    _, final = rbjax.rollout(env, planner, plan_params, params, keys, days=DAYS)
    np.testing.assert_allclose(table["plan_obs"], np.asarray(final.net_worth), rtol=1e-6)
    np.testing.assert_allclose(table["share_of_plan_obs"], table["agent"] / table["plan_obs"], rtol=1e-12)

"""Agents from task slices (``rbjax.agents.runs.slices``, ``rbjax agents run --from-states``): the warm-up through the
tools reproduces the snapshot, a policy agent from a slice continues the policy's run, a scripted language
model plays a slice end to end, a tampered snapshot is refused, and the command line's errors are one line."""

import dataclasses
import json
import os
import shutil

import jax
import numpy as np
import pandas as pd
import pytest

from rbjax.agents.llm.client import ScriptedModel
from rbjax.agents.runs.day_start import check_state
from rbjax.agents.runs.llm_agents import run_llm_agents
from rbjax.agents.runs.policy import run_policy_agents
from rbjax.agents.runs.slices import open_slice, run_policy_slice
from rbjax.agents.tools.trace import read
from rbjax.files import snapshots
from rbjax.policies import make
from rbjax.runners.continuation import resume

pytestmark = pytest.mark.slow  # snapshots brought to their day through the tools

STORES, DAYS, AT = 2, 8, 4  # the slices' run: 2 oracle stores, 8 days, a snapshot after 4
N = DAYS - AT  # the slice's days (to the horizon)
COLUMNS = [
    "store",
    "start_day",
    "start_net_worth",
    "net_worth",
    "ref_net_worth",
    "sales",
    "ref_sales",
    "survived",
    "ref_survived",
    "net_worth_diff",
    "sales_diff",
    "price_differs",
    "shelf_differs",
    "order_differs",
    "days_differ",
]


@pytest.fixture(scope="module")
def slices_dir(tmp_path_factory):
    """``rbjax run --policy oracle --save-states``: day_004.npz and slices.json (the env of the ``env``
    fixture: the agent tests' engine programs)."""
    from rbjax.cli import main

    folder = tmp_path_factory.mktemp("slices")
    # --devices 1: the worker keeps one device (a first main() call would otherwise split it for every later
    # test); tests/cli/test_default_devices.py runs this command on the default devices
    line = f"--devices 1 run --policy oracle --stores {STORES} --days {DAYS} --every {AT} --progress 0"
    main([*line.split(), "--save-states", str(folder)])
    assert sorted(os.listdir(folder)) == ["day_004.npz", "slices.json"]
    return folder


@pytest.fixture(scope="module")
def snap(env, slices_dir):
    return snapshots.load(slices_dir / "day_004.npz", env)


@pytest.fixture(scope="module")
def oracle():
    return make("oracle")


@pytest.fixture(scope="module")
def continuation(env, snap, oracle):
    """The oracle's own run continued from the snapshot: records [STORES, N] of days AT .. DAYS - 1."""
    rec, _ = resume(env, *oracle, snap, N, records="full")
    return jax.device_get(rec)


def call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


@pytest.mark.slow
def test_an_oracle_agent_from_a_slice_continues_the_oracles_run(env, snap, oracle, continuation, tmp_path):
    sl = open_slice(env, snap, *oracle, days=N)
    assert check_state(sl.engine, sl.snapshot, rtol=0.0) == []  # the agents start from the saved state
    assert all(name.startswith("state.suppliers.log") for name in sl.adopted)  # ulps, never records
    ledger = sl.stores[0].ledger  # the warm-up's days are in the ledger, as the tools show them
    assert ledger.filled == env.config.history_days + AT and len(ledger.orders) > 0
    assert {n["cal"] for n in ledger.news_log} == {int(snap.params.open_day) + d for d in range(AT)}
    assert ledger.notes == []
    rec = run_policy_slice(sl, *oracle, out=str(tmp_path / "slice"))
    assert rec.alive.shape == (STORES, N)
    differ = [
        k for k in vars(rec) if not np.array_equal(getattr(rec, k), getattr(continuation, k), equal_nan=True)
    ]
    assert not differ, f"records differ from rollout_from's: {differ}"
    assert int(rec.order_lines.sum()) > 0
    # every morning was asked of the reference, and the oracle agrees with itself
    assert sorted(sl.engine.gaps) == [(s, d) for s in range(STORES) for d in range(AT, DAYS)]
    assert not sl.decision_gaps().any()
    table = sl.compare(rec)
    assert list(table.columns) == COLUMNS and table.start_day.tolist() == [AT] * STORES
    assert (
        (table.net_worth_diff == 0).all() and (table.sales_diff == 0).all() and (table.days_differ == 0).all()
    )
    assert table.start_net_worth.tolist() == np.asarray(snap.state.net_worth, np.float64).tolist()
    # the slice's traces are the uninterrupted run's traces of the same days
    params = snap.params.replace(horizon=np.int32(DAYS))
    run_policy_agents(env, params, *oracle, snap.keys, out=str(tmp_path / "whole"))
    for s in range(STORES):
        got = read(tmp_path / "slice" / f"store_{s}" / "tool_calls.jsonl", timing=False)
        whole = read(tmp_path / "whole" / f"store_{s}" / "tool_calls.jsonl", timing=False)
        assert got[0]["rb_day"] == AT + 1 and got == [r for r in whole if r["rb_day"] > AT]


def test_a_scripted_model_plays_a_slice_and_its_decisions_are_counted(
    env, snap, oracle, continuation, tmp_path
):
    sku = env.catalog.upc[7]

    def reply(messages, n):  # the slice's first day: nothing; then one price and one order a day
        today = int(messages[1]["content"].split("# Day ")[1].split()[0])
        if today == AT + 1 or sum(m["role"] == "assistant" for m in messages):
            return call("end_today")
        order = call("place_order", items=[{"sku_id": sku, "quantity": 30}], supplier_id="supplier_1")
        return call("modify_sku_price", sku_id=sku, new_price=9.99) + order

    days = N - 1  # the stores stop before their horizon
    sl = open_slice(env, snap, *oracle, days=days)
    rec, tools, _ = run_llm_agents(
        env, None, None, "react", ScriptedModel(reply), str(tmp_path), start=sl, progress_seconds=0
    )
    assert rec.alive.shape == (STORES, days) and tools["requests"].tolist() == [2 * days - 1] * STORES
    assert rec.ordered[:, 0].sum() == 0 and (rec.ordered[:, 1:, 7] == 30).all()
    t = read(tmp_path / "store_0" / "tool_calls.jsonl")
    ends = [r["rb_day"] for r in t if r["tool"] == "end_today"]
    assert t[0]["rb_day"] == AT + 1 and ends == list(range(AT + 1, AT + days + 1))
    assert np.asarray(sl.engine.host["day"])[:STORES].tolist() == [AT + days] * STORES
    identity = json.loads((tmp_path / "run.json").read_text())
    assert identity["from_states"] is True and identity["at"] == AT and identity["days"] == days
    # the first morning is the reference's own first morning: an agent that does nothing differs from it by
    # every product the oracle orders and (at least one of those it) reprices there
    assert (continuation.refused_orders[:, 0] == 0).all()
    gaps = sl.decision_gaps()
    assert gaps.shape == (STORES, days, 3) and (gaps[:, :, 2] > 0).all()
    assert gaps[:, 0, 2].tolist() == (continuation.ordered[:, 0] > 0).sum(-1).tolist()
    assert (gaps[:, 0, 0] > 0).all() and (gaps[:, 0, 0] <= continuation.price_changed[:, 0].sum(-1)).all()


@pytest.mark.slow
def test_agents_run_from_states_on_the_command_line(env, slices_dir, snap, continuation, tmp_path, capsys):
    from chat_stub import ChatStub, Stream

    from rbjax.cli import main

    sku = env.catalog.upc[3]
    order = call("place_order", items=[{"sku_id": sku, "quantity": 20}], supplier_id="supplier_2")

    def script(body, n):
        first = not any(m["role"] == "assistant" for m in body["messages"])
        return Stream(order if first else call("end_today"))

    out = tmp_path / "llm"
    with ChatStub(script) as stub:
        flags = ["--base-url", stub.url, "--from-states", str(slices_dir), "--out", str(out)]
        main(["agents", "run", "--model", "local/stub", "--progress-seconds", "0", *flags])
    printed = capsys.readouterr().out
    assert f"slice: day {AT} of {slices_dir}, {STORES} stores" in printed
    assert "local/stub against oracle on 4-day slices" in printed and "no paper row" in printed
    rec = np.load(out / "records.npz")
    assert rec["alive"].shape == (STORES, N) and (rec["ordered"][:, :, 3] == 20).all()
    table = pd.read_csv(out / "slices.csv")
    assert list(table.columns) == COLUMNS and len(table) == STORES and (table.start_day == AT).all()
    assert (table.order_differs > 0).all() and (table.price_differs > 0).all()
    assert np.array_equal(table.ref_net_worth, np.asarray(continuation.net_worth, np.float64)[:, -1])
    assert np.array_equal(table.net_worth, np.asarray(rec["net_worth"], np.float64)[:, -1])
    assert np.array_equal(table.start_net_worth, np.asarray(snap.state.net_worth, np.float64))
    assert (out / "paired.png").exists() and (out / "local_stub_react_stores.csv").exists()
    t = read(out / "store_1" / "tool_calls.jsonl")
    assert t[0]["rb_day"] == AT + 1 and sum(r["tool"] == "end_today" for r in t) == N
    identity = json.loads((out / "run.json").read_text())
    assert identity["from_states"] == str(slices_dir) and identity["at"] == AT
    assert identity["reference"] == "oracle" and identity["source_policy"] == "oracle"
    with pytest.raises(SystemExit, match="started from a slice"):
        main(["agents", "replay", str(out)])


def test_a_tampered_or_closed_snapshot_is_refused(env, snap, oracle):
    def tampered(**fields):
        return snapshots.Snapshot(snap.state.replace(**fields), snap.keys, snap.day, snap.params)

    funds = np.asarray(snap.state.funds).copy()
    funds[1] += 100.0
    with pytest.raises(ValueError, match=r"did not reproduce the snapshot: state\.funds differs \(store 1"):
        open_slice(env, tampered(funds=funds), *oracle)
    shelf = np.asarray(snap.state.shelf).copy()
    shelf[0, 5] = ~shelf[0, 5]
    with pytest.raises(ValueError, match=r"state\.shelf differs \(store 0, 1 entries\)"):
        open_slice(env, tampered(shelf=shelf), *oracle)
    # a float an ulp apart (as XLA's programs may leave one) is taken from the snapshot itself
    log = np.asarray(snap.state.suppliers.log).copy()
    i = np.unravel_index(np.argmax(log[0]), log[0].shape)
    log[(0, *i)] = np.nextafter(log[(0, *i)], np.float32(np.inf))
    sl = open_slice(env, tampered(suppliers=snap.state.suppliers.replace(log=log)), *oracle, stores=1)
    assert check_state(sl.engine, sl.snapshot, rtol=0.0) == []
    assert any(name.startswith("state.suppliers.log: ") for name in sl.adopted)
    first = dataclasses.replace(snap, state=jax.tree.map(lambda x: x[:1], snap.state), keys=snap.keys[:1])
    with pytest.raises(ValueError, match=r"state\.suppliers\.log differs \(store 0, 1 entries\)"):
        check_state(sl.engine, first, rtol=0.0)
    done = np.asarray(snap.state.done).copy()
    done[1] = True
    with pytest.raises(ValueError, match="store 1 .* closed before day 4.*the first 1 stores are open"):
        open_slice(env, tampered(done=done), *oracle)
    with pytest.raises(ValueError, match="runs past the stores' horizon"):
        open_slice(env, snap, *oracle, days=N + 1)
    with pytest.raises(ValueError, match="between 1 and the snapshot's 2 stores"):
        open_slice(env, snap, *oracle, stores=3)


def test_agents_run_from_states_errors_are_one_line(slices_dir, tmp_path, capsys):
    from rbjax.cli import main

    two = tmp_path / "two"
    shutil.copytree(slices_dir, two)
    shutil.copy(two / "day_004.npz", two / "day_002.npz")
    bare = tmp_path / "bare"
    shutil.copytree(slices_dir, bare)
    os.remove(bare / "slices.json")
    base = ["agents", "run", "--model", "policy:oracle", "--out", str(tmp_path / "out")]
    cases = [
        (["--from-states", str(tmp_path / "none")], "not a folder"),
        (["--from-states", str(bare)], "no slices.json"),
        (["--from-states", str(two)], "--at D is needed: "),
        (["--from-states", str(two), "--at", "2,4"], "agents start from one day"),
        (["--from-states", str(slices_dir), "--at", "5"], "no snapshot of day 5"),
        (
            ["--from-states", str(slices_dir), "--days", "5"],
            "runs past the stores' horizon (8 days): at most 4",
        ),
        (["--from-states", str(slices_dir), "--stores", "3"], "holds 2 stores"),
        (["--from-states", str(slices_dir), "--grouping", "ref19"], "were made with --grouping 20"),
        (["--from-states", str(slices_dir), "--supplier-attempts", "1"], "--supplier-attempts 50"),
        (["--from-states", str(slices_dir), "--seed", "7"], "stores of --seed 0"),
        (["--from-states", str(slices_dir), "--resume"], "cannot be resumed"),
        (["--reference", "base_stock"], "--reference needs --from-states"),
    ]
    for extra, message in cases:
        with pytest.raises(SystemExit) as e:
            main([*base, *extra])
        assert message in str(e.value) and "\n" not in str(e.value), (extra, str(e.value))
    capsys.readouterr()

"""``rbjax agents run --save-states``: snapshots along an agent run, language models included, with the stores'
tool history beside them. A run continued from a snapshot (``--from-states``) plays the uninterrupted run's
days, bit for bit; tasks start from where the agents took the stores and name the model that did."""

import json
import os

import jax
import numpy as np
import pytest

from rbjax.agents.llm.client import ScriptedModel
from rbjax.agents.runs.from_states import open_from_states
from rbjax.agents.runs.llm_agents import run_llm_agents
from rbjax.agents.runs.save_states import StateSaver
from rbjax.agents.tools.trace import read
from rbjax.cli import main
from rbjax.files.slices_folder import read_manifest

pytestmark = pytest.mark.slow  # agent runs through the tools and their continuations

STORES, DAYS, EVERY = 2, 8, 4


def call(name, **args):
    """One tool call as a scripted model's reply text."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def daily_order(env):
    """A model that orders 30 units of one product and lowers its price every day, then ends the day."""
    sku = env.catalog.upc[7]

    def reply(messages, n):
        if sum(m["role"] == "assistant" for m in messages):
            return call("end_today")
        order = call("place_order", items=[{"sku_id": sku, "quantity": 30}], supplier_id="supplier_2")
        return call("modify_sku_price", sku_id=sku, new_price=4.99) + order

    return reply


def equal_records(a, b) -> None:
    for name, x in vars(a).items():
        assert np.array_equal(np.asarray(x), np.asarray(getattr(b, name)), equal_nan=True), name


def test_a_language_models_run_continued_from_its_snapshot_plays_the_same_days(env, tmp_path):
    params = env.default_params().replace(horizon=np.int32(DAYS))
    keys = jax.random.split(jax.random.key(11), STORES)
    folder = tmp_path / "states"
    folder.mkdir()
    saver = StateSaver(str(folder), env, params, keys, EVERY, DAYS, **manifest_fields("scripted-model"))
    whole, _, _ = run_llm_agents(
        env,
        params,
        keys,
        "react",
        ScriptedModel(daily_order(env)),
        str(tmp_path / "whole"),
        progress_seconds=0,
        on_day=saver.reached,
    )
    assert saver.finish() == {EVERY: "day_004.npz"}
    assert sorted(os.listdir(folder)) == ["day_004.npz", "slices.json", "tools_day_004.npz"]
    manifest = read_manifest(str(folder))
    assert manifest["policy"] == "agent" and manifest["agent"] == "scripted-model"

    _, sl, settings = open_from_states(str(folder), EVERY)
    assert settings["source_policy"] == "agent:scripted-model"
    rest, _, _ = run_llm_agents(
        env, None, None, "react", ScriptedModel(daily_order(env)), str(tmp_path / "rest"), start=sl,
        progress_seconds=0,
    )  # fmt: skip
    assert (np.asarray(whole.ordered)[:, EVERY:].sum((-1, -2)) > 0).all()  # the model's orders are in
    equal_records(rest, jax.tree.map(lambda x: np.asarray(x)[:, EVERY:], whole))
    for s in range(STORES):  # the same calls, order ids and notes after the snapshot's morning
        got = read(tmp_path / "rest" / f"store_{s}" / "tool_calls.jsonl", timing=False)
        kept = read(tmp_path / "whole" / f"store_{s}" / "tool_calls.jsonl", timing=False)
        assert got == [r for r in kept if r["rb_day"] > EVERY]


def manifest_fields(model: str) -> dict:
    return dict(
        policy="agent",
        agent=model,
        checkpoint=None,
        greedy=False,
        seed=11,
        stores=STORES,
        grouping="20",
        supplier_attempts=50,
        data=None,
    )


def test_the_command_line_saves_a_policy_agents_run_and_tasks_start_from_it(tmp_path, capsys):
    states, whole, rest = tmp_path / "states", tmp_path / "whole", tmp_path / "rest"
    line = f"--devices 1 agents run --model policy:base_stock --stores {STORES} --days {DAYS} --progress 0"
    main([*line.split(), "--out", str(whole), "--save-states", str(states), "--every", str(EVERY)])
    assert f"wrote 1 snapshot with the stores' tool history (days {EVERY})" in capsys.readouterr().out
    assert read_manifest(str(states))["policy"] == "base_stock"
    cont = "--devices 1 agents run --model policy:base_stock --progress 0"
    main([*cont.split(), "--from-states", str(states), "--out", str(rest)])
    with np.load(whole / "records.npz") as a, np.load(rest / "records.npz") as b:
        for name in b.files:
            assert np.array_equal(a[name][:, EVERY:], b[name], equal_nan=True), name
    tasks = tmp_path / "tasks.jsonl"
    main(
        ["--devices", "1", "lm", "tasks", "--from-states", str(states), "--days", "2", "--tail", "1"]
        + ["--out", str(tasks)]
    )
    rows = [json.loads(x) for x in tasks.read_text().splitlines()]
    assert len(rows) == STORES and all(r["source_policy"] == "base_stock" for r in rows)


def test_a_folder_with_another_runs_snapshots_is_refused_before_any_work(tmp_path):
    states = tmp_path / "states"
    states.mkdir()
    (states / "slices.json").write_text("{}")
    line = f"--devices 1 agents run --model policy:null --stores 1 --days {DAYS} --out {tmp_path / 'o'}"
    with pytest.raises(SystemExit) as e:
        main([*line.split(), "--save-states", str(states), "--every", "4"])
    assert "holds the snapshots of another run (slices.json)" in str(e.value.code)
    assert not list((tmp_path / "o").glob("*"))  # refused before any run was written to --out


@pytest.mark.parametrize(
    "flags, message",
    [
        ("--save-states S --every 8", "--every must be between 1 and --days - 1 (7)"),
        (
            "--save-states S --resume",
            "--save-states saves the snapshots of a fresh run, not of one with --resume",
        ),
    ],
)
def test_save_states_refusals_are_one_line(tmp_path, flags, message):
    line = (
        f"--devices 1 agents run --model policy:null --stores 1 --days {DAYS} --out {tmp_path / 'o'} {flags}"
    )
    with pytest.raises(SystemExit) as e:
        main(line.replace(" S ", f" {tmp_path / 's'} ").split())
    assert message in str(e.value.code) and "\n" not in str(e.value.code)

"""``rbjax agents run --tasks FILE``: a tasks file run by an agent, scored as sessions score it. The reference
through the tools scores exactly 0 on every task, as in a session; a policy's gains are those of a session
making the same decisions (a session that only ends its days, ``finish``, is ``policy:null``, and so is a
language model that only calls end_today); the tasks' own stores are run, not the snapshot's first ones;
tasks of two snapshot days make two runs and one table; errors are one line, before any work."""

import json
import os

import numpy as np
import pandas as pd
import pytest
from conftest import EVERY, STORES, TAIL, TASK_DAYS

from rbjax.cli import main
from rbjax.lm import rewards
from rbjax.lm.pool import SessionPool
from rbjax.lm.tasks import make_tasks, write_tasks

pytestmark = pytest.mark.slow  # a slices run, its tool history and agent runs through the tools

RUN = f"day_{EVERY:03d}_{TASK_DAYS}d_{TAIL}k"  # the run folder of the tasks of tasks_file


def agents_run(model, out, *args):
    """``rbjax --devices 1 agents run --model MODEL --out OUT ARGS...`` in this process."""
    main(["--devices", "1", "agents", "run", "--model", model, "--out", str(out), *args])


def run_tasks(model, tasks_path, out, *extra):
    agents_run(model, out, "--tasks", str(tasks_path), "--progress", "0", *extra)
    return pd.read_csv(out / "tasks.csv")


@pytest.fixture(scope="module")
def null_table(tasks_file, tmp_path_factory):
    """tasks.csv of policy:null on every task of tasks_file."""
    return run_tasks("policy:null", tasks_file, tmp_path_factory.mktemp("null") / "out")


def test_the_reference_through_the_tools_scores_exactly_zero(tasks, tasks_file, tmp_path, capsys):
    out = tmp_path / "oracle"
    table = run_tasks("policy:oracle", tasks_file, out)
    assert table["id"].tolist() == [t.id for t in tasks] and len(tasks) == STORES
    assert table["store"].tolist() == list(range(STORES)) and (table["run"] == RUN).all()
    assert (table["relative"] == 0.0).all() and (table["beat"] == 0.0).all()
    assert table["gain"].tolist() == [t.reference_gain for t in tasks]
    assert table["start_net_worth"].tolist() == [t.start_net_worth for t in tasks]
    printed = capsys.readouterr().out
    assert f"{STORES} tasks in 1 runs: mean relative reward +0.0000, 0% beat the reference" in printed
    assert f"wrote {out / 'tasks.csv'}" in printed
    # the run's folder holds what a --from-states run writes
    run = out / RUN
    for name in ("records.npz", "slices.csv", "oracle_stores.csv", "paired.png", "survival.png", "run.json"):
        assert (run / name).exists(), name
    assert sorted(p for p in os.listdir(run) if p.startswith("store_")) == [
        f"store_{s}" for s in range(STORES)
    ]
    identity = json.loads((run / "run.json").read_text())
    assert identity["at"] == EVERY and identity["days"] == TASK_DAYS and identity["snapshot_stores"] == [0, 1]
    rec = np.load(run / "records.npz")
    assert rec["alive"].shape == (STORES, TASK_DAYS)


def test_a_policys_gains_are_those_of_a_session_with_the_same_decisions(tasks, null_table):
    """policy:null keeps prices and shelf and orders nothing: the days a session plays with no new decision
    (``Session.finish``). Its gains and rewards are the session's, to the bit."""
    pool = SessionPool.for_task(tasks[0], slots=4)
    for task, row in zip(tasks, null_table.itertuples(), strict=True):
        session = pool.open(task)
        info = session.finish()
        pool.close(session)
        assert row.id == task.id and info["decided_days"] == 0 and info["days_played"] == TASK_DAYS
        assert row.gain == info["gain"] and row.relative == info["reward"]
        assert row.beat == rewards.reward("beat", info["gain"], task.reference_gain, task.scale)
        assert row.relative == (row.gain - task.reference_gain) / task.scale
    assert (
        null_table["relative"] < 0.0
    ).all()  # doing nothing loses to the oracle once the continuation runs


def test_a_language_model_plays_the_tasks(tasks, tasks_file, null_table, tmp_path, capsys):
    """A model that only calls end_today makes no decision: its gains are policy:null's."""
    from chat_stub import ChatStub, Stream

    end = '<tool_call>{"name": "end_today", "arguments": {}}</tool_call>'
    out = tmp_path / "llm"
    with ChatStub(lambda body, n: Stream(end)) as stub:
        flags = ["--base-url", stub.url, "--progress-seconds", "0"]
        table = run_tasks("local/stub", tasks_file, out, *flags)
    assert table["id"].tolist() == [t.id for t in tasks]
    assert table["gain"].tolist() == null_table["gain"].tolist()
    assert table["relative"].tolist() == null_table["relative"].tolist()
    run = out / RUN
    assert (run / "local_stub_react_stores.csv").exists() and (run / "store_1" / "turns.jsonl").exists()
    assert f"local/stub against oracle on {TASK_DAYS}-day slices" in capsys.readouterr().out


def test_tasks_of_two_snapshot_days_make_two_runs_and_one_table(tmp_path_factory, capsys):
    """Tasks of days 4 and 8 in mixed order, day 8's of store 1 alone: two runs, each of exactly its tasks'
    stores (day 8's takes over store 1 as its store_0/), and one table in the file's order where the oracle
    scores exactly 0 on every task (a batch of one store steps as a batch of two)."""
    # a run of 12 days, snapshots after 4 and 8; tasks of TASK_DAYS, as the module's (their programs: one batch
    # of two stores, one of a store and the panel's), no tail
    every, days = 4, TASK_DAYS
    folder = tmp_path_factory.mktemp("slices12")
    line = f"--devices 1 run --policy oracle --stores {STORES} --days 12 --every {every} --progress 0"
    main([*line.split(), "--save-states", str(folder)])
    made = make_tasks(str(folder), days=days, at=[every, 2 * every], tail=0)
    assert [(t.day, t.store) for t in made] == [(every, 0), (every, 1), (2 * every, 0), (2 * every, 1)]
    order = [made[3], made[1], made[0]]
    path = tmp_path_factory.mktemp("two") / "tasks.jsonl"
    write_tasks(order, str(path))
    kept = folder / f"tools_day_{2 * every:03d}.npz"
    with np.load(kept) as z:  # made with day 4's in one play (day_start.keep_histories)
        one_play = {k: z[k] for k in z.files}
    os.remove(kept)  # day 8's tool history is made again (stores 0 and 1), from day 0 alone, and kept
    out = path.parent / "out"
    table = run_tasks("policy:oracle", path, out)
    assert kept.exists()
    with np.load(kept) as z:
        assert sorted(z.files) == sorted(one_play) and all(np.array_equal(z[k], one_play[k]) for k in z.files)
    runs = [f"day_{every:03d}_{days}d", f"day_{2 * every:03d}_{days}d"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == runs
    assert table["id"].tolist() == [t.id for t in order]
    assert table["run"].tolist() == [runs[1], runs[0], runs[0]] and table["store"].tolist() == [1, 1, 0]
    assert (table["relative"] == 0.0).all() and table["gain"].tolist() == [t.reference_gain for t in order]
    assert made[3].reference_gain != made[2].reference_gain  # store 0 would not have scored 0
    for run, stores in zip(runs, ([0, 1], [1]), strict=True):
        identity = json.loads((out / run / "run.json").read_text())
        assert identity["snapshot_stores"] == stores and identity["stores"] == len(stores)
        assert pd.read_csv(out / run / "slices.csv")["store"].tolist() == stores
        assert sorted(os.listdir(out / run / "store_0")) == ["tool_calls.jsonl"]
    net_worth = np.asarray(np.load(out / runs[1] / "records.npz")["net_worth"], np.float64)
    assert net_worth.shape == (1, days)
    assert net_worth[0, -1] == made[3].start_net_worth + made[3].reference_gain
    printed = capsys.readouterr().out
    assert f"stores [1]; playing {2 * every} days of oracle" in printed
    assert "3 tasks in 2 runs: mean relative reward +0.0000" in printed


def test_errors_are_one_line_and_come_before_any_work(slices_dir, tasks, tasks_file, tmp_path):
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text(json.dumps(tasks[0].to_row()) + "\n{not json\n")
    bad_field = tmp_path / "field.jsonl"
    bad_field.write_text(json.dumps({**tasks[0].to_row(), "days": "two"}) + "\n")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        json.dumps(tasks[0].to_row()) + "\n" + json.dumps({**tasks[1].to_row(), "reference": "null"}) + "\n"
    )
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**tasks[0].to_row(), "start_net_worth": 1.0}) + "\n")
    used = tmp_path / "used"
    used.mkdir()
    (used / "tasks.csv").write_text("id\n")
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    out = tmp_path / "out"
    cases = [
        (
            [str(tasks_file), "--from-states", str(slices_dir)],
            out,
            "--tasks cannot be combined with --from-states",
        ),
        ([str(tasks_file), "--stores", "1"], out, "combined with --stores"),
        ([str(tasks_file), "--days", "2"], out, "combined with --days"),
        ([str(tasks_file), "--reference", "null"], out, "combined with --reference"),
        ([str(tasks_file), "--seed", "3"], out, "combined with --seed"),
        ([str(tmp_path / "none.jsonl")], out, "none.jsonl: no such tasks file"),
        ([str(bad_json)], out, "bad.jsonl:2: not a JSON line"),
        ([str(bad_field)], out, "field.jsonl:1: field 'days' must be an int"),
        ([str(mixed)], out, "differ in reference ('oracle', 'null')"),
        ([str(tasks_file)], used, "holds a tasks run already (tasks.csv)"),
        ([str(tasks_file)], a_file / "out", "not a writable folder"),
        ([str(other)], out, "a task of another snapshot"),
    ]
    for extra, where, message in cases:
        with pytest.raises(SystemExit) as e:
            agents_run("policy:oracle", where, "--tasks", *extra)
        text = str(e.value.code)
        assert message in text and "\n" not in text, (extra, text)
        assert not (where / "tasks.csv").exists() or where == used, extra
        if message != "a task of another snapshot":
            assert not os.path.exists(where / RUN), extra  # refused before any work

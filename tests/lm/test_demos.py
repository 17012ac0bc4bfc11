"""Demonstrations (``rbjax.lm.demos``) and corrections (``rbjax.lm.corrections``): a teacher's days through the
tools as chat rows, replayed through sessions to their recorded answers and rewards; the command line's
refusals."""

import json

import jax
import numpy as np
import pytest

from rbjax.agents.tools.specs import openai_functions
from rbjax.cli import main
from rbjax.lm import conversation
from rbjax.lm.demos import demonstrate, read_rows, write_rows
from rbjax.lm.pool import SessionPool
from rbjax.lm.replay_demos import replay

pytestmark = pytest.mark.slow  # sessions, a planner and a student on a slices run

TEACHERS = ("oracle", "plan", "distilled")  # a heuristic, the planner, a learned student


@pytest.fixture(scope="module")
def pool(tasks):
    p = SessionPool.for_task(tasks[0], slots=len(tasks))
    yield p
    p.close_all()


@pytest.fixture(scope="module")
def rows(tasks, pool):
    return {teacher: demonstrate(tasks, teacher, pool=pool) for teacher in TEACHERS}


def test_the_tasks_reference_as_teacher_earns_exactly_zero(rows, tasks):
    """The reference's gain is made with the driver's calls; the teacher's fewest calls make the same action,
    so the oracle teaching oracle-referenced tasks earns 0, every day credited 0."""
    assert {t.reference for t in tasks} == {"oracle"}
    for row in rows["oracle"]:
        assert row["reward"] == 0.0 and row["turn_rewards"] == [0.0] * len(row["turn_rewards"]), row["id"]
        assert len(row["turn_rewards"]) == row["task"]["days"]


@pytest.mark.parametrize("teacher", TEACHERS)
def test_every_teachers_rows_replay_to_their_answers_and_rewards(rows, pool, teacher):
    report = replay(rows[teacher], pool=pool)
    assert [r["same"] for r in report] == [True] * len(report), report
    assert all(r["answers"] == sum(row["calls_per_day"]) for r, row in zip(report, rows[teacher]))
    assert len({row["info"]["gain"] for row in rows[teacher]}) == len(rows[teacher])  # the stores differ


def test_a_tampered_row_does_not_replay(rows, pool):
    row = json.loads(json.dumps(rows["oracle"][0]))
    first = next(m for m in row["messages"] if m["role"] == "assistant")
    price = next(c for c in first["tool_calls"] if c["function"]["name"] == "modify_sku_price")
    price["function"]["arguments"]["new_price"] += 0.25
    (got,) = replay([row], pool=pool)
    assert not got["same"] and got["first_difference"] is not None


def test_a_row_is_the_episode_as_sessions_serve_it(rows, tasks, pool):
    for teacher, made in rows.items():
        for row, task in zip(made, tasks, strict=True):
            m = row["messages"]
            assert row["tools"] == openai_functions() and row["teacher"] == teacher and row["id"] == task.id
            assert m[0]["role"] == "user" and m[0]["content"].startswith(task.prompt[0]["content"] + "\n\n")
            assert "Current date:" in m[0]["content"]
            days = conversation.days_of(m)
            assert (
                len(days) == task.days == len(row["call_tokens_per_day"]) == len(row["result_tokens_per_day"])
            )
            assert [len(d) for d in days] == row["calls_per_day"]
            assert all(d[-1] == ("end_today", {}) and all(n != "end_today" for n, _ in d[:-1]) for d in days)
            assert [x["role"] for x in m[1:]] == [r for d in days for r in ["assistant"] + ["tool"] * len(d)]
            ends = [x for x in m if x["role"] == "tool" and x["name"] == "end_today"]
            assert len(ends) == task.days and m[-1] is ends[-1]
            assert all("Current date:" in e["content"] for e in ends[:-1])
            assert ends[-1]["content"].endswith("The episode is over (horizon).")
    # the planner changes what the oracle would do on some day: its rows are not the oracle's
    assert any(a["messages"] != b["messages"] for a, b in zip(rows["plan"], rows["oracle"], strict=True))


def test_the_openai_form_holds_the_same_calls_and_reward(tasks, pool, rows):
    made = demonstrate(tasks[:1], "oracle", form="openai", pool=pool)
    (trl,) = [r for r in rows["oracle"] if r["id"] == tasks[0].id]
    assert conversation.days_of(made[0]["messages"]) == conversation.days_of(trl["messages"])
    assert made[0]["reward"] == trl["reward"]
    for m in made[0]["messages"]:
        for call in m.get("tool_calls") or []:
            assert isinstance(call["function"]["arguments"], str) and call["id"].startswith("call_")
        if m["role"] == "tool":
            assert m["tool_call_id"].startswith("call_")
    assert replay(made, pool=pool)[0]["same"]


def test_the_file_round_trips_and_loads_as_a_dataset(rows, tmp_path):
    path = tmp_path / "demos.jsonl"
    write_rows(rows["plan"], str(path))
    assert read_rows(str(path)) == json.loads(json.dumps(rows["plan"]))
    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset("json", data_files=str(path))["train"]
    assert loaded.num_rows == len(rows["plan"]) and {"messages", "tools"} <= set(loaded.column_names)


def test_the_command_line_refuses_bad_input_in_one_line(tasks_file, slices_dir, tmp_path, capsys):
    out = str(tmp_path / "d.jsonl")
    rows = [json.loads(line) for line in tasks_file.read_text().splitlines()]
    far = tmp_path / "far.jsonl"
    far.write_text(json.dumps({**rows[0], "day": 22}) + "\n")  # 3 days + 4 of continuation pass day 24
    bad = {
        f"lm demos --tasks {far} --teacher oracle --out {out}": "--tasks",
        f"lm demos --tasks {tmp_path / 'none.jsonl'} --teacher oracle --out {out}": "--tasks",
        f"lm demos --tasks {tasks_file} --teacher wizard --out {out}": "--teacher wizard",
        f"lm demos --tasks {tasks_file} --teacher oracle --out {tmp_path / 'no' / 'd.jsonl'}": "--out",
        f"lm corrections --from-states {slices_dir} --teacher oracle --out {out}": "--from-states",
        f"lm replay --demos {tasks_file}": "--demos",
    }
    for line, flag in bad.items():
        with pytest.raises(SystemExit) as e:
            main(["--devices", "1", *line.split()])
        message = str(e.value)
        assert message.startswith("rbjax: ") and flag in message and "\n" not in message, (line, message)
    assert not (tmp_path / "d.jsonl").exists()


@pytest.fixture(scope="module")
def policy_run(tmp_path_factory):
    """A base-stock agent run of 2 stores x 10 days through the tools, a snapshot every morning."""
    folder = tmp_path_factory.mktemp("policy_run")
    line = "--devices 1 agents run --model policy:base_stock --stores 2 --days 10 --progress 0 --every 1"
    main([*line.split(), "--out", str(folder / "run"), "--save-states", str(folder / "states")])
    return folder / "states"


def test_corrections_by_the_models_own_policy_find_no_gap(policy_run, tmp_path):
    """The model's days are base_stock's: base_stock correcting them plays the same days, so every gap is 0
    (the model's reward is made from its saved next morning, the teacher's through a session)."""
    out = tmp_path / "c.jsonl"
    main(["--devices", "1", "lm", "corrections", "--from-states", str(policy_run), "--at", "3,6", "--days", "1",
          "--tail", "2", "--teacher", "base_stock", "--out", str(out)])  # fmt: skip
    made = read_rows(str(out))
    assert [(r["task"]["day"], r["task"]["store"]) for r in made] == [(3, 0), (3, 1), (6, 0), (6, 1)]
    assert all(r["model"] == "base_stock" and r["gap"] == 0.0 for r in made), [r["gap"] for r in made]
    assert len({r["reward"] for r in made}) > 1


def test_corrections_refuse_a_run_without_its_tool_history(policy_run, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(policy_run, bare)
    (bare / "tools_day_004.npz").unlink()
    with pytest.raises(SystemExit) as e:
        main(["--devices", "1", "lm", "corrections", "--from-states", str(bare), "--at", "3", "--days", "1",
              "--teacher", "oracle", "--out", str(tmp_path / "c.jsonl")])  # fmt: skip
    said = str(e.value)
    assert (
        said.startswith("rbjax: --from-states ") and "day 4 has no tool history" in said and "\n" not in said
    )
    assert not (tmp_path / "c.jsonl").exists()


def test_corrections_of_a_language_models_run_replay(env, tmp_path):
    """A scripted model's run (its days cannot be played again): the oracle's corrections from its mornings
    replay, and the oracle does better than ordering 30 units of one product a day."""
    from rbjax.agents.llm.client import ScriptedModel
    from rbjax.agents.runs.llm_agents import run_llm_agents
    from rbjax.agents.runs.save_states import StateSaver
    from rbjax.lm.corrections import correct

    days = 8
    params = env.default_params().replace(horizon=np.int32(days))
    keys = jax.random.split(jax.random.key(5), 2)
    sku = env.catalog.upc[7]

    def reply(messages, n):
        if sum(m["role"] == "assistant" for m in messages):
            return '<tool_call>{"name": "end_today", "arguments": {}}</tool_call>'
        line = {"items": [{"sku_id": sku, "quantity": 30}], "supplier_id": "supplier_2"}
        return f"<tool_call>{json.dumps({'name': 'place_order', 'arguments': line})}</tool_call>"

    folder = tmp_path / "states"
    folder.mkdir()
    fields = dict(policy="agent", agent="scripted", checkpoint=None, greedy=False, seed=5, stores=2,
                  grouping="20", supplier_attempts=50, data=None)  # fmt: skip
    saver = StateSaver(str(folder), env, params, keys, 1, days, **fields)
    run_llm_agents(env, params, keys, "react", ScriptedModel(reply), str(tmp_path / "run"), progress_seconds=0,
                   on_day=saver.reached)  # fmt: skip
    saver.finish()
    made = correct(str(folder), "oracle", days=1, at=[4], tail=2)
    assert [r["model"] for r in made] == ["agent:scripted"] * 2
    assert all(r["gap"] == pytest.approx(r["reward"] - r["model_reward"]) for r in made)
    assert [r["same"] for r in replay(made)] == [True, True]

"""``rbjax agents replay`` and ``rbjax agents rescore``: runs played again from their traces with no model, and
their tables rebuilt. Two stores of a few days (one engine batch, the agent-engine group's programs)."""

import json
import os
import re
import shutil

import jax
import numpy as np
import pandas as pd
import pytest

from rbjax.agents.analysis import replay, rescore
from rbjax.agents.llm.client import ScriptedModel
from rbjax.agents.runs.llm_agents import run_llm_agents
from rbjax.agents.sandbox import seccomp
from rbjax.agents.tools.trace import read
from rbjax.cli import main
from rbjax.files.record_files import save_records
from rbjax.results.metrics import store_metrics

STORES, DAYS, SEED = 2, 4, 3
SANDBOX = seccomp.unavailable() is None


def call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def folder_state(path):
    """Every file under ``path`` with its size and modification time."""
    return {
        os.path.join(root, n): (
            os.path.getsize(os.path.join(root, n)),
            os.path.getmtime(os.path.join(root, n)),
        )
        for root, _, names in os.walk(path)
        for n in names
    }


@pytest.fixture(scope="module")
def policy_run(tmp_path_factory):
    """``rbjax agents run --model policy:oracle``, then ``agents diagnose`` (its four-stage CSV)."""
    out = tmp_path_factory.mktemp("oracle")
    size = f"--stores {STORES} --days {DAYS} --seed {SEED}"
    main(["agents", "run", "--model", "policy:oracle", *size.split(), "--out", str(out)])
    main(["agents", "diagnose", str(out)])
    return out


CODE = "inv = view_inventory()\nprint(inv['total_skus'])\nresult = view_notes()"


@pytest.fixture(scope="module")
def llm_run(env, params, tmp_path_factory):
    """A ReAct run of a scripted model, 3 days: day 1 an execute_code call (two inner calls) before a note
    and an order (their ids follow the call indices), day 2 five turns without a call (the runner ends the
    day), day 3 a price change."""
    out = tmp_path_factory.mktemp("llm")
    sku = env.catalog.upc[5]

    def reply(messages, n):
        day = int(re.search(r"# Day (\d+)", messages[1]["content"]).group(1))
        turn = sum(m["role"] == "assistant" for m in messages)
        if day == 2:
            return "Let me think."
        if turn:
            return call("end_today")
        if day == 1:
            order = {"items": [{"sku_id": sku, "quantity": 30}], "supplier_id": "supplier_2"}
            return (
                call("execute_code", code=CODE)
                + call("add_note", content="seen")
                + call("place_order", **order)
            )
        return call("modify_sku_price", sku_id=sku, new_price=3.5) + call("view_notes")

    rec, tools, _ = run_llm_agents(
        env,
        params.replace(horizon=np.int32(3)),
        jax.random.split(jax.random.key(SEED), STORES),
        "react",
        ScriptedModel(reply),
        str(out),
        progress_seconds=0,
        settings=dict(model="scripted", seed=SEED, grouping="20", supplier_attempts=50),
    )
    save_records(os.path.join(out, "records.npz"), rec)  # as `agents run` does
    return out, rec, tools


@pytest.mark.slow
def test_a_policy_run_replays_to_identical_records_and_tool_results(env, policy_run, capsys):
    before = folder_state(policy_run)
    main(["agents", "replay", str(policy_run)])
    printed = capsys.readouterr().out
    lines = sum(len(read(os.path.join(policy_run, f"store_{s}", "tool_calls.jsonl"))) for s in range(STORES))
    assert (
        f"replay: {STORES} stores x {DAYS} days, records identical, {lines:,} tool calls identical" in printed
    )
    result = replay.replay(str(policy_run), env=env)  # the test session's engine programs
    assert result.identical and result.days == [DAYS] * STORES and result.calls == lines
    with np.load(policy_run / "records.npz") as want:
        for k in want.files:
            np.testing.assert_array_equal(getattr(result.records, k), want[k], err_msg=k)
    assert int(result.records.order_lines.sum()) > 0 and result.code_calls == 0
    assert folder_state(policy_run) == before  # nothing written into the run folder


def test_a_language_model_run_replays_identically_execute_code_included(env, llm_run):
    out, rec, _ = llm_run
    trace = read(os.path.join(out, "store_0", "tool_calls.jsonl"))
    inner = [r["tool"] for r in trace if r["call_source"] == "execute_code"]
    assert inner == (["view_inventory", "view_notes"] if SANDBOX else [])
    ends = [r for r in trace if r["tool"] == "end_today"]
    assert [r.get("reason") for r in ends] == [None, "5 consecutive invalid tool-call turns", None]
    result = replay.replay(str(out), env=env)
    assert result.identical, replay.format_mismatches(result.mismatches)
    assert result.code_calls == STORES and result.calls == sum(
        len(read(os.path.join(out, f"store_{s}", "tool_calls.jsonl"))) for s in range(STORES)
    )
    assert "execute_code calls replayed from their recorded inner calls" in result.notes[0]
    for k in vars(rec):
        np.testing.assert_array_equal(getattr(result.records, k), getattr(rec, k), err_msg=k)
    assert (rec.ordered[:, 0, 5] == 30).all() and rec.price_changed[:, 2, 5].all()
    if SANDBOX:  # the snippets run again: their output and inner calls are checked too
        rerun = replay.replay(str(out), env=env, rerun_code=True)
        assert rerun.identical and rerun.code_calls == 0, replay.format_mismatches(rerun.mismatches)


@pytest.mark.slow
def test_a_tampered_trace_is_reported_and_the_replay_exits_non_zero(env, policy_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(policy_run, run)
    path = run / "store_1" / "tool_calls.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    i = next(i for i, r in enumerate(records) if r["tool"] == "place_order" and r["rb_day"] == 2)
    records[i]["args"]["items"][0]["quantity"] += 7
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(SystemExit) as e:
        main(["agents", "replay", str(run), "--report", str(tmp_path / "report.json")])
    message = str(e.value)
    assert message.startswith(
        f"rbjax: replay of {STORES} stores x {DAYS} days differs from the run: records: "
    )
    assert "store 1 day 2" in message and "\n" not in message
    printed = capsys.readouterr().out
    assert re.search(r"^records: \d+ differences, first at store 1 day 2: \w+ differs", printed, re.M)
    assert re.search(r"^result: 1 difference, first at store 1 day 2: call \d+ place_order", printed, re.M)
    report = json.loads((tmp_path / "report.json").read_text())
    assert not report["identical"] and {"records", "result"} <= {m["kind"] for m in report["mismatches"]}
    fields = {m.what.split()[0] for m in replay.replay(str(run), env=env).mismatches if m.kind == "records"}
    assert {"ordered", "order_cost", "funds"} <= fields


def test_folders_that_do_not_fit_are_one_line_errors(policy_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(policy_run, run)

    def error(*extra):
        with pytest.raises(SystemExit) as e:
            main(["agents", "replay", str(run), *extra])
        assert "\n" not in str(e.value)
        return str(e.value)

    path = run / "store_0" / "tool_calls.jsonl"
    text = path.read_text()
    path.write_text(text.replace('"rb_day": 2', '"rb_day": 3', 1))
    assert "rb_day 3 and rb_call 0 in day 2" in error()
    path.write_text(text + "not json\n")
    assert "not a trace record" in error()
    path.write_text(text)
    settings = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({k: v for k, v in settings.items() if k != "seed"}))
    assert "no seed in it" in error()
    (run / "run.json").write_text(json.dumps({**settings, "stores": 3}))
    assert "traces of stores [0, 1], run.json says 3 stores" in error()
    (run / "run.json").unlink()
    assert "holds no agents run" in error()
    shutil.rmtree(run)
    assert "not a folder" in error()
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="not a writable folder"):
        main(["agents", "rescore", str(policy_run), "--out", str(tmp_path / "file" / "out")])


def test_rescore_rebuilds_the_runs_table_and_four_stages_from_the_traces(policy_run, tmp_path, capsys):
    out = tmp_path / "rescored"
    out.mkdir()
    main(["agents", "rescore", str(policy_run), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "oracle_stores.csv: rescored identically" in printed
    assert "four_stage_metrics.csv: rescored identically" in printed
    table = pd.read_csv(out / "rescored_stores.csv", index_col="store")
    run_table = pd.read_csv(policy_run / "oracle_stores.csv", index_col="store")
    pd.testing.assert_frame_equal(table[run_table.columns], run_table, check_exact=True)
    four = pd.read_csv(out / "rescored_four_stage_metrics.csv", index_col="store")
    pd.testing.assert_frame_equal(four, pd.read_csv(policy_run / "four_stage_metrics.csv", index_col="store"))
    assert (table["total_tools_per_day"] > 50).all()
    # from the traces alone: no records.npz, no replay
    bare = tmp_path / "bare"
    shutil.copytree(policy_run, bare, ignore=shutil.ignore_patterns("records.npz", "*.csv", "*.png"))
    main(["agents", "rescore", str(bare), "--traces-only"])
    printed = capsys.readouterr().out
    assert "not rebuilt (--traces-only)" in printed
    alone = pd.read_csv(bare / "rescored_stores.csv", index_col="store")
    assert not set(rescore.ENGINE_COLUMNS) & set(alone.columns)
    columns = list(rescore.TRACE_COLUMNS)
    pd.testing.assert_frame_equal(alone[columns], run_table[columns], check_exact=True)


def test_rescore_of_a_language_model_run_equals_its_table_and_diagnose(env, llm_run):
    out, rec, tools = llm_run
    table, four = rescore.rescore(str(out), env=env)
    expected = store_metrics(rec).join(tools)  # the per-store CSV of `agents run`
    pd.testing.assert_frame_equal(table, expected, check_exact=True, check_names=False)
    assert (table["tokens_per_day"] > 0).all() and table["acted_per_day"].notna().all()
    main(["agents", "diagnose", str(out)])
    want = pd.read_csv(out / "four_stage_metrics.csv", index_col="store")
    pd.testing.assert_frame_equal(four, want, check_exact=True)
    assert four["s2_query_depth"].notna().all()


def test_replay_refuses_other_keys_and_notes_another_engine(env, llm_run, tmp_path):
    """run.json's digests pin the run: keys that are not the run's are refused (one line); an engine whose
    configuration or parameters differ is said in the result's notes (another catalogue or rbjax version)."""
    out, _, _ = llm_run
    run = tmp_path / "run"
    shutil.copytree(out, run)
    settings = json.loads((run / "run.json").read_text())
    assert settings["keys"].startswith("sha256:") and settings["engine"].startswith("sha256:")
    (run / "run.json").write_text(json.dumps({**settings, "keys": "sha256:0123456789abcdef"}))
    with pytest.raises(ValueError, match=r"the run's keys \(sha256:0123456789abcdef\) are not these"):
        replay.replay(str(run), env=env)
    with pytest.raises(SystemExit) as e:
        main(["agents", "replay", str(run)])
    assert "are not these" in str(e.value) and "\n" not in str(e.value)
    (run / "run.json").write_text(json.dumps({**settings, "engine": "sha256:0123456789abcdef"}))
    result = replay.replay(str(run), env=env)
    assert result.identical and any("engine digest" in n for n in result.notes), result.notes

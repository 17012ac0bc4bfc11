"""Runs of language-model agents that stop part-way: the run's identity and ``--resume``, used folders,
files cut or corrupt, endpoint failures that pause stores instead of scoring them, Ctrl-C, progress lines.
Two stores throughout (one engine compilation), scripted models or a local stub server."""

import asyncio
import json
import os
import signal

import jax
import numpy as np
import pytest
from chat_stub import ChatStub, Status, Stream
from llm_runs import END, STORES, FailsOn, play

from rbjax.agents.llm.client import ScriptedModel
from rbjax.agents.runs.llm_agents import RunPaused
from rbjax.agents.tools.trace import read
from rbjax.cli import main
from rbjax.cli.common import said


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for name in ("OPENAI_API_KEY", "API_KEY", "OPENROUTER_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def days_logged(out, s):
    return [r["day"] for r in read(os.path.join(out, f"store_{s}", "tokens.jsonl"))]


def agents_run(out, url, *extra, days=3, seed=7):
    line = f"agents run --model m --framework react --stores {STORES} --days {days} --seed {seed}"
    line += f" --base-url {url} --retries 0 --timeout 5 --progress-seconds 0 --out {out}"
    main([*line.split(), *extra])


def stub_failing_from(request):
    """Ends every day; from request ``request`` on, every reply is HTTP 401."""
    return ChatStub(lambda body, n: Status(401) if n >= request else Stream(END))


# ---------------------------------------------------------------------------------------------- item 4
def test_an_endpoint_failure_pauses_the_store_unscored_and_the_others_finish(env, params, tmp_path):
    whole, *_ = play(env, params, tmp_path / "whole", FailsOn())
    with pytest.raises(RunPaused) as e:
        play(env, params, tmp_path / "cut", FailsOn(day=2, store=1))
    message = str(e.value)
    assert "the endpoint failed: connection refused to http://127.0.0.1:9/v1" in message
    assert "1 of 2 stores paused on day 2, 1 finished" in message and message.endswith("continue with resume")
    assert said(e.value).endswith("continue with --resume")  # the command line names its flag
    assert "\n" not in message
    cut = tmp_path / "cut"
    assert days_logged(cut, 0) == [1, 2, 3] and days_logged(cut, 1) == [1]  # the failed day is not scored
    assert not any(r["error"] for r in read(os.path.join(cut, "store_1", "turns.jsonl")))
    assert not (cut / "records.npz").exists()
    resumed, *_ = play(env, params, cut, FailsOn(), resume=True)
    for k in vars(whole):
        np.testing.assert_array_equal(getattr(whole, k), getattr(resumed, k), err_msg=k)
    assert days_logged(cut, 1) == [1, 2, 3]


@pytest.mark.parametrize("endpoint", ["dead", "401"])
def test_agents_run_against_a_failing_endpoint_ends_with_one_line_and_scores_nothing(
    endpoint, tmp_path, capsys
):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        if endpoint == "dead":
            agents_run(out, "http://127.0.0.1:9/v1")
        else:
            with stub_failing_from(0) as stub:
                agents_run(out, stub.url)
    message = str(e.value)
    url = "http://127.0.0.1:9/v1" if endpoint == "dead" else "http://127.0.0.1:"
    assert message.startswith(f"rbjax: the endpoint {url}") and " failed: " in message
    assert "\n" not in message
    assert f"{STORES} of {STORES} stores paused on day 1" in message and "continue with --resume" in message
    for s in range(STORES):
        assert days_logged(out, s) == [] and not (out / f"store_{s}" / "checkpoint.npz").exists()
    assert not (out / "records.npz").exists() and not list(out.glob("*_stores.csv"))
    assert "final_net_worth" not in capsys.readouterr().out  # no table


# ---------------------------------------------------------------------------------------------- items 1, 2
@pytest.mark.slow
def test_resume_refuses_another_identity_and_a_fresh_run_refuses_a_used_folder(tmp_path):
    out = tmp_path / "run"
    fail_from = [2 * STORES]  # days 1 and 2 played, then the endpoint fails (the base URL is the run's)
    with ChatStub(lambda body, n: Status(401) if n >= fail_from[0] else Stream(END)) as stub:
        with pytest.raises(SystemExit, match="paused on day 3"):
            agents_run(out, stub.url, seed=7)
        saved = (out / "run.json").read_bytes()
        identity = json.loads(saved)
        for field in ("model", "base_url", "framework", "seed", "stores", "days", "prompts", "engine"):
            assert field in identity, field
        assert identity["rbjax_version"] and identity["sampling"]["max_tokens"] == 10_000
        assert identity["rules"]["max_turns"] == 50 and identity["rules"]["max_input_tokens"] == 50_000
        for seed, extra, differ in [
            (8, [], "seed 7, not 8"),
            (7, ["--max-turns", "9"], "rules.max_turns 50, not 9"),
            (7, ["--trim-tokens", "1000"], "rules.max_input_tokens 50000, not 1000"),
            (7, ["--max-tokens", "77"], "sampling.max_tokens 10000, not 77"),
            (7, ["--context-tokens", "9000"], "context_tokens None, not 9000"),
        ]:
            with pytest.raises(SystemExit) as e:
                agents_run(out, stub.url, "--resume", *extra, seed=seed)
            assert differ in str(e.value) and "\n" not in str(e.value), str(e.value)
            assert (out / "run.json").read_bytes() == saved  # never rewritten
        with pytest.raises(SystemExit) as e:  # a fresh run into the folder: refused, whatever its seed
            agents_run(out, stub.url, seed=8)
        assert "holds a run already" in str(e.value) and "--overwrite" in str(e.value)
        assert (out / "run.json").read_bytes() == saved and days_logged(out, 0) == [1, 2]
        fail_from[0] = 10**9
        agents_run(out, stub.url, "--resume", seed=7)
    assert days_logged(out, 0) == [1, 2, 3] and (out / "records.npz").exists()
    (out / "notes.txt").write_text("mine")
    (out / "store_5").mkdir()  # a store of an earlier, bigger run
    with ChatStub(lambda body, n: Stream(END)) as stub:
        agents_run(
            out,
            stub.url,
            "--overwrite",
            "--no-stream",
            "--compact-catalog",
            "--layout",
            "reference",
            seed=8,
            days=2,
        )
    identity = json.loads((out / "run.json").read_text())
    assert identity["seed"] == 8 and days_logged(out, 0) == [1, 2]
    assert identity["rules"]["compact_catalog"] and identity["rules"]["layout"] == "reference"
    day_message = stub.requests[0]["messages"][-1]["content"]  # the reference layout: the day message last
    assert "## SKU Catalog" in day_message and "SKU id | shelf life in days" in day_message
    assert (out / "notes.txt").read_text() == "mine" and not (out / "store_5").exists()
    assert all(r.get("stream") is not True for r in stub.requests)  # --no-stream reached the client


# ---------------------------------------------------------------------------------------------- item 3
def test_a_log_shorter_than_its_checkpoint_is_an_error_never_padded(env, params, tmp_path):
    with pytest.raises(RunPaused):
        play(env, params, tmp_path, FailsOn(day=3))
    turns = tmp_path / "store_1" / "turns.jsonl"
    turns.write_bytes(turns.read_bytes()[:10])  # as a fresh run cutting the logs and killed used to leave
    with pytest.raises(ValueError, match=r"store_1/turns.jsonl: 10 bytes, less than the .* its checkpoint"):
        play(env, params, tmp_path, FailsOn(), resume=True)
    assert b"\0" not in turns.read_bytes() and len(turns.read_bytes()) == 10


def test_corrupt_run_files_are_one_line_errors_naming_the_file(env, params, tmp_path):
    with pytest.raises(RunPaused):
        play(env, params, tmp_path, FailsOn(day=2))
    good = (tmp_path / "run.json").read_bytes()
    (tmp_path / "run.json").write_bytes(b"\0" * 40)
    with pytest.raises(ValueError, match=r"run.json: not a readable run.json"):
        play(env, params, tmp_path, FailsOn(), resume=True)
    (tmp_path / "run.json").write_bytes(good)
    (tmp_path / "store_0" / "checkpoint.npz").write_bytes(b"\0" * 40)
    with pytest.raises(ValueError, match=r"store_0/checkpoint.npz: not a readable checkpoint"):
        play(env, params, tmp_path, FailsOn(), resume=True)


def test_atomic_files_are_whole_or_absent(tmp_path):
    from rbjax.files.record_files import atomic_file

    path = tmp_path / "result.csv"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_file(str(path)) as f:
        f.write("half of the new")
        raise RuntimeError("killed")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["result.csv"]
    with atomic_file(str(path)) as f:
        f.write("new")
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["result.csv"]


# ---------------------------------------------------------------------------------------------- item 6
@pytest.mark.slow
def test_ctrl_c_ends_with_one_line_naming_resume_and_status_130(tmp_path, monkeypatch, capsys):
    from rbjax.agents.llm import client as llm

    class Interrupted:
        def __init__(self, *args, **kw):
            self.n = 0

        async def complete(self, messages, tools=None):
            self.n += 1
            if self.n > 2 * STORES:  # Ctrl-C while a request waits
                signal.raise_signal(signal.SIGINT)
                await asyncio.sleep(30)
            return await ScriptedModel([END]).complete(messages, tools)

    monkeypatch.setattr(llm, "OpenAIChatModel", Interrupted)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        agents_run(out, "http://127.0.0.1:9/v1")
    err = capsys.readouterr().err
    assert e.value.code == 130 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("rbjax")]
    assert len(lines) == 1 and "--resume" in lines[0]
    assert days_logged(out, 0) == [1, 2]


def test_a_progress_line_comes_while_no_day_has_ended(env, params, tmp_path, capsys):
    slow = ScriptedModel([], latency=0.4)  # every reply ends the day, after 0.4 s
    play(env, params, tmp_path, slow, days=1, progress_seconds=0.1)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("agents:")]
    before = [line for line in lines if "days 0-0" in line]
    assert before and "model calls" in before[0] and "requests" in before[0] and "tokens" in before[0]


def test_progress_rates_after_a_resume_count_only_this_process(monkeypatch, capsys):
    from types import SimpleNamespace

    from rbjax.agents.runs import loop as run

    clock = [100.0, 110.0, 110.0]
    monkeypatch.setattr(run.time, "perf_counter", lambda: clock.pop(0) if clock else 200.0)
    progress = run.Progress(2, 0, done={0: 30, 1: 30})  # 60 store-days played before this process
    progress.day_done(SimpleNamespace(store=0, calls=0))
    progress.day_done(SimpleNamespace(store=1, calls=0))
    progress.print(120.0)  # 2 days in 20 s of this process: 0.10 a second, not 62 / 20
    err = capsys.readouterr().err
    assert "62 store-days (2 in this process), 0.10 agent-days/s" in err


def test_an_engine_error_still_propagates(env, params, tmp_path):
    """Only endpoint failures pause a store; any other error stops the run as before."""

    def make(s):
        class Model:
            async def complete(self, messages, tools=None):
                raise RuntimeError("a bug")

        return Model()

    with pytest.raises(RuntimeError, match="a bug"):
        play(env, params, tmp_path, make, days=1)


def test_resume_compares_everything_but_the_base_url(tmp_path):
    from rbjax.agents.runs.identity import check_resume

    identity = {"model": "m", "base_url": "http://127.0.0.1:8000/v1", "seed": 7, "rules": {"max_turns": 50}}
    (tmp_path / "run.json").write_text(json.dumps(identity))
    check_resume(str(tmp_path), identity | {"base_url": "http://127.0.0.1:8001/v1"})  # the server moved
    with pytest.raises(ValueError, match=r"rules.max_turns 50, not 9"):
        check_resume(str(tmp_path), identity | {"rules": {"max_turns": 9}})


def test_a_password_in_the_base_url_never_reaches_run_json(env, params):
    """run.json records the endpoint without its user information (``run_identity``, which the runner writes)."""

    from rbjax.agents.llm.frameworks import Rules
    from rbjax.agents.llm.prompts import Prompts
    from rbjax.agents.runs.identity import run_identity

    url = "https://alice:s3cret-pass@models.example.org:8443/v1"
    keys = jax.random.split(jax.random.key(0), 2)
    identity = run_identity(env, params, keys, "react", Rules(), Prompts(), {}, {"base_url": url})
    assert identity["base_url"] == "https://models.example.org:8443/v1"
    assert "s3cret" not in json.dumps(identity) and "alice" not in json.dumps(identity)

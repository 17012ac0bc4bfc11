"""rbjax.cli: the README's main job, the sweep and one-line errors, run as a user would (PPO train and eval:
tests/rl/test_rl.py)."""

import json
import subprocess
import sys
from pathlib import Path

import golden
import numpy as np
import pandas as pd
import pytest
from helpers import cli_error


def rbjax(*args, check=True):
    """Run ``python -m rbjax ARGS`` (a single string is split on spaces)."""
    if len(args) == 1:
        args = args[0].split()
    return subprocess.run([sys.executable, "-m", "rbjax", *args], capture_output=True, text=True, check=check)


@pytest.mark.slow
def test_cli_info_and_oracle(tmp_path):
    assert "96 products in 20 categories" in rbjax("info").stdout
    # the golden fixture's oracle stores for 180 days, 30 per call: the golden test's compiled program
    r = rbjax(
        f"--devices 1 oracle --stores {golden.STORES} --days 180 --seed {golden.SEED} --progress {golden.DAYS} "
        f"--records --out {tmp_path}"
    )
    assert "oracle policy, 4 stores x 180 days" in r.stdout and "final_net_worth" in r.stdout
    assert r.stderr.count("rollout: 4 stores, day ") == 6
    table = pd.read_csv(tmp_path / "oracle_stores.csv")
    assert len(table) == golden.STORES and (table.survival_days == 180).all()
    assert (tmp_path / "oracle_net_worth.png").exists() and (tmp_path / "oracle_survival.png").exists()
    assert (
        "survival: 4/4 stores alive after 180 days (100.0 %)" in r.stdout
        and "95 % CI of the mean" in r.stdout
    )
    want = golden.expected_records("oracle")
    with np.load(tmp_path / "records.npz") as got:
        assert sorted(got.files) == sorted(want)
        for name in got.files:
            assert np.array_equal(got[name][:, : golden.DAYS], want[name], equal_nan=True), name


@pytest.mark.slow
def test_cli_sweep_writes_tables_and_plots(tmp_path):
    # the sweep of notebooks/oracle_sweep.ipynb, on one device: the compiled program is shared
    out = rbjax(
        f"--devices 1 sweep --multiplier 3,6 --shelf 30,40 --seeds 4 --days 60 --out {tmp_path}"
    ).stdout
    table = pd.read_csv(tmp_path / "sweep.csv")
    assert len(table) == 16 and set(table.multiplier) == {3, 6} and set(table.shelf_capacity) == {30, 40}
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 4 and (tmp_path / "final_net_worth.png").exists()
    # the whole summary, one row per point (multiplier, shelf, net worth mean and sd, survival), the best marked
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["3"], ["6"])]
    assert len(rows) == 4 and sum(row[-1] == "mean" for row in rows) == 1, out


def test_cli_rejects_bad_input(tmp_path, capsys):
    # one as a user runs it: a fresh process, one line on stderr, no traceback
    r = rbjax("run --stores 0", check=False)
    assert r.returncode == 2 and "--stores" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for args, names in [  # the rest in this process (any other exception than SystemExit fails the test)
        ("sweep --multiplier 4,x", "--multiplier"),
        ("sweep", "at least one parameter"),
        (f"run --data {tmp_path / 'nowhere'}", "--data"),
        ("run --days 5000", "--days 5000"),
        ("eval --policy finetuned --stores 8 --days 5", "--checkpoint DIR: none is shipped"),
        (f"eval --policy ppo --checkpoint {tmp_path / 'missing'} --days 5", "not a PPO checkpoint"),
    ]:
        err = cli_error(capsys, args)
        assert names in err and len(err.strip().splitlines()) == 1, (args, err)


def test_cli_checks_out_is_writable_before_any_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    r = rbjax(f"oracle --stores 2 --days 2 --out {blocker / 'sub'}", check=False)
    assert r.returncode != 0 and "--out" in r.stderr and "rollout" not in r.stderr


def test_cli_points_the_compilation_cache_at_its_folder(tmp_path, monkeypatch):
    """rbjax.setup's cache part (the device split, which needs a fresh process, is left out:
    tests/perf/test_perf.py)."""
    import jax

    import rbjax
    from rbjax.perf import devices

    monkeypatch.setattr(devices, "split_cpu", lambda n=None: n)
    before = jax.config.jax_compilation_cache_dir
    try:
        rbjax.setup(cache=str(tmp_path / "a"))
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "a")
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "b"))
        rbjax.setup()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "b")
        rbjax.setup(cache="none")  # off: the setting is left alone
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "b")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_cli_rejects_bad_devices_seeds_learning_rates_and_fractional_integer_leaves(capsys):
    for args, names in [
        ("--devices 0 run", "--devices"),
        ("--devices 9999 run", "--devices"),
        ("run --seed 99999999999", "--seed"),
        ("train ppo --lr nan --steps 1000", "PPOConfig.lr"),
        ("sweep --capacity 1.5", "EnvParams.capacity is an integer leaf"),
        ("oracle --supplier-attempts 0", "--supplier-attempts 0: EnvConfig.supplier_attempts must be >= 1"),
        (
            "run --policy plan --plan-horizon 0",
            "--plan-horizon must be an int >= 1, got 0",
        ),  # PlanSettings' words
        (
            "run --policy plan --plan-futures 1 --plan-halving",
            "--plan-halving needs --plan-futures 2 or more",
        ),
    ]:
        err = cli_error(capsys, args)
        assert names in err and len([line for line in err.splitlines() if line.startswith("rbjax:")]) == 1, (
            args,
            err,
        )


def test_cli_warns_and_runs_uncached_when_the_cache_is_not_writable(tmp_path, capsys, monkeypatch):
    import jax

    import rbjax
    from rbjax.perf import devices

    monkeypatch.setattr(devices, "split_cpu", lambda n=None: n)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    before = jax.config.jax_compilation_cache_dir
    rbjax.setup(cache=str(blocker / "cache"))
    assert "running without the compilation cache" in capsys.readouterr().err
    assert jax.config.jax_compilation_cache_dir == before


def test_cli_streams_chunks_and_exits_non_zero_when_a_store_ends_non_finite(tmp_path, monkeypatch, capsys):
    """rollout_chunks replaced by 3 fake stores in chunks of 2 and 1: the per-store table and the streamed
    records.npz hold all 3 stores in order, then one line and exit status 1 for the NaN store."""
    import numpy as np

    from rbjax.cli import main
    from rbjax.results.records import DaySummary
    from rbjax.runners import rollout as rollout_module
    from rbjax.runners.rollout import Chunk

    shape = (3, 2)
    worth = 30_000.0 + np.arange(6, dtype=np.float32).reshape(shape)
    worth[1, -1] = np.nan
    fields = dict.fromkeys(DaySummary.__dataclass_fields__, np.zeros(shape, np.int32))
    whole = DaySummary(**fields | dict(net_worth=worth, funds=worth, alive=np.ones(shape, bool)))

    def fake_chunks(env, policy, policy_params, env_params, keys, days, store_chunk=None, **kw):
        assert len(keys) == 3 and days == 2 and store_chunk == 2
        for start, stop in ((0, 2), (2, 3)):
            yield Chunk(
                start, stop, whole.replace(**{k: v[start:stop] for k, v in vars(whole).items()}), None
            )

    monkeypatch.setattr(rollout_module, "rollout_chunks", fake_chunks)
    # --devices 1: in this process main() keeps the test process's one device; left out, a first call would split
    # the worker into one device per core for the tests after it
    line = "--devices 1 run --policy null --stores 3 --days 2 --store-chunk 2 --records --out"
    with pytest.raises(SystemExit, match="1 of 3 stores ended with a non-finite"):
        main([*line.split(), str(tmp_path)])
    table = pd.read_csv(tmp_path / "null_stores.csv")
    assert table.store.tolist() == [0, 1, 2] and table.final_net_worth[2] == 30_005.0
    saved = np.load(tmp_path / "records.npz")
    assert np.array_equal(saved["net_worth"], worth, equal_nan=True) and saved["alive"].shape == shape
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no scratch files left


def test_cli_run_killed_part_way_leaves_no_outputs_that_look_new(tmp_path, monkeypatch):
    """A run stopped after its first chunk leaves neither its own outputs nor the previous run's
    records.npz and CSV (they would look like its own), and no scratch folder."""
    import numpy as np

    from rbjax.cli import main
    from rbjax.results.records import DaySummary
    from rbjax.runners import rollout as rollout_module
    from rbjax.runners.rollout import Chunk

    shape = (2, 2)
    fields = dict.fromkeys(DaySummary.__dataclass_fields__, np.zeros(shape, np.int32))
    first = DaySummary(**fields | dict(net_worth=np.ones(shape, np.float32), alive=np.ones(shape, bool)))

    def killed(*args, **kw):
        yield Chunk(0, 2, first, None)
        raise KeyboardInterrupt

    (tmp_path / "records.npz").write_bytes(b"the previous run's")
    (tmp_path / "null_stores.csv").write_text("store\n0\n")
    (tmp_path / "null_survival.png").write_bytes(b"the previous run's")
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.setattr(rollout_module, "rollout_chunks", killed)
    line = "--devices 1 run --policy null --stores 4 --days 2 --store-chunk 2 --records --out"
    with pytest.raises(KeyboardInterrupt):
        main([*line.split(), str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_cli_refuses_out_of_range_numbers_and_names_bad_files(tmp_path, capsys):
    store = tmp_path / "store_0"
    store.mkdir()
    (store / "tool_calls.jsonl").write_text('{"day": 1}\n{not json\n')
    for args, names in [
        ("oracle --stores 1000000000000", "--stores must be at most 100,000,000"),
        ("sweep --seeds 1000000000000 --rent 500", "--seeds must be at most"),
        ("sweep --capacity 1e12 --seeds 2", "'capacity' must fit int32"),
        ("run --progress -1", "--progress must be >= 0"),
        ("run --records", "--records needs --out"),
        ("bench --batches 0", "--batches must all be >= 1"),
        ("bench --batches 4,x", "--batches needs comma-separated whole numbers"),
        (
            f"agents run --model m --base-url http://127.0.0.1:9/v1 --out {tmp_path / 'o'} --max-tokens -5",
            "--max-tokens must be >= 1",
        ),
        (f"info --data {tmp_path / 'nowhere'}", "--data"),
        (f"agents diagnose {tmp_path}", "tool_calls.jsonl, line 2: not a trace record"),
        # each swept value checked before any work, its flag named
        ("sweep --shelf 30,-5 --seeds 1", "--shelf -5: EnvParams.shelf_capacity must be in 0..1,000,000"),
        (
            "sweep --policy finetuned_obs --rent 500 --seeds 1",
            "--policy finetuned_obs needs --checkpoint DIR",
        ),
        ("sweep --rent 500 --bogus", "unrecognized arguments: --bogus (see rbjax sweep --help)"),
        ("agents run --model m", "(see rbjax agents run --help)"),
        (f"lm tasks --from-states {tmp_path / 'nope'} --days 3 --out x", "--from-states"),
    ]:
        err = cli_error(capsys, args)
        one_line = len([line for line in err.splitlines() if line.startswith("rbjax:")]) == 1
        assert names in err and one_line and "Traceback" not in err, (args, err)
        assert "sweep:" not in err  # nothing started
    assert "nope: not a folder" in cli_error(
        capsys, f"lm tasks --from-states {tmp_path / 'nope'} --days 3 --out x"
    )


def test_sweep_takes_whole_numbers_for_float_leaves_and_names_the_bad_point():
    import rbjax
    from rbjax.runners.sweep import sweep

    env = rbjax.Env()
    points = rbjax.grid(rent=[500, -1])  # 500 (an int) is a valid float32 rent: the check stops at point 1
    with pytest.raises(
        ValueError, match=r"sweep point 1 \{'rent': -1\}: EnvParams.rent must be in \[0, 1e\+09\]"
    ):
        sweep(env, lambda *a: None, None, env.default_params(), points, seeds=1, days=1)


def test_cli_takes_the_global_options_before_or_after_the_command(capsys):
    from rbjax.cli import parser

    ap = parser()
    args = ap.parse_args("oracle --stores 8 --days 5 --devices 1".split())
    assert args.devices == 1 and args.cache is None and args.stores == 8
    args = ap.parse_args("--devices 2 --cache a oracle --devices 1".split())  # after the command wins
    assert args.devices == 1 and args.cache == "a"
    assert ap.parse_args("--devices 2 run".split()).devices == 2
    for line in ("info", "run", "eval", "sweep", "train ppo", "bench", "agents run --model m --out o"):
        args = ap.parse_args([*line.split(), "--devices", "1", "--cache", "none"])
        assert (args.devices, args.cache) == (1, "none"), line
    args = ap.parse_args("agents diagnose d --cache none".split())
    assert args.cache == "none" and args.runs == ["d"]
    err = cli_error(capsys, "oracle --devices 0")
    assert "--devices must be between 1" in err and len(err.strip().splitlines()) == 1


def test_cli_help_shows_the_defaults_and_describes_every_sweep_parameter(capsys):
    from rbjax.cli import main, parser

    for line, default in (
        ("train ppo", "(ppo: 512; a student's fine-tune: 32, 2 copies each)"),
        ("train distill", "rounds of play, label, fit (default: 3)"),
        ("oracle", "(default: 1000)"),
        ("sweep", "(default: 16)"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main([*line.split(), "--help"])
        assert exit_.value.code == 0 and default in " ".join(capsys.readouterr().out.split()), line
    sweep = parser()._subparsers._group_actions[0].choices["sweep"]
    for action in sweep._actions:
        assert action.help and action.help.strip(), action.dest


def test_sweep_prints_one_row_per_point_and_marks_the_best():
    import rbjax
    from rbjax.cli.sweep import format_summary
    from rbjax.results import metrics

    table = pd.DataFrame(
        {
            "multiplier": [2, 2, 4, 4, 6, 6],
            "shelf_capacity": [30, 40] * 3,
            "final_net_worth": [1e5, 2e5, 3e5, 2.5e5, np.nan, 1.0],
            "survival_days": [180, 170, 180, 180, 100, 90],
        }
    )
    summary = metrics.summary(table, by=["multiplier", "shelf_capacity"])
    text = format_summary(rbjax.SweepResult(table, summary, ["multiplier", "shelf_capacity"], 1.0, 6))
    rows = [line.split() for line in text.splitlines()[1:]]
    assert len(rows) == 6 and [row[:2] for row in rows][2] == ["4", "30"]
    assert rows[2][2:] == ["300,000", "n/a", "180.0", "<-", "best", "mean"]  # one seed per point: no sd
    assert sum("best" in row for row in rows) == 1 and rows[4][2] == "n/a"


def _day_info(alive):
    """DayInfo records [stores, days, 2 products] of zeros, ``alive`` [stores, days]."""
    from rbjax.state import DayInfo

    per_product = {"sold", "returned", "expired", "demand", "stockout", "reviews", "stars", "ordered"}
    per_product |= {"delivered", "price_changed"}
    shape = alive.shape
    fields = {k: np.zeros(shape + (2,) * (k in per_product), np.int32) for k in DayInfo.__dataclass_fields__}
    worth = 30_000.0 + np.arange(alive.size, dtype=np.float32).reshape(shape)
    return DayInfo(**fields | dict(net_worth=worth, funds=worth, alive=alive))


def test_cli_run_prints_the_interval_and_survival_and_writes_the_survival_figure(
    tmp_path, monkeypatch, capsys
):
    """rollout_chunks replaced by 3 fake stores of 4 days, one stopping after day 2: the table gives the
    interval and the stores, one line the share alive at the end, --out the survival figure."""
    from rbjax.cli import main
    from rbjax.results.records import DaySummary
    from rbjax.runners import rollout as rollout_module
    from rbjax.runners.rollout import Chunk

    alive = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1]], bool)
    fields = dict.fromkeys(DaySummary.__dataclass_fields__, np.zeros(alive.shape, np.int32))
    worth = 30_000.0 + np.arange(12, dtype=np.float32).reshape(alive.shape)
    whole = DaySummary(**fields | dict(net_worth=worth, funds=worth, alive=alive))
    monkeypatch.setattr(rollout_module, "rollout_chunks", lambda *a, **kw: iter([Chunk(0, 3, whole, None)]))
    main([*"--devices 1 run --policy null --stores 3 --days 4 --out".split(), str(tmp_path)])
    out = capsys.readouterr().out
    assert "survival: 2/3 stores alive after 4 days (66.7 %)" in out
    assert "95 % CI of the mean" in out and "over 3 stores (fewer where a row says so); 95 % CI" in out
    days = next(line for line in out.splitlines() if line.startswith("survival_days")).split()
    assert days[1:8] == ["3.3", "±", "1.2", "2.0", "–", "4.0", "2.0"]  # mean, sd, interval, min over stores
    assert (tmp_path / "null_survival.png").read_bytes()[:4] == b"\x89PNG"


def test_agents_summary_and_diagnose_give_the_interval_and_survival(tmp_path, capsys):
    """The language-model summary (``rbjax agents run``) and ``rbjax agents diagnose`` of two run folders,
    one without records.npz: survival lines, survival.png in the run, survival_by_run.png beside
    four_stages.png."""
    from types import SimpleNamespace

    from rbjax.cli import agents, main
    from rbjax.files.record_files import save_records

    alive = np.array([[1, 1], [1, 0], [1, 1]], bool)
    rec = _day_info(alive)
    tools = pd.DataFrame(
        {k: [2.0, 3.0, 4.0] for k in ("direct_tools_per_day", "total_tools_per_day", "tokens_per_day")}
    )
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        for store in range(3):
            (run / f"store_{store}").mkdir(parents=True)
            end = {"tool": "end_today", "call_source": "direct", "result": {"result": {"sales_by_sku": {}}}}
            (run / f"store_{store}" / "tool_calls.jsonl").write_text(json.dumps(end) + "\n")
    args = SimpleNamespace(model="local/m", framework="react", out=str(a), days=2)
    agents.summary(args, rec, tools)
    out = capsys.readouterr().out
    assert "survival: 2/3 stores alive after 2 days (66.7 %)" in out and "95 % CI of the mean" in out
    assert (a / "survival.png").read_bytes()[:4] == b"\x89PNG"
    save_records(str(a / "records.npz"), rec)
    main(["agents", "diagnose", str(a), str(b)])
    out = capsys.readouterr().out
    assert out.count("95 % CI of the mean") == 2 and out.count("over 3 stores (n: those with a value)") == 2
    assert "survival: 2/3 stores alive after 2 days (66.7 %)" in out
    assert f"survival: no records.npz in {b}, left out of survival_by_run.png" in out
    acted = next(line for line in out.splitlines() if line.startswith("s1_acted_skus_per_day")).split()
    assert acted[2:10] == ["0.0000", "±", "0.0000", "0.0000", "–", "0.0000", "0.0000", "3"]  # ..., min, n
    price = next(line for line in out.splitlines() if line.startswith("s3_price_distance_pct"))
    assert price.split()[2:6] == ["n/a", "±", "n/a", "n/a"] and price.endswith("(3 stores without a value)")
    assert (a / "four_stages.png").exists() and (a / "survival_by_run.png").read_bytes()[:4] == b"\x89PNG"


def test_every_command_shows_in_the_top_level_help(capsys):
    """``rbjax --help`` names every command a user can run, nested ones (``train distill``, ``lm demos``) too."""
    import argparse

    from rbjax.cli import main, parser

    def leaves(p, path):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            return [
                leaf for name, q in subs[0].choices.items() for leaf in leaves(q, f"{path} {name}".strip())
            ]
        picks = [a for a in p._actions if a.choices and not a.option_strings]  # train's algorithm
        return [f"{path} {c}" for c in picks[0].choices] if picks else [path]

    commands = leaves(parser(), "")
    assert "train distill" in commands and "lm demos" in commands and len(commands) > 12
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    missing = [
        c for c in commands if f"rbjax {c}" not in text and f"| {c}" not in text and f"| {c} " not in text
    ]
    assert not missing, missing


def test_a_refusal_points_to_the_help_that_lists_its_flag(capsys):
    """A flag's refusal names the help of the command that has the flag, not the top level's, which lists none."""
    for line, help_of in (
        ("run --stores -4", "rbjax run --help"),
        ("oracle --days 0", "rbjax oracle --help"),
        ("agents run --model m --out o --stores 0", "rbjax agents run --help"),
        ("run --bogus 1", "rbjax run --help"),
    ):
        err = cli_error(capsys, line)
        assert f"(see {help_of})" in err and len(err.strip().splitlines()) == 1, (line, err)


def test_lm_tasks_help_cites_the_headroom_the_docs_use(capsys):
    """``lm tasks --help`` points to a --min-headroom value that docs/lm_training.md's example really uses."""
    import re
    from pathlib import Path

    from rbjax.cli import main

    with pytest.raises(SystemExit):
        main(["lm", "tasks", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    cited = re.search(r"docs/lm_training.md's example keeps ([0-9.]+)", text)
    assert cited, text
    docs = (Path(__file__).parents[2] / "docs" / "lm_training.md").read_text()
    assert f"--min-headroom {cited.group(1)}" in docs


def test_a_runs_rate_says_what_it_includes():
    """The header's store-days/s: over the days alone where the run timed them, else said to include the rest."""
    from rbjax.cli.run import run_times

    timed = run_times(elapsed=12.0, opening=10.0, days=2.0, store_days=1000)
    assert "500 store-days/s over the days (2.0 s)" in timed and "10.0 s opening the stores" in timed
    whole = run_times(elapsed=200.0, opening=0.0, days=0.0, store_days=1000)
    assert "5 store-days/s with the compiling, the opening and the snapshots included" in whole


def test_checkpoint_help_names_every_kind_of_learned_policy(capsys):
    """--checkpoint loads PPO runs, students and fine-tunes: each command's help says so."""
    from rbjax.cli import main

    for line in ("run", "eval", "sweep", "agents run"):
        with pytest.raises(SystemExit):
            main([*line.split(), "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for writer in ("rbjax train ppo`", "rbjax train distill`", "rbjax train ppo --init STUDENT`"):
            assert writer in text, (line, writer)


@pytest.mark.slow
def test_every_learned_policy_runs_from_its_shipped_checkpoint_as_the_readme_rows_run_it(tmp_path):
    """A new user's tries, each a fresh process: the registry from ``rbjax.policies`` alone (nothing registered
    by importing ``rbjax``) and ``rbjax run --policy ppo`` with no checkpoint (a bare ``rbjax eval``, its default
    policy ppo greedy as the README's row, runs in tests/cli/test_default_devices.py); every name ``--policy``
    takes, ``--reference`` takes."""
    fresh = "from rbjax.policies import make; f, p = make('ppo'); print(type(p).__name__, bool(p.greedy))"
    r = subprocess.run([sys.executable, "-c", fresh], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["PPOPolicyParams", "False"], r.stderr
    small = "--stores 2 --days 3 --supplier-attempts 1 --progress 0"
    assert "ppo policy, 2 stores x 3 days" in rbjax(f"run --policy ppo {small} --no-greedy").stdout

    from rbjax.cli import parser
    from rbjax.policies import NAMES

    commands = parser()._subparsers._group_actions[0].choices
    flags = {f: a.choices for a in commands["run"]._actions for f in a.option_strings}
    assert flags["--reference"] == flags["--policy"]
    assert commands["eval"].parse_args([]).greedy is True  # the README's PPO row is the greedy policy
    agents_run = commands["agents"]._subparsers._group_actions[0].choices["run"]
    flags = {f: a.choices for a in agents_run._actions for f in a.option_strings}
    assert list(flags["--reference"]) == list(NAMES)  # every model "policy:NAME" it plays


def test_train_ppo_help_states_the_measured_time_of_its_defaults(capsys):
    """The figures ``rbjax train ppo --help`` gives are the shipped run's curve and the fine-tune's record."""
    import rbjax
    from rbjax.rl.ppo import PPOConfig

    with pytest.raises(SystemExit):
        __import__("rbjax.cli", fromlist=["main"]).main(["train", "ppo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    last = pd.read_csv(rbjax.PPO_CHECKPOINT / "curve.csv").iloc[-1]
    rate = last.store_days / last.wall_s
    assert f"{int(last.store_days):,} in {last.wall_s:.0f} s" in text
    assert f"about {round(rate, -2):,.0f} store-days/s" in text
    minutes = PPOConfig().total_steps / rate / 60
    assert f"{PPOConfig().total_steps:,} store-days take about {minutes:.1f} minutes" in text
    with open(Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "finetune.json") as f:
        rows = json.load(f)["policies"]
    for name, kind in (("finetuned_belief", "belief"), ("finetuned", "privileged")):
        assert f"{rows[name]['train_s']:,.0f} s ({kind})" in text

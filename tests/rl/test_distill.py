"""rbjax.rl.distill: the students read what they may, choose among the planner's candidates, learn the planner's
choice; a round plays, labels and fits; checkpoints load through the registry and the CLI.

Small sizes throughout (a few stores, days, futures); the shipped students' table rows are checked in
``test_shipped_students_reproduce_their_rows``.
"""

import json
import subprocess
import sys
from pathlib import Path

import golden
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import cli_error, rbjax_commands

import rbjax
from rbjax import policies
from rbjax.policies.planner import candidate_actions
from rbjax.results import metrics
from rbjax.rl.distill import (
    DistillConfig,
    Labels,
    LabelSettings,
    Student,
    StudentConfig,
    distill,
    fit,
    load,
    save,
)
from rbjax.state import Privileged

RESULTS = Path(__file__).parents[2] / "benchmarks" / "results" / "distill.json"
STORES = golden.STORES  # the shipped students replayed on the golden batch's size
TINY = DistillConfig(
    rounds=2,
    labels=LabelSettings(stores=2, label_days=2, days=5, futures=2, horizon=3),
    epochs=2,
    batch=2,
)
L = TINY.labels
TINY_FLAGS = (  # TINY as ``rbjax train distill`` flags (the fixture's episodes, seed 0)
    f"--stores {L.stores} --days {L.days} --label-days {L.label_days} --rounds {TINY.rounds} --epochs "
    f"{TINY.epochs} --batch {TINY.batch} --plan-futures {L.futures} --plan-horizon {L.horizon}"
)


@pytest.fixture(scope="module")
def morning(reset, params):
    obs, state = reset(jax.random.key(3), params)
    return obs, state


def garbage(privileged: Privileged, seed: int) -> Privileged:
    """Every hidden field replaced by noise (and no state or params to plan with)."""
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    return Privileged(
        quote_quality=jax.random.uniform(k1, privileged.quote_quality.shape, minval=1, maxval=5),
        news_need=jax.random.uniform(k2, privileged.news_need.shape, minval=-0.5, maxval=0.5),
        news_supply=jax.random.uniform(k3, privileged.news_supply.shape, minval=-0.5, maxval=0.5),
    )


@pytest.mark.slow  # compiles a student; the quick lane keeps to 5 minutes
def test_the_observed_student_reads_no_hidden_field(env, params, morning):
    """Its action, features and candidates are the same whatever the hidden fields hold; the privileged student's
    are not (so the comparison can fail)."""
    obs, state = morning
    real = env.privileged(state, params)
    for privileged, same in ((False, True), (True, False)):
        student = Student(StudentConfig(privileged=privileged))
        sp = student.init(jax.random.key(0))
        act = jax.jit(student)
        inputs = jax.jit(student.inputs)
        a, b = (
            jax.tree.leaves((act(sp, obs, p), inputs(sp.planner, obs, p))) for p in (real, garbage(real, 1))
        )
        equal = all(np.array_equal(x, y) for x, y in zip(a, b))
        assert equal == same, f"privileged={privileged}"


@pytest.mark.slow  # compiles a student; the quick lane keeps to 5 minutes
def test_scores_all_equal_play_the_anchors_action(env, params, morning):
    """A network whose scores tie picks candidate 0: the anchor's own action (the oracle's, for the privileged
    student), so a student departs from its anchor only where its network says so."""
    obs, state = morning
    student = Student(StudentConfig(privileged=True))
    sp = student.init(jax.random.key(0))
    sp = sp.replace(net=jax.tree.map(jnp.zeros_like, sp.net))
    got = jax.jit(student)(sp, obs, env.privileged(state, params))
    want = candidate_actions(
        sp.planner, student.anchor(sp.planner.base, obs, env.privileged(state, params)), obs
    )
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(jax.tree.map(lambda v: v[0], want))):
        np.testing.assert_array_equal(x, y)


def test_fit_learns_a_rule_the_features_hold():
    """Labels whose best candidate is 3 where the first store feature is positive, else 0: the fit's held-out
    agreement reaches 95 %, and the share of the planner's gain its picks keep 90 % (a rule it could not read
    would stay near the majority share)."""
    rng = np.random.default_rng(0)
    n, J, P = 2000, 96, 15
    store = rng.normal(size=(n, 5)).astype(np.float32)
    best = np.where(store[:, 0] > 0, 3, 0)
    values = rng.normal(size=(n, 9)).astype(np.float32) * 0.1
    values[np.arange(n), best] += 10.0
    labels = Labels(
        products=rng.normal(size=(n, J, P)).astype(np.float32),
        store=store,
        mask=np.ones((n, J), bool),
        values=values,
        day=np.zeros(n, np.int32),
    )
    student = Student(StudentConfig(privileged=True, hidden=16))
    sp = student.init(jax.random.key(0))
    _, stats = fit(student, sp, labels, DistillConfig(epochs=20, batch=64, lr=3e-3), jax.random.key(1))
    assert stats["agreement"] > 0.95 and stats["gain_kept"] > 0.9, stats


def test_an_aggregating_rounds_stats_are_of_its_own_labels():
    """Fitted on two rounds' labels, the stats are of the second round's: the planner departs from the anchor on
    none of its labels (it did on every one of the first round's), and its held-out labels are scored alone."""
    rng = np.random.default_rng(1)
    n, J, P = 400, 8, 15

    def labels(best):
        values = rng.normal(size=(n, 9)).astype(np.float32) * 0.1
        values[:, best] += 10.0
        return Labels(
            products=rng.normal(size=(n, J, P)).astype(np.float32),
            store=rng.normal(size=(n, 5)).astype(np.float32),
            mask=np.ones((n, J), bool),
            values=values,
            day=np.zeros(n, np.int32),
        )

    student = Student(StudentConfig(privileged=True, hidden=8))
    sp = student.init(jax.random.key(0), num_products=J)
    both = Labels.concat([labels(3), labels(0)])
    config = DistillConfig(epochs=1, batch=64)
    _, pooled = fit(student, sp, both, config, jax.random.key(1))
    _, own = fit(student, sp, both, config, jax.random.key(1), new_from=n)
    assert pooled["planner_departs"] == 0.5 and own["planner_departs"] == 0.0


def test_configs_from_before_aggregation_read_as_not_aggregating(tmp_path):
    d = DistillConfig().as_dict()
    del d["aggregate"]
    assert DistillConfig.from_dict(d).aggregate is False and DistillConfig().aggregate is True


def test_an_observed_checkpoint_without_the_supplier_evidence_says_to_train_again(env, tmp_path):
    """An observed student saved before its network read the supplier's evidence (12 features a product): one
    line saying so, not a shape error."""
    config = DistillConfig(student=StudentConfig(privileged=False))
    sp = Student(config.student).init(jax.random.key(0))
    net = jax.tree_util.tree_map_with_path(
        lambda path, x: x[:12] if "Dense_0" in jax.tree_util.keystr(path) and x.ndim == 2 else x, sp.net
    )
    save(tmp_path, sp.replace(net=net), config, pd.DataFrame({"round": [0]}), env)
    with pytest.raises(ValueError, match="train it again"):
        load(tmp_path, env)


@pytest.fixture(scope="module")
def tiny_run(env, params, tmp_path_factory):
    """(the folder of a two-round tiny recipe, its curve, its rounds' params, its progress lines), 5-day
    episodes; a progress line after every call of the labels' day loop (``every=0``)."""
    short = params.replace(horizon=np.int32(L.days))
    lines = []
    student, curve, rounds = distill(env, short, TINY, seed=0, progress=lines.append, every=0.0)
    out = tmp_path_factory.mktemp("distilled")
    save(out, student, TINY, curve, env)
    return out, curve, rounds, lines


@pytest.mark.slow
def test_a_recipe_plays_labels_and_fits_each_round(env, tiny_run):
    out, curve, rounds, _ = tiny_run
    assert list(curve["round"]) == [0, 1] and (curve.labels == 2 * 2).all()  # stores x label days
    assert list(curve.fitted_on) == [4, 8]  # round 1 fits on both rounds' labels (TINY aggregates)
    assert (curve.simulated_store_days == 4 * 9 * 2 * 3).all()  # labels x C x M x H
    assert np.isfinite(curve[["train_loss", "agreement"]].to_numpy()).all()
    # a share of the planner's gain, or NaN where its held-out labels had none (never a share of ~0)
    kept = curve["gain_kept"].to_numpy()
    assert (np.isnan(kept) | (np.abs(kept) < 10)).all(), kept
    # round 1 starts from round 0's weights and moves them
    assert not all(np.array_equal(a, b) for a, b in zip(*(jax.tree.leaves(r.net) for r in rounds)))
    params, config = load(out, env)
    assert config == TINY
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(rounds[-1])):
        np.testing.assert_array_equal(a, b)
    assert json.loads((out / "config.json").read_text())["distill"]["rounds"] == 2


@pytest.mark.slow
def test_a_round_reports_its_labels_days_call_by_call(tiny_run):
    """``labels.collect`` reports after every call of the one day loop (one day a call): each round's lines
    count its days, then the round's summary."""
    *_, lines = tiny_run
    for r in range(TINY.rounds):
        days = [line for line in lines if line.startswith(f"round {r}: day ")]
        assert [d.split(",")[0] for d in days] == [
            f"round {r}: day {d}/{L.days}" for d in range(1, L.days + 1)
        ]
        assert lines.index(days[-1]) + 1 == lines.index(
            next(x for x in lines if x.startswith(f"round {r}: 4 new"))
        )


def test_train_distill_help_names_its_own_options_and_its_time():
    """``rbjax train distill --help``, as a user runs it: distillation's options only (none of PPO's or the
    fine-tune's), and the default recipe's time as ``benchmarks/results/distill.json`` measured it."""
    out = subprocess.run(
        [sys.executable, "-m", "rbjax", "train", "distill", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    text = " ".join(out.stdout.split())
    for flag in "--student --rounds --label-days --explore --plan-futures --plan-horizon --batch".split():
        assert flag in text, flag
    ppo = "--ent-coef --minibatches --rollout-days --steps --supplier-prior --init --progress".split()
    for flag in (*ppo, "--critic-updates", "--kl-coef", "--eval-every", "ppo:", "fine-tune"):
        assert flag not in text, flag
    if RESULTS.exists():  # the figure the help states is the measured one
        seconds = json.loads(RESULTS.read_text())["curves"]["distilled"][0]["train_s"]
        assert f"about {round(seconds / 60)} minutes on 2 CPU cores ({seconds:,.0f} s measured" in text


@pytest.mark.slow
def test_the_registry_loads_a_student_by_its_kind(env, tiny_run, tmp_path):
    out, *_ = tiny_run
    student, sp = policies.make("distilled", env, str(out))
    assert isinstance(student, Student) and student.config.privileged
    with pytest.raises(ValueError, match="holds a privileged student: load it as the policy 'distilled'"):
        policies.make("distilled_obs", env, str(out))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="missing student.msgpack"):
        policies.make("distilled", env, str(tmp_path))


def test_train_distill_refuses_bad_settings_in_one_line(capsys, tmp_path):
    for line, words in (
        ("train distill --rounds 0", "DistillConfig.rounds must be an int >= 1"),
        ("train distill --label-days 200 --days 180", "label_days (200) exceeds days (180)"),
        ("train distill --explore 1.5", "explore must be in [0, 1]"),
        ("train distill --plan-horizon 0", "LabelSettings.horizon must be an int >= 1"),
        ("train distill --batch 0", "DistillConfig.batch must be an int >= 1"),
        ("train distill --init x", "unrecognized arguments: --init x (see rbjax train distill --help)"),
    ):
        err = cli_error(capsys, f"{line} --out {tmp_path}")
        assert words in err and "Traceback" not in err, (line, err)


@pytest.mark.slow
def test_train_distill_then_run_the_student_on_the_clis_devices(env, tiny_run, tmp_path):
    """The CLI as a user runs it (``train`` on one device, ``run`` on one per core): ``TINY``'s recipe, so the
    command trains what ``distill`` trained (and loads the fixture's compiled programs), then ``run`` with it."""
    out = rbjax_commands(
        f"train distill {TINY_FLAGS} --out s",
        f"run --policy distilled --checkpoint s --stores 2 --days {L.days}",
        cwd=tmp_path,
    )
    assert "distill: 2 rounds, 8 labels" in out and "wrote s/config.json" in out
    for r in range(TINY.rounds):  # within a round: its first call of the labels' days, and its last
        assert f"round {r}: day 1/{L.days}, " in out and f"round {r}: day {L.days}/{L.days}, " in out
    assert f"distilled policy, 2 stores x {L.days} days" in out
    (want, _), (got, config) = (load(folder, env) for folder in (tiny_run[0], tmp_path / "s"))
    assert config == TINY
    jax.tree.map(np.testing.assert_array_equal, got, want)


@pytest.mark.slow
@pytest.mark.skipif(not RESULTS.exists(), reason="benchmarks/distill.py has not recorded the students' rows")
@pytest.mark.parametrize("name", ["distilled", "distilled_obs", "distilled_belief"])
def test_shipped_students_reproduce_their_rows(env, params, name):
    """The shipped checkpoints on the first 4 of the held-out stores of ``benchmarks/results/distill.json`` end
    where that run's last-round rows say they did, store by store (4 of the 8 recorded: the golden records'
    batch, whose compiled reset the persistent cache holds)."""
    rec = json.loads(RESULTS.read_text())
    rounds = rec["recipe"][name]["rounds"]
    row = rec["policies"][f"{name}, round {rounds - 1}"]
    policy, policy_params = policies.make(name, env)  # the shipped checkpoint
    days = rec["days"]
    keys = jax.random.split(jax.random.key(rec["seed"]), rec["stores"])[:STORES]
    records, _ = rbjax.rollout(
        env, policy, policy_params, params.replace(horizon=np.int32(days)), keys, days=days
    )
    got = metrics.store_metrics(jax.device_get(records))["final_net_worth"].to_numpy()
    np.testing.assert_allclose(got, row["first_8_stores"][:STORES], rtol=1e-5)

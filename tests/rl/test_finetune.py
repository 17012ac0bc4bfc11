"""The fine-tune of a student with the environment's reward (``rbjax.rl.finetune``; ``rbjax train ppo --init
STUDENT``): its advantages, that it keeps its start until the actor moves and logs the KL to it, that the acting
network reads what its kind reads while the critic reads the hidden fields, and the command line.

The shipped fine-tuned policies' rows are replayed in ``test_shipped_finetuned_policies_reproduce_their_rows``.
"""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import cli_error, rbjax_commands
from hidden_fields import changed, oracle_morning

import rbjax
from rbjax import policies
from rbjax.policies import belief_state
from rbjax.rl.distill import DistillConfig, Student, StudentConfig
from rbjax.rl.distill import save as save_student
from rbjax.rl.finetune import FinetuneConfig, experience, finetune
from rbjax.rl.finetune import update as U
from rbjax.rl.finetune.checkpoint import finetuned, save
from rbjax.rl.finetune.experience import hidden_features
from rbjax.rl.finetune.recipe import VALIDATION_SEED

RESULTS = Path(__file__).parents[2] / "benchmarks" / "results" / "finetune.json"
DAYS = 8
# the fixture's fine-tune as ``rbjax train ppo --init`` flags: the command trains what the fixture trained, and
# loads the fixture's compiled update from the suite's cache (TINY below is what the command makes of them)
TINY_FLAGS = (
    f"--stores 1 --steps {3 * 2 * DAYS} --days {DAYS} --critic-updates 1 --epochs 2 --minibatches 2 "
    "--eval-every 1"
)
TINY = FinetuneConfig(stores=1, updates=3, epochs=2, minibatches=2, critic_updates=1, eval_every=1)
SEED = 0  # the command's default --seed


def test_advantages_and_returns_match_a_loop_with_a_bankruptcy():
    """``gae`` and ``discounted_returns`` against the textbook recursions written as Python loops, on a store
    that goes bankrupt on day 3 of 6 (nothing after it counts, no value is bootstrapped from it)."""
    rng = np.random.default_rng(0)
    T, gamma, lam = 6, 0.9, 0.8
    reward, values = rng.normal(size=(T, 2)), rng.normal(size=(T, 2))
    alive = np.ones((T, 2), bool)
    alive[4:, 1] = False  # store 1's last day played is day 3
    adv, target = U.gae(jnp.asarray(reward), jnp.asarray(alive), jnp.asarray(values), gamma, lam)
    ret = U.discounted_returns(jnp.asarray(reward) * alive, jnp.asarray(alive), gamma)
    for b in range(2):
        last = int(alive[:, b].sum())
        want_adv, want_ret, a, g = np.zeros(last), np.zeros(last), 0.0, 0.0
        for t in reversed(range(last)):
            v_next = values[t + 1, b] if t + 1 < last else 0.0
            a = reward[t, b] + gamma * v_next - values[t, b] + gamma * lam * a
            g = reward[t, b] + gamma * g
            want_adv[t], want_ret[t] = a, g
        np.testing.assert_allclose(np.asarray(adv)[:last, b], want_adv, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(target)[:last, b], want_adv + values[:last, b], rtol=1e-5)
        np.testing.assert_allclose(np.asarray(ret)[:last, b], want_ret, rtol=1e-5)


def test_the_paired_advantage_is_each_copys_surprise_less_the_others():
    """``paired`` for 3 copies of 2 stores: a copy's (return - value) less the mean of its store's other copies',
    day by day, written out; the targets are the returns."""
    rng = np.random.default_rng(1)
    T, B, G = 4, 2, 3
    ret, values = rng.normal(size=(T, B * G)), rng.normal(size=(T, B * G))
    adv, target = U.paired(jnp.asarray(ret), jnp.asarray(values), G)
    surprise = (ret - values).reshape(T, B, G)
    for g in range(G):
        others = np.delete(surprise, g, axis=-1).mean(-1)
        np.testing.assert_allclose(
            np.asarray(adv).reshape(T, B, G)[..., g], surprise[..., g] - others, rtol=1e-5
        )
    np.testing.assert_allclose(np.asarray(target), ret, rtol=1e-6)


def test_settings_are_checked_by_name():
    for fields, words in (
        (dict(stores=0), "FinetuneConfig.stores"),
        (dict(critic_updates=3, updates=3), "critic_updates must be an int in [0, updates=3)"),
        (dict(gamma=1.5), "gamma in (0, 1]"),
        (dict(kl_coef=-1.0), "kl_coef must be >= 0"),
        (dict(copies=0), "FinetuneConfig.copies"),
    ):
        with pytest.raises(
            ValueError, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
        ):
            FinetuneConfig(**fields)
    config = FinetuneConfig(updates=12, critic_updates=2, kl_coef=2.0)
    assert [config.kl_weight(i) for i in (0, 2, 7, 12)] == [2.0, 2.0, 1.0, 0.0]


@pytest.fixture(scope="module")
def tiny_finetune(env, params):
    """``TINY`` from an untrained observed student on 8-day episodes: (student, start, tuned, curve, kept
    params)."""
    student = Student(StudentConfig(privileged=False, hidden=16))
    start = student.init(jax.random.key(0))
    kept = []
    tuned, curve = finetune(
        env, params.replace(horizon=np.int32(DAYS)), student, start, TINY, seed=SEED, progress=None,
        on_eval=lambda i, p: kept.append(p),
    )  # fmt: skip
    return student, start, tuned, curve, kept


@pytest.mark.slow  # compiles a fine-tune's update
def test_the_start_is_kept_until_the_actor_moves_and_the_kl_is_logged(env, params, tiny_finetune):
    """The evaluations before the first update and after the critic's warm-up are the student's own, store for
    store as ``rbjax.rollout`` plays it on the same keys; then the actor moves, and the KL to the start it logs
    is above 0 (0 while the critic warmed up)."""
    student, start, tuned, curve, kept = tiny_finetune
    keys = jax.random.split(jax.random.key(VALIDATION_SEED), TINY.eval_stores)
    short = params.replace(horizon=np.int32(DAYS))
    records, _ = rbjax.rollout(env, student, start, short, keys, days=DAYS)
    own = float(np.mean(jax.device_get(records).net_worth[:, -1]))
    np.testing.assert_allclose(curve.eval_net_worth.iloc[:2], [own, own], rtol=1e-6)
    jax.tree.map(np.testing.assert_array_equal, kept[1].net, start.net)  # the warm-up leaves the actor alone
    assert list(curve.actor_on.iloc[:3]) == [False, True, True]
    assert curve.kl_to_start.iloc[0] == 0 and (curve.kl_to_start.iloc[1:3] > 0).all()
    assert np.isfinite(curve[["policy_loss", "value_loss", "kl_to_start"]].iloc[:3].to_numpy()).all()
    moved = [not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(tuned.net), jax.tree.leaves(start.net))]
    assert any(moved)


@pytest.mark.slow  # compiles a student's episodes
def test_copies_of_a_store_see_the_same_market(env, params):
    """Two copies of each store on the same run key: near-greedy (a temperature of 1e-4) they choose alike and
    their episodes are the same, day for day; two stores on other keys are not. At the fine-tune's temperature
    the copies choose apart."""
    student = Student(StudentConfig(hidden=8))
    start = student.init(jax.random.key(0))
    short = params.replace(horizon=np.int32(DAYS))
    pool = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(4), 2), short)
    keys = jax.random.split(jax.random.key(5), 2)

    @jax.jit
    def play(temperature, pool, keys):
        return experience.collect(env, student, start, start, temperature, short, pool, keys, DAYS, copies=2)

    cold = play(1e-4, pool, keys)
    reward = np.asarray(cold.reward)  # [T, 2 stores x 2 copies]
    np.testing.assert_array_equal(reward[:, 0], reward[:, 1])
    np.testing.assert_array_equal(reward[:, 2], reward[:, 3])
    assert not np.array_equal(reward[:, 0], reward[:, 2])
    warm = play(1.0, pool, keys)
    choice = np.asarray(warm.mornings.choice)
    assert (choice[:, 0] != choice[:, 1]).any() and (choice[:, 2] != choice[:, 3]).any()


@pytest.mark.slow  # compiles the observed student's fine-tune (the fixture)
def test_the_actor_reads_no_hidden_field_and_the_critic_does(env, params, tiny_finetune):
    """The fine-tuned observed student's action and inputs stay put when each hidden field changes alone; the
    critic's extra inputs move with the quality of the quotes (so the comparison can fail)."""
    student, _, tuned, *_ = tiny_finetune
    assert not student.config.privileged
    obs, state = oracle_morning(env, params, 6)
    fields = list(belief_state.HIDDEN)

    def seen(s):
        privileged = env.privileged(s, params)
        anchor, candidates, feats = student.inputs(tuned.planner, obs, privileged)
        return student(tuned, obs, privileged), feats, hidden_features(anchor, privileged)

    one = jax.jit(seen)
    base = one(state)
    for field in fields:
        action, feats, hidden = one(changed(state, field))
        for a, b in zip(jax.tree.leaves((action, feats)), jax.tree.leaves(base[:2])):
            np.testing.assert_array_equal(a, b, err_msg=f"the fine-tuned actor read {field}")
        if field == "suppliers.quote_quality":
            assert not np.array_equal(hidden, base[2]), "the critic's inputs did not move with the quality"


def test_train_ppo_init_refuses_what_it_cannot_start_from(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    for line, words in (
        (f"train ppo --init {tmp_path / 'empty'}", "not a PPO checkpoint"),
        ("train ppo --init finetuned_obs", "'finetuned_obs' has no shipped checkpoint"),
        ("train ppo --init distilled --hidden 8", "--hidden: a fine-tune keeps its student's network"),
        ("train ppo --init distilled --steps 10", "--steps 10 is below one update"),
        ("train ppo --init distilled --critic-updates -1", "critic_updates must be an int"),
        ("train ppo --init distilled --rollout-days 8", "--rollout-days: a fine-tune plays whole episodes"),
        ("train ppo --init distiled", "--init distiled: neither a PPO run folder nor a student's name"),
        ("train ppo --kl-coef 0.5", "--kl-coef is for a student's fine-tune (--init STUDENT)"),
    ):
        err = cli_error(capsys, f"{line} --out {tmp_path / 'o'}")
        assert words in err and "Traceback" not in err, (line, err)


@pytest.mark.slow
def test_train_ppo_init_a_student_folder_then_run_it_on_the_clis_devices(env, tiny_finetune, tmp_path):
    """As a user runs it: a folder of ``train distill`` fine-tuned by ``train ppo --init`` (``TINY_FLAGS``: the
    fixture's fine-tune, so the command trains what ``finetune`` trained), then ``run`` with the fine-tuned
    policy by its registry name; its checkpoint names the fine-tune and its start."""
    student, start, tuned, *_ = tiny_finetune
    save_student(tmp_path / "s", start, DistillConfig(student=student.config), _curve(), env)
    out = rbjax_commands(
        f"train ppo --init s {TINY_FLAGS} --out f",
        f"run --policy finetuned_obs --checkpoint f --stores 2 --days {DAYS}",
        cwd=tmp_path,
        stderr=True,
    )
    assert "fine-tune: 3 updates" in out and "wrote f/config.json" in out and "update 3/3 (actor)" in out
    assert "3 updates of 1 store x 2 copies x 8 days (1 of them train the critic alone)" in out
    assert f"finetuned_obs policy, 2 stores x {DAYS} days" in out
    meta = finetuned(tmp_path / "f")
    assert meta["start"] == "s" and FinetuneConfig(**meta["config"]) == TINY
    assert (tmp_path / "f" / "curve.png").is_file()
    # the same network: it loads as its start's kind too, and holds the fixture's fine-tuned weights
    _, got = policies.make("distilled_obs", env, str(tmp_path / "f"))
    jax.tree.map(np.testing.assert_array_equal, got, tuned)
    with pytest.raises(ValueError, match="load it as the policy 'distilled_obs' or 'finetuned_obs'"):
        policies.make("finetuned", env, str(tmp_path / "f"))


def test_a_diverged_fine_tune_saves_nothing(env, tmp_path):
    student = Student(StudentConfig(hidden=4))
    start = student.init(jax.random.key(0))
    bad = start.replace(net=jax.tree.map(lambda w: w * np.nan, start.net))
    with pytest.raises(FloatingPointError, match="nothing was saved"):
        save(tmp_path / "f", bad, DistillConfig(student=student.config), TINY, "s", _curve(), env)
    assert not (tmp_path / "f").exists()


def _curve():
    import pandas as pd

    return pd.DataFrame(
        dict(update=[0, 1], store_days=[0, 8], eval_net_worth=[1.0, 2.0], episode_net_worth=[1.0, 1.0],
             policy_loss=[0.0, 0.0], value_loss=[0.0, 0.0], kl_to_start=[0.0, 0.0], kl_coef=[1.0, 1.0],
             actor_on=[False, True])
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not RESULTS.exists(), reason="benchmarks/finetune.py has not recorded its rows")
def test_shipped_finetuned_policies_reproduce_their_rows(env, params):
    """Each shipped fine-tuned policy on the first 4 held-out stores of ``finetune.json`` ends where its row says."""
    rec = json.loads(RESULTS.read_text())
    shipped = {name: r for name, r in rec["policies"].items() if r.get("shipped")}
    if not shipped:
        pytest.skip("no fine-tuned policy beat its start, so none is shipped")
    keys = jax.random.split(jax.random.key(rec["seed"]), rec["stores"])[:4]
    for name, row in shipped.items():
        policy, policy_params = policies.make(name, env)
        records, _ = rbjax.rollout(env, policy, policy_params, params, keys, days=rec["days"])
        got = jax.device_get(records).net_worth[:, -1]
        np.testing.assert_allclose(got, row["first_8_stores"][:4], rtol=1e-5, err_msg=name)

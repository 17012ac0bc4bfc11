"""Learned-baseline plumbing: observation encoding, action decoding, per-product rewards, PPO, checkpoints."""

import dataclasses

import golden
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import oracle_layout, uncommitted

import rbjax
from rbjax.policies import RandomParams, random_policy
from rbjax.rl import actions as A
from rbjax.rl import ppo, ppo_policy
from rbjax.rl.features import encode, feature_sizes
from rbjax.rl.normalize import RunningStats
from rbjax.rl.rewards import product_rewards
from rbjax.rl.train import load, save, train_ppo

pytestmark = pytest.mark.slow  # PPO's programs, training runs

# the small PPO setting shared by this file (API and CLI runs) and notebooks/ppo_baseline.ipynb (same program,
# so JAX's persistent compilation cache compiles it once per suite), on the one-attempt supplier generator: the
# generator is not under test here, and its reset is 8x cheaper
SMALL = dict(num_envs=32, num_steps=8, total_steps=32 * 8 * 24, minibatches=4, hidden=32)
SMALL_DAYS = 40


@pytest.fixture(scope="module")
def ppo_env(env):
    return rbjax.Env(dataclasses.replace(env.config, supplier_attempts=1))


def mid_episode_states(env, params):
    """4 stores after 30 days of the random policy: stock, pending orders, reviews, news (the golden records'
    rollout program, so the persistent cache serves it)."""
    keys = jax.random.split(jax.random.key(7), golden.STORES)
    _, state = rbjax.rollout(
        env,
        random_policy,
        RandomParams.default(),
        params,
        keys,
        days=golden.DAYS,
        records="full",
        devices=jax.devices()[:1],
    )
    return state


@pytest.mark.slow
def test_observation_hides_quality_and_news_metadata(env, params):
    # jitted, not eager: op-by-op dispatch compiles a kernel per operation, far slower here
    observe, features, privileged = jax.jit(env.observe), jax.jit(encode), jax.jit(env.privileged)
    state = jax.tree.map(lambda x: x[0], mid_episode_states(env, params))
    obs = observe(state, params)
    rng = np.random.default_rng(0)
    sup, lots = state.suppliers, state.lots
    hidden = state.replace(
        suppliers=sup.replace(
            quote_quality=jnp.asarray(rng.uniform(1, 5, sup.quote_quality.shape), sup.quote_quality.dtype),
            quality_tier=(sup.quality_tier + 3) % 7,
        ),
        lots=lots.replace(quality=jnp.asarray(rng.uniform(1, 5, lots.quality.shape), lots.quality.dtype)),
        pending=state.pending.replace(quality=state.pending.quality * 0.5),
        news=state.news.replace(signed=-state.news.signed * 3.0, need=~state.news.need),
    )
    assert not np.array_equal(np.asarray(hidden.suppliers.quote_quality), np.asarray(sup.quote_quality))
    changed = observe(hidden, params)
    for a, b in zip(jax.tree.leaves(obs), jax.tree.leaves(changed)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(features(obs), features(changed)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # the privileged view does change: the test would notice a leak through a shared field
    assert not np.array_equal(
        np.asarray(privileged(state, params).quote_quality),
        np.asarray(privileged(hidden, params).quote_quality),
    )


def test_encoding_shapes_and_finite(env, params):
    states = mid_episode_states(env, params)
    products, glob = jax.jit(lambda s: jax.vmap(encode)(jax.vmap(env.observe, in_axes=(0, None))(s, params)))(
        states
    )
    F, G = feature_sizes(env.config.num_suppliers)
    assert products.shape == (4, env.config.num_products, F) and glob.shape == (4, G)
    assert np.isfinite(np.asarray(products)).all() and np.isfinite(np.asarray(glob)).all()


def test_supplier_score_weighs_rating_price_and_returns(env, params):
    """The score of ``A.supplier_score`` from hand-set fields: the rating (or ``UNRATED_RATING``), the quote
    over the day's dearest and the return rate, each with its weight."""
    obs = jax.jit(env.observe)(jax.tree.map(lambda x: x[0], mid_episode_states(env, params)), params)
    J, K = obs.quote_price.shape
    rating = np.tile([0.0, 4.5, 3.0, 4.5, 4.5], (J, 1))
    price = np.tile([1.0, 1.0, 1.0, 2.0, 1.0], (J, 1))
    returns = np.tile([0.0, 0.0, 0.0, 0.0, 0.05], (J, 1))
    obs = obs.replace(
        supplier_rating=jnp.asarray(rating, jnp.float32),
        quote_price=jnp.asarray(price, jnp.float32),
        supplier_return_rate=jnp.asarray(returns, jnp.float32),
    )
    score = np.asarray(A.supplier_score(obs))
    expected = (
        np.where(rating > 0, rating, A.UNRATED_RATING)
        + A.PRICE_WEIGHT * price / 2.0
        - A.RETURN_WEIGHT * returns
    )
    np.testing.assert_allclose(score, expected, rtol=1e-6)
    assert (score.argmax(-1) == 3).all()  # rated 4.5 and the dearest quote


@pytest.mark.slow
def test_ppo_policy_adds_the_supplier_prior_to_its_logits(env, params):
    """With a prior of scale 1e4 the greedy supplier is the best-scored one; with none, the network's own
    choice (the untrained network's supplier logits are near 0, its argmax unrelated to the score)."""
    config = ppo.PPOConfig(**SMALL)
    policy_params = ppo.initial_policy(env, config, jax.random.key(1)).replace(greedy=jnp.asarray(True))
    obs = jax.jit(jax.vmap(env.observe, in_axes=(0, None)))(mid_episode_states(env, params), params)
    score = np.asarray(jax.vmap(A.supplier_score)(obs))

    def ordered_from(prior):
        policy = jax.jit(
            jax.vmap(
                ppo_policy.make_policy(env.config.num_suppliers, config.hidden, prior), (None, 0, None, None)
            )
        )
        order = np.asarray(policy(policy_params, obs, None, jax.random.key(0)).order)
        lines = order > 0
        assert (lines.sum(-1) <= 1).all() and lines.any()
        return lines.argmax(-1), lines.any(-1)

    supplier, ordering = ordered_from(1e4)
    np.testing.assert_array_equal(supplier[ordering], score.argmax(-1)[ordering])
    supplier, ordering = ordered_from(0.0)
    assert (supplier[ordering] != score.argmax(-1)[ordering]).any()


def test_checkpoints_from_before_the_prior_load_without_one(env, tmp_path):
    import json
    import shutil

    old = tmp_path / "old"
    shutil.copytree(rbjax.PPO_CHECKPOINT, old)
    meta = json.loads((old / "config.json").read_text())
    meta["ppo"].pop("supplier_prior", None)
    (old / "config.json").write_text(json.dumps(meta))
    assert load(old, env)[1].supplier_prior == 0.0
    assert load(rbjax.PPO_CHECKPOINT, env)[1].supplier_prior == ppo.PPOConfig().supplier_prior


def random_heads(key, J, K, scale):
    k = jax.random.split(key, 4)
    return A.Heads(
        price=scale * jax.random.normal(k[0], (J, A.PRICE_OPTIONS)),
        order=scale * jax.random.normal(k[1], (J, len(A.COVER_DAYS))) + jnp.asarray([0, 0, 0, 0, 0, 3.0]),
        supplier=scale * jax.random.normal(k[2], (J, K)),
        shelf_mean=scale * jax.random.normal(k[3], (J,)),
        shelf_log_std=jnp.float32(0.0),
    )


def test_categorical_draws_follow_the_softmax():
    """200,000 draws of each of three rows (spread out; one category of probability 0; nearly certain): every
    category's frequency lies within 5 standard errors of its softmax probability, and the zero is never drawn."""
    logits = jnp.array(
        [
            [0.0, 1.0, -2.0, 0.5, 0.0, 3.0],
            [0.0, -jnp.inf, 1.0, 0.0, 0.0, -1.0],
            [9.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        ]
    )
    n = 200_000
    draws = jax.jit(jax.vmap(lambda k: A.categorical(k, logits)))(jax.random.split(jax.random.key(0), n))
    assert draws.dtype == jnp.int32 and draws.shape == (n, 3)
    freq = (np.asarray(draws)[..., None] == np.arange(6)).mean(0)  # [3, 6]
    p = np.asarray(jax.nn.softmax(logits, -1), np.float64)
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n)), (freq, p)
    assert freq[1, 1] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("funds", [30_000.0, 4_500.0, -200.0])
def test_decoded_actions_are_always_valid(env, params, funds):
    states = uncommitted(mid_episode_states(env, params))  # so that the step is tests/contracts.py's program
    states = states.replace(
        funds=jnp.full_like(states.funds, funds), net_worth=states.net_worth - states.funds + funds
    )
    J, K = env.config.num_products, env.config.num_suppliers
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    observe = jax.jit(jax.vmap(env.observe, in_axes=(0, None)))
    sample = jax.jit(jax.vmap(lambda k, scale: A.sample(k, random_heads(k, J, K, scale)), in_axes=(0, None)))
    decode = jax.jit(jax.vmap(A.decode))
    rewards = jax.jit(jax.vmap(product_rewards, in_axes=(0, 0, 0, 0, None)))
    for trial, scale in enumerate((0.1, 3.0, 30.0)):
        keys = jax.random.split(jax.random.key(trial), 4)
        obs = observe(states, params)
        action = decode(sample(keys, jnp.float32(scale)), obs)
        price, order, shelf = (np.asarray(x) for x in (action.price, action.order, action.shelf))
        assert np.isfinite(price).all() and (price > 0).all()
        assert (shelf.sum(-1) <= int(params.shelf_capacity)).all()
        assert (order >= 0).all() and (order == np.floor(order)).all() and (order <= A.MAX_UNITS).all()
        assert (order[~shelf] == 0).all()  # only shelf products are ordered
        assert ((order > 0).sum(-1) <= 1).all()  # one supplier per product
        cost = (order * np.asarray(obs.quote_price)).sum((-1, -2))
        reserve = min(A.FUNDS_RESERVE, A.RESERVE_SHARE * funds)  # the cash the orders leave
        assert (cost <= max(funds - reserve, 0.0) + 1e-3).all()
        # in the oracle's layout (the same day): the batched step of tests/contracts.py
        _, new, reward, _, _, info = step(keys, states, jax.vmap(oracle_layout)(states, action), params)
        for name in ("invalid_prices", "invalid_orders", "refused_orders", "shelf_refused"):
            assert int(np.asarray(getattr(info, name)).sum()) == 0, name
        np.testing.assert_array_equal(
            np.asarray(info.ordered), order.sum(-1)
        )  # every decoded unit was placed
        if funds > 0 and scale == 3.0:  # the test does exercise ordering
            ordering = order.sum((-1, -2)) > 0
            assert ordering.all() if funds >= 10_000 else ordering.any()
        # the per-product rewards add up to the change in net worth plus the rent
        shares = rewards(states, new, action, info, params)
        np.testing.assert_allclose(
            np.asarray(shares.sum(-1)), np.asarray(reward + params.rent), rtol=1e-5, atol=0.05
        )


def test_running_stats_match_numpy():
    x = np.random.default_rng(1).normal(3.0, 2.0, (1000, 5)).astype(np.float32)
    stats = RunningStats.zeros(5)
    for chunk in np.split(x, 10):
        stats = stats.update(jnp.asarray(chunk))
    np.testing.assert_allclose(np.asarray(stats.mean), x.mean(0), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.asarray(stats.var), x.var(0), rtol=1e-3)


def test_rows_and_store_layer_is_the_dense_layer_on_the_concatenation():
    import flax.linen as nn

    from rbjax.rl.network import RowsAndStore

    rows = jax.random.normal(jax.random.key(1), (96, 7))
    store = jax.random.normal(jax.random.key(2), (3,))
    dense, split = nn.Dense(4), RowsAndStore(4)
    params = dense.init(jax.random.key(0), jnp.zeros((96, 10)))
    # the same parameters (a checkpoint of one loads in the other) and the same initial values
    assert jax.tree.map(jnp.shape, split.init(jax.random.key(0), rows, store)) == jax.tree.map(
        jnp.shape, params
    )
    params = jax.tree.map(
        lambda x: x + jax.random.normal(jax.random.key(3), x.shape), params
    )  # a nonzero bias
    expected = dense.apply(params, jnp.concatenate([rows, jnp.broadcast_to(store, (96, 3))], -1))
    np.testing.assert_allclose(split.apply(params, rows, store), expected, rtol=1e-5, atol=1e-5)


def test_config_errors():
    with pytest.raises(ValueError, match="minibatches"):
        ppo.PPOConfig(num_envs=30, minibatches=4)
    with pytest.raises(ValueError, match="below one update"):
        ppo.PPOConfig(num_envs=32, num_steps=8, total_steps=100)


@pytest.fixture(scope="module")
def small_run(ppo_env, tmp_path_factory):
    params = ppo_env.default_params().replace(horizon=jnp.int32(SMALL_DAYS))
    out = tmp_path_factory.mktemp("ppo")
    return (
        train_ppo(ppo_env, params, ppo.PPOConfig(**SMALL), seed=0, out=out, every=0, verbose=False),
        params,
        out,
    )


def evaluate(env, params, policy_params, config, seeds=256):
    keys = jax.random.split(jax.random.key(123), seeds)
    rec, _ = rbjax.rollout(
        env,
        ppo_policy.make_policy(env.config.num_suppliers, config.hidden, config.supplier_prior),
        policy_params,
        params,
        keys,
        days=SMALL_DAYS,
        devices=jax.devices()[:1],
    )
    return np.asarray(rec.net_worth[:, -1])


@pytest.mark.slow
def test_short_ppo_run_improves_return(ppo_env, small_run):
    result, params, _ = small_run
    config = result.config
    untrained = result.policy_params.replace(net=ppo.initial_policy(ppo_env, config, jax.random.key(0)).net)
    before = evaluate(ppo_env, params, untrained, config)
    after = evaluate(ppo_env, params, result.policy_params, config)
    # same 256 seeds (common random numbers): the trained policy ends richer on average, by more than the
    # paired noise (3 standard errors of the paired difference)
    diff = after - before
    assert diff.mean() > 3 * diff.std() / np.sqrt(len(diff)), (before.mean(), after.mean())
    assert int(result.curve.invalid_actions.sum()) == 0
    assert (result.curve.episodes > 0).any() and np.isfinite(result.curve.entropy).all()


def test_checkpoint_round_trip(env, small_run, tmp_path):
    result, params, out = small_run
    assert {"config.json", "policy.msgpack", "curve.csv", "curve.png"} <= {p.name for p in out.iterdir()}
    loaded, config = load(out, env)
    assert config == result.config
    for a, b in zip(jax.tree.leaves(result.policy_params), jax.tree.leaves(loaded)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    save(tmp_path, loaded, config, env)
    again, again_config = load(tmp_path, env)
    assert again_config == config
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(again)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(FileNotFoundError, match="not a PPO checkpoint"):
        load(tmp_path / "nowhere", env)


# ``rbjax train ppo`` with the SMALL setting (seed 0)
TRAIN = (
    "train ppo --stores 32 --rollout-days 8 --steps 6144 --minibatches 4 --hidden 32 --days 40 --progress 0 "
    "--supplier-attempts 1"
)


@pytest.mark.slow
def test_cli_trains_what_train_ppo_trains_then_evaluates_and_continues(ppo_env, small_run, tmp_path, capsys):
    """``rbjax train ppo`` (in this process) with the same setting and seed as ``small_run`` gives the same weights
    bit for bit (same seed, same training); ``rbjax eval`` reads the checkpoint; ``--init`` continues it."""
    from rbjax.cli import main

    def cli(line):
        main(line.split())
        return capsys.readouterr().out

    result, _, _ = small_run
    out = cli(f"{TRAIN} --out {tmp_path}")
    assert "24 updates" in out and "store-days/s" in out
    assert {"config.json", "policy.msgpack", "curve.csv", "curve.png"} <= {p.name for p in tmp_path.iterdir()}
    curve = pd.read_csv(tmp_path / "curve.csv")
    assert len(curve) == 24
    np.testing.assert_allclose(curve.episode_net_worth, result.curve.episode_net_worth, rtol=1e-6)
    first, config = load(tmp_path, ppo_env)
    assert config == result.config
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(result.policy_params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # the evaluation program of ``evaluate`` (256 stores x 40 days, one device): compiled once for the suite
    out = cli(
        f"--devices 1 eval --policy ppo --checkpoint {tmp_path} --stores 256 --days 40 --progress 0 "
        "--supplier-attempts 1"
    )
    assert "ppo policy, 256 stores x 40 days" in out and "final_net_worth" in out
    assert "24,351" in out or "24350.98" in out  # beside the best LLM row
    # continue from the checkpoint (same program: the start policy is always an argument of the compiled run)
    assert "24 updates" in cli(f"{TRAIN} --init {tmp_path} --out {tmp_path / 'more'}")
    second, _ = load(tmp_path / "more", ppo_env)
    assert float(second.globals_.count) == pytest.approx(2 * float(first.globals_.count), rel=1e-3)
    with pytest.raises(SystemExit, match="hidden=32"):
        main(f"train ppo --hidden 16 --init {tmp_path} --steps 100000".split())


def test_config_refuses_non_finite_learning_rates():
    with pytest.raises(ValueError, match="PPOConfig.lr"):
        ppo.PPOConfig(lr=float("nan"))
    with pytest.raises(ValueError, match="PPOConfig.lr"):
        ppo.PPOConfig(lr=-1e-3)


def test_load_refuses_non_finite_corrupt_and_mismatched_checkpoints(env, tmp_path):
    import shutil

    from flax import serialization

    shipped = tmp_path / "good"
    shutil.copytree(rbjax.PPO_CHECKPOINT, shipped)
    params, config = load(shipped, env)
    nan = tmp_path / "nan"
    save(nan, params.replace(net=jax.tree.map(lambda x: x * jnp.nan, params.net)), config, env)
    with pytest.raises(ValueError, match=r"nan/policy.msgpack: .* non-finite"):
        load(nan, env)
    corrupt = tmp_path / "corrupt"
    shutil.copytree(shipped, corrupt)
    (corrupt / "policy.msgpack").write_bytes(b"\x00\x01garbage")
    with pytest.raises(ValueError, match="corrupt/policy.msgpack"):
        load(corrupt, env)
    keys = tmp_path / "keys"
    shutil.copytree(shipped, keys)
    state = serialization.to_state_dict(params)
    state.pop("products")
    (keys / "policy.msgpack").write_bytes(serialization.msgpack_serialize(state))
    with pytest.raises(ValueError, match="keys/policy.msgpack"):
        load(keys, env)


def test_train_ppo_says_it_is_compiling_before_it_compiles(env, params, monkeypatch, capsys):
    """The phase line comes before the (minutes-long) compilation: here the traced program stops at once."""

    class Traced(Exception):
        pass

    def make_train(env, config, progress=None):
        def train(key, env_params, init):
            assert "ppo: compiling the training program" in capsys.readouterr().err
            raise Traced

        return train

    monkeypatch.setattr(ppo, "make_train", make_train)
    with pytest.raises(Traced):
        train_ppo(env, params, ppo.PPOConfig(**SMALL))


def test_learning_curve_has_no_survival_before_an_episode_could_survive():
    from rbjax.rl.train import learning_curve

    config = ppo.PPOConfig(num_envs=8, num_steps=10, total_steps=8 * 10 * 5, minibatches=1)
    metrics = (
        dict(  # 5 updates of 10 days, horizon 30: no episode before update 2, none survives before update 3
            episodes=np.array([0, 3, 5, 2, 0]),
            episode_net_worth=np.array([0.0, -100.0, 50.0, 70.0, 0.0]),
            survival=np.array([0.0, 0.0, 0.0, 0.5, 0.0]),
            entropy=np.ones(5),
        )
    )
    curve = learning_curve(metrics, config, horizon=30, times=[1.0, 2.0])
    assert curve["update"].tolist() == [1, 2, 3, 4, 5] and curve.store_days.tolist() == [
        80,
        160,
        240,
        320,
        400,
    ]
    np.testing.assert_array_equal(curve.episode_net_worth, [np.nan, -100.0, 50.0, 70.0, np.nan])
    np.testing.assert_array_equal(curve.survival, [np.nan, np.nan, 0.0, 0.5, np.nan])
    assert curve.wall_s.tolist()[:2] == [1.0, 2.0] and np.isnan(curve.wall_s[4])


def test_learning_curve_plot_leaves_gaps_where_no_episode_ended_and_has_a_legend():
    from rbjax.results.plots import plot_learning_curve

    curve = pd.DataFrame(
        {
            "stage": [1, 1, 2, 2],
            "store_days": [10, 20, 30, 40],
            "episodes": [0, 2, 0, 1],
            "episode_net_worth": [0.0, 5.0, 0.0, 7.0],
            "survival": [0.0, 0.5, 0.0, 1.0],
            "entropy": [3.0, 2.9, 2.8, 2.7],
        }
    )
    fig = plot_learning_curve(curve)
    left, survival, entropy = fig.axes[0], fig.axes[2], fig.axes[1]
    np.testing.assert_array_equal(survival.lines[0].get_ydata(), [np.nan, 0.5, np.nan, 1.0])
    np.testing.assert_array_equal(left.lines[0].get_ydata(), [np.nan, 5.0, np.nan, 7.0])
    for ax in (survival, entropy):  # the stage line (a run continued from a checkpoint) is in the legend
        assert "continued from a checkpoint" in [t.get_text() for t in ax.get_legend().get_texts()]

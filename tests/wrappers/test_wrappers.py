"""The RL faces: lever decoding, the flat observation, the reset pool, gymnax's auto-reset and episode
statistics, Gymnasium's vector env (both auto-reset modes) and its checker, and rejax's PPO through the example."""

import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import need

need("gymnax")  # dev dependencies: a skip where they are missing, a failure under CI
need("gymnasium")

from rbjax.rl import levers  # noqa: E402
from rbjax.rl.flat import OBS_BOUND, flat_observation  # noqa: E402
from rbjax.wrappers import GymnaxEnv, StoreEnv, VectorEnv  # noqa: E402
from rbjax.wrappers import gymnax_env as gymnax_face  # noqa: E402

pytestmark = [pytest.mark.xdist_group("wrappers"), pytest.mark.slow]  # slow: its own programs, a rejax run
ROOT = Path(__file__).resolve().parents[2]
POOL = 4


@pytest.fixture(scope="module")
def short_params(env):
    """hard_v2 with a 3-day horizon: episodes end by truncation within a test."""
    return env.default_params().replace(horizon=jnp.asarray(3, jnp.int32))


@pytest.fixture(scope="module")
def face(env):
    return GymnaxEnv(env, pool_size=POOL)


@pytest.fixture(scope="module")
def rollout(face):
    """8 stores x 12 days of random levers through gymnax's step (auto-reset included)."""
    params = face.default_params
    space = face.action_space(params)

    @jax.jit
    def run(key):
        keys = jax.random.split(key, 8)
        obs, state = jax.vmap(face.reset, (0, None))(keys, params)

        def day(carry, k):
            obs, state = carry
            ka, ks = jax.random.split(k)
            action = jax.vmap(space.sample)(jax.random.split(ka, 8)) * 1.5  # some levers out of range
            out = jax.vmap(face.step, (0, 0, 0, None))(jax.random.split(ks, 8), state, action, params)
            return (out[0], out[1]), (out[0], action, out[2], out[3], out[4])

        _, trace = jax.lax.scan(day, (obs, state), jax.random.split(key, 12))
        return obs, trace

    return run(jax.random.key(3))


# ------------------------------------------------------------------ encodings
@pytest.fixture(scope="module")
def opening(env, params, reset):
    """(params, state, obs) of one store on its opening morning (the session's reset: tests/conftest.py)."""
    _, state = reset(jax.random.key(0), params)
    return params, state, env.observe(state, params)


def test_levers_decode_to_valid_actions_and_count_invalid_ones(env, opening, rollout, step):
    params, state, obs = opening
    J = env.config.num_products
    x = jnp.zeros((4, J)).at[1].set(1.0).at[3, :50].set(1.0)  # order 14 days of cover for 50 products
    x = x.at[0, 0].set(jnp.nan).at[0, 1].set(3.0).at[2, 2].set(-jnp.inf)
    action, invalid = levers.decode(x.reshape(-1), obs)
    assert int(invalid) == 3
    assert bool(jnp.all(jnp.isfinite(action.price)))
    # the scenario tests' step (one program: tests/conftest.py's step)
    _, _, _, _, _, info = step(jax.random.key(1), state, action, params)
    assert int(info.invalid_prices) == 0 and not bool(info.shelf_refused)
    assert int(info.invalid_orders) == 0 and int(info.refused_orders) == 0
    assert int(action.shelf.sum()) == int(params.shelf_capacity)
    assert float(action.order.sum()) > 0
    # the rollout drew levers up to 1.5 in size: the counts match the draws
    _, (_, drawn, _, _, info) = rollout
    assert np.array_equal(np.asarray(info["invalid_levers"]), np.asarray(jnp.sum(jnp.abs(drawn) > 1, -1)))


def test_supplier_lever_picks_by_quoted_price(env, opening):
    _, _, obs = opening
    J = env.config.num_products
    for end, pick in ((-1.0, jnp.argmin), (1.0, jnp.argmax)):
        x = jnp.zeros((4, J)).at[1].set(1.0).at[2].set(end).at[3].set(1.0)
        action, _ = levers.decode(x, obs)
        ordered = action.order.sum(-1) > 0
        assert bool(ordered.any())
        chosen = jnp.argmax(action.order, -1)
        assert bool(jnp.all(jnp.where(ordered, chosen == pick(obs.quote_price, -1), True)))
    nothing, _ = levers.decode(jnp.zeros((4, J)).at[1].set(-1.0), obs)
    assert float(nothing.order.sum()) == 0


def test_observations_lie_in_the_space(face, rollout):
    first, (obs, *_rest) = rollout
    space = face.observation_space(face.default_params)
    every = jnp.concatenate([first[None], obs]).reshape(-1, first.shape[-1])
    assert every.shape[1] == space.shape[0] == 96 * 47 + 12
    assert bool(jax.vmap(space.contains)(every).all())
    assert bool(jnp.all(jnp.isfinite(every)))
    assert float(jnp.abs(every).max()) < OBS_BOUND / 10  # the clip is a guarantee, not a working range


# ------------------------------------------------------------------ gymnax face
def test_reset_picks_a_pool_opening_with_fresh_prices(env, face):
    params = face.default_params
    obs, state = face.reset(jax.random.key(5), params)
    pool = params.pool
    kept = lambda s: jax.tree.leaves(s.replace(prices=None))  # all but the opening prices
    same = [
        all(bool(jnp.array_equal(a, b[i])) for a, b in zip(kept(state.env), kept(pool))) for i in range(POOL)
    ]
    assert sum(same) == 1
    p = params.env
    assert bool(jnp.all((state.env.prices >= p.price_min) & (state.env.prices <= p.price_max)))
    assert not any(bool(jnp.array_equal(state.env.prices, pool.prices[i])) for i in range(POOL))
    assert np.allclose(obs, flat_observation(env.observe(state.env, p)), rtol=1e-5, atol=1e-6)  # jit vs eager


def test_auto_reset_restarts_an_ended_store_on_the_same_call(face):
    params = face.default_params
    _, state = face.reset(jax.random.key(0), params)
    levers_ = jnp.zeros(face.num_actions)
    # bankrupt: four negative days already, negative funds, no stock to sell
    broke = state.replace(
        env=state.env.replace(neg_days=jnp.asarray(4, jnp.int32), funds=jnp.asarray(-1e3, jnp.float32))
    )
    obs, new, reward, done, info = face.step(jax.random.key(1), broke, levers_, params)
    assert bool(done) and bool(info["returned_episode"]) and not bool(info["survived"])
    assert int(info["returned_episode_lengths"]) == 1
    assert int(new.env.day) == 0 and int(new.episode_length) == 0 and float(new.env.funds) == 30_000
    assert np.allclose(obs, face.get_obs(new), rtol=1e-5, atol=1e-6)
    # the horizon: truncated, the store survived
    last = state.replace(env=state.env.replace(day=params.env.horizon - 1))
    _, new, _, done, info = face.step(jax.random.key(2), last, levers_, params)
    assert bool(done) and bool(info["survived"]) and int(new.env.day) == 0
    # what was truncated before the reset: test_gymnax_1_gets_terminated_and_truncated_apart, which asks
    # is_truncated of the stepped store; is_terminal tells bankruptcy from the horizon
    ended = last.replace(env=last.env.replace(done=jnp.asarray(True)), truncated=jnp.asarray(True))
    assert bool(face.is_truncated(ended, params)) and not bool(face.is_terminal(ended, params))
    assert bool(face.is_terminal(ended.replace(truncated=jnp.asarray(False)), params))
    # an ordinary day does not reset
    _, new, _, done, _ = face.step(jax.random.key(3), state, levers_, params)
    assert not bool(done) and int(new.env.day) == 1


def test_episode_statistics_add_up(face, short_params):
    params = face.default_params.replace(env=short_params)
    _, state = face.reset(jax.random.key(0), params)
    total = 0.0
    for day in range(3):
        action = jnp.zeros(face.num_actions).at[96:192].set(0.5)
        _, state, reward, done, info = face.step(jax.random.key(10 + day), state, action, params)
        total += float(reward)
    assert bool(done) and bool(info["survived"])
    assert int(info["returned_episode_lengths"]) == 3
    assert float(info["returned_episode_returns"]) == pytest.approx(total, rel=1e-5)
    assert float(info["returned_episode_returns"]) == pytest.approx(
        (float(info["final_net_worth"]) - 30_000) * 1e-3, rel=1e-4, abs=1e-4
    )


class _Gymnax1Environment:
    """A stand-in for gymnax >= 1.0's ``Environment``, as the wrapper relies on it
    (``src/rbjax/wrappers/gymnax_env.py``):
    ``step_env`` gives ``terminated``, ``is_truncated`` the rest, either one resets the store on the same call,
    and ``step`` returns six values. The dev extra pins gymnax < 1.0 (rejax needs it), so this is how CI runs the
    wrapper's other branch."""

    def step(self, key, state, action, params=None):
        params = self.default_params if params is None else params
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, reward, terminated, info = self.step_env(key_step, state, action, params)
        truncated = self.is_truncated(state_st, params)
        done = terminated | truncated
        obs_re, state_re = self.reset_env(key_reset, params)
        state = jax.tree.map(lambda x, y: jax.lax.select(done, x, y), state_re, state_st)
        obs = jax.lax.select(done, obs_re, obs_st)
        return obs, state, reward, terminated, truncated, info

    def reset(self, key, params=None):
        return self.reset_env(key, self.default_params if params is None else params)

    def is_truncated(self, state, params):
        raise NotImplementedError


def test_gymnax_1_gets_terminated_and_truncated_apart(env, monkeypatch):
    """The wrapper's module, imported afresh over the stand-in base: it must find gymnax >= 1.0's protocol and
    step through it (three stores in one call: bankrupt, at the horizon, an ordinary day)."""
    import importlib.util
    import types
    from importlib.metadata import version

    import gymnax.environments

    assert gymnax_face._SPLITS_TRUNCATION is (int(version("gymnax").split(".")[0]) >= 1)  # the installed one
    monkeypatch.setattr(
        gymnax.environments, "environment", types.SimpleNamespace(Environment=_Gymnax1Environment)
    )
    spec = importlib.util.spec_from_file_location("gymnax_env_over_gymnax_1", gymnax_face.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.undo()
    assert module._SPLITS_TRUNCATION is True and issubclass(module.GymnaxEnv, _Gymnax1Environment)

    face = module.GymnaxEnv(env, pool_size=POOL)
    params = face.default_params
    _, state = face.reset(jax.random.key(0), params)
    broke = state.replace(
        env=state.env.replace(neg_days=jnp.asarray(4, jnp.int32), funds=jnp.asarray(-1e3, jnp.float32))
    )
    last = state.replace(env=state.env.replace(day=params.env.horizon - 1))
    states = jax.tree.map(lambda *x: jnp.stack(x), broke, last, state)
    step = jax.jit(jax.vmap(face.step, (0, 0, None, None)))
    out = step(jax.random.split(jax.random.key(1), 3), states, jnp.zeros(face.num_actions), params)
    assert len(out) == 6
    obs, new, _, terminated, truncated, info = out
    assert np.array_equal(terminated, [True, False, False]) and np.array_equal(
        truncated, [False, True, False]
    )
    assert np.array_equal(info["returned_episode"], [True, True, False])
    assert np.array_equal(info["survived"], [False, True, False])
    # both ended stores restart on the same call, the truncated one included; the ordinary day goes on
    assert np.array_equal(new.env.day, [0, 0, 1]) and np.array_equal(new.episode_length, [0, 0, 1])
    assert np.array_equal(new.env.funds[:2], [30_000, 30_000]) and not bool(new.truncated[1])
    assert np.allclose(obs, jax.vmap(face.get_obs)(new), rtol=1e-5, atol=1e-6)


def test_bad_settings_are_refused(env, face):
    with pytest.raises(ValueError, match="pool_size"):
        GymnaxEnv(env, pool_size=-1).default_params  # noqa: B018
    with pytest.raises(ValueError, match="reward_scale"):
        GymnaxEnv(env, reward_scale=0).default_params  # noqa: B018
    _, state = face.reset(jax.random.key(0), face.default_params)
    with pytest.raises(ValueError, match="384 levers"):
        face.step(jax.random.key(0), state, jnp.zeros(10), face.default_params)


# ------------------------------------------------------------------ Gymnasium face
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_vector_env_auto_resets_by_gymnasium_rules(env, short_params, mode):
    envs = VectorEnv(3, env, pool_size=POOL, autoreset_mode=mode, env_params=short_params)
    obs, info = envs.reset(seed=1)
    assert obs.shape == (3, envs.single_observation_space.shape[0]) and obs.dtype == np.float32
    assert obs in envs.observation_space
    actions = np.zeros((3, envs.single_action_space.shape[0]), np.float32)
    for _ in range(2):
        obs, reward, terminated, truncated, info = envs.step(actions)
        assert not truncated.any() and "episode" not in info
    obs, reward, terminated, truncated, info = envs.step(actions)  # day 3 of 3
    assert truncated.all() and not terminated.any()
    assert info["_episode"].all() and (info["episode"]["l"] == 3).all() and info["episode"]["survived"].all()
    assert np.allclose(info["episode"]["r"], (info["episode"]["net_worth"] - 30_000) * 1e-3, atol=1e-3)
    if mode == "same_step":
        assert info["_final_obs"].all() and not np.array_equal(info["final_obs"], obs)
        obs, reward, terminated, truncated, info = envs.step(actions)
        assert not truncated.any() and (reward != 0).any()  # day 1 of the new episodes
    else:
        obs, reward, terminated, truncated, info = envs.step(actions)
        assert not truncated.any() and (reward == 0).all()  # the reset step: actions ignored
        assert (info["net_worth"] == 30_000).all()
    assert obs in envs.observation_space


def test_both_auto_reset_modes_are_one_step_program(env, short_params):
    """The mode is a traced flag: a "same_step" env after a "next_step" one compiles nothing new."""
    texts = []
    for mode in ("next_step", "same_step"):
        envs = VectorEnv(3, env, pool_size=POOL, autoreset_mode=mode, env_params=short_params)
        envs.reset(seed=0)
        same = jnp.asarray(mode == "same_step")
        actions = jnp.zeros((3, envs.single_action_space.shape[0]), jnp.float32)
        lowered = envs._step_fn.lower(
            envs._key, envs._state, actions, jnp.asarray(envs._autoreset), same, envs.params
        )
        texts.append(lowered.as_text())
    assert texts[0] == texts[1]


def test_vector_env_seeds_masks_and_bad_input(env):
    envs = VectorEnv(3, env, pool_size=POOL)  # the auto-reset test's programs (3 stores, next_step)
    with pytest.raises(RuntimeError, match="reset"):
        envs.step(envs.action_space.sample())
    a, _ = envs.reset(seed=4)
    b, _ = envs.reset(seed=4)
    c, _ = envs.reset(seed=5)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    with pytest.raises(ValueError, match=r"shape \(3, 384\)"):
        envs.step(np.zeros((4, 384)))
    with pytest.raises(ValueError, match="seed"):
        envs.reset(seed=[1, 2])
    before = envs.step(envs.action_space.sample())[0]
    after, _ = envs.reset(options={"reset_mask": np.array([True, False, False])})
    assert np.array_equal(after[1:], before[1:]) and not np.array_equal(after[0], before[0])


def test_store_env_passes_gymnasium_checker(env):
    from gymnasium.utils.env_checker import check_env

    single = StoreEnv(env, pool_size=POOL)
    check_env(single, skip_render_check=True)
    obs, _ = single.reset(seed=0)
    obs, reward, terminated, truncated, info = single.step(single.action_space.sample())
    assert obs in single.observation_space and isinstance(reward, float) and "net_worth" in info


# ------------------------------------------------------------------ a published trainer, unchanged
def test_rejax_ppo_example_trains(tmp_path):
    need("rejax")  # a dev dependency: a skip where it is missing, a failure under CI
    args = ["--timesteps", "512", "--envs", "8", "--steps", "32", "--eval-every", "512", "--pool", "8"]
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "rejax_ppo.py"), *args], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "trained 512 store-days" in out.stdout and "evaluation 1: mean episode length" in out.stdout

"""rbjax.policies.planner: its candidates, no leaked randomness, batched == unbatched == sharded, its cadence.

Small settings throughout: C = 4 candidates (base, prices x 1.5, no order, cheapest supplier), M = 2 futures,
H = 3 days, planning every 2nd day.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import rbjax_commands

from rbjax.kernels.rng import day_keys
from rbjax.policies import OracleParams, oracle
from rbjax.policies import planner as planner_module
from rbjax.policies.planner import Planner, candidate_actions, default_params, future_keys
from rbjax.runners.rollout import rollout, scan_days
from rbjax.state import Action

DAYS = 4


@pytest.fixture(scope="module")
def planner(env):
    return Planner(env, oracle, futures=2, horizon=3, every=2)


@pytest.fixture(scope="module")
def plan_params():
    return default_params(OracleParams.default(), price_moves=[1.5], order_moves=[0.0], cheapest=True)


@pytest.fixture(scope="module")
def morning(env, params):
    """(obs, state, the oracle's action) of one store on its opening morning (the oracle orders then)."""
    obs, state = jax.jit(env.reset)(jax.random.key(3), params)
    return obs, state, oracle(OracleParams.default(), obs, env.privileged(state, params))


def test_candidates_start_with_the_base_and_move_only_what_they_say(plan_params, morning):
    obs, state, base = morning
    c = jax.jit(candidate_actions)(plan_params, base, obs)
    assert c.price.shape == (plan_params.candidates, 96) == (4, 96)
    for name in ("price", "shelf", "order"):
        np.testing.assert_array_equal(getattr(c, name)[0], getattr(base, name))
    shelf = np.asarray(base.shelf)
    assert shelf.any()
    moved = np.round(np.asarray(base.price) * np.float32(1.5) * 100) / 100
    np.testing.assert_allclose(c.price[1][shelf], moved[shelf], rtol=1e-6)
    np.testing.assert_array_equal(c.price[1][~shelf], np.asarray(base.price)[~shelf])
    assert bool(np.asarray(c.set_price[1])[shelf].all())
    assert float(np.asarray(base.order).sum()) > 0 and float(c.order[2].sum()) == 0  # order x 0
    # the cheapest supplier's candidate: each product's units, all at its cheapest quote
    np.testing.assert_array_equal(c.order[3].sum(-1), np.asarray(base.order).sum(-1))
    cheapest = np.argmin(np.asarray(obs.quote_price), -1)
    placed = np.asarray(c.order[3]) > 0
    assert placed.any() and (np.argmax(placed, -1)[placed.any(-1)] == cheapest[placed.any(-1)]).all()


def test_the_planner_never_sees_the_episodes_future(env, params, planner, plan_params, morning, monkeypatch):
    """The world's key holds the episode's future quotes and news; the planner's simulated futures must not
    depend on it (only on its policy key), and a planner that kept it would (so this test can fail)."""
    obs, state, base = morning
    other = state.replace(world=state.world.replace(key=state.world.key ^ np.uint32(0x5A5A5A5A)))
    step = jax.jit(env.step)
    k = jax.random.key(11)
    tomorrow = [step(k, s, Action.noop(s), params)[1].suppliers.quote_price for s in (state, other)]
    assert not np.array_equal(*tomorrow)  # the two worlds' real futures differ from tomorrow on

    candidates = candidate_actions(plan_params, base, obs)
    keys = future_keys(jax.random.key(5), 2)

    def values():
        fn = jax.jit(planner.values)  # traced afresh: sees the monkeypatch below
        return [
            np.asarray(fn(plan_params, candidates, env.privileged(s, params), keys)) for s in (state, other)
        ]

    honest = values()
    assert honest[0].shape == (4, 2)
    np.testing.assert_array_equal(*honest)
    monkeypatch.setattr(planner_module, "own_world", lambda state, key: state)  # a planner that keeps the key
    leaky = values()
    assert not np.array_equal(*leaky)

    # the planner's futures are drawn from its policy key, never the store's own step keys
    run_key = jax.random.key(9)
    k_pol, _ = day_keys(run_key, 3)
    futures = np.asarray(jax.random.key_data(future_keys(k_pol, 2)))
    real = np.asarray([jax.random.key_data(day_keys(run_key, d)[1]) for d in range(3, 3 + 3)])
    assert not (futures[:, None, :] == real[None, :, :]).all(-1).any()


@pytest.mark.slow
def test_halving_keeps_the_base_and_the_better_half_then_plays_the_best_over_all_futures(
    env, params, planner, plan_params, morning
):
    obs, state, base = morning
    privileged = env.privileged(state, params)
    candidates = candidate_actions(plan_params, base, obs)
    key = jax.random.key(8)
    v = np.asarray(
        jax.jit(planner.values)(plan_params, candidates, privileged, future_keys(key, 2))
    )  # [4, 2]
    kept = sorted([0, 1 + int(np.argmax(v[1:, 0]))])  # the base and the better half (2 of 4) after round one
    best = kept[int(np.argmax(v[kept].sum(-1)))]
    halving = Planner(env, oracle, futures=2, horizon=3, halving=True)
    assert halving.simulated_days(plan_params) == (4 * 1 + 2 * 1) * 3
    got = jax.jit(halving.plan)(plan_params, base, obs, privileged, key)
    for name in ("price", "order"):
        np.testing.assert_array_equal(getattr(got, name), getattr(candidates, name)[best])


def test_the_planner_needs_the_true_state(env, params, planner, plan_params, morning):
    obs, state, _ = morning
    blind = env.privileged(state, params).replace(state=None, params=None)
    with pytest.raises(ValueError, match="true state and params"):
        planner(plan_params, obs, blind, jax.random.key(0))
    with pytest.raises(ValueError, match="Planner.futures must be an int >= 1"):
        Planner(env, oracle, futures=0)
    with pytest.raises(ValueError, match="does not plan"):
        Planner(env, planner)
    with pytest.raises(ValueError, match="halving needs futures >= 2"):
        Planner(env, oracle, futures=1, halving=True)


def _unbatched(env, params, planner, plan_params, key):
    """One store's final state with no ``vmap`` at all (the cadence then runs as a plain ``lax.cond``)."""

    def run(k_reset, k_run):
        obs, state = env.reset(k_reset, params)
        return scan_days(env, planner, plan_params, params, obs, state, k_run, jnp.int32(0), DAYS)[0][1]

    return jax.jit(run)(*jax.random.split(key))


def _equal(a, b):
    jax.tree.map(np.testing.assert_array_equal, a, b)


@pytest.mark.slow
def test_batched_equals_unbatched_and_same_key_same_result(env, params, planner, plan_params):
    keys = jax.random.split(jax.random.key(2), 2)
    _, batched = rollout(env, planner, plan_params, params, keys, days=DAYS)
    _equal(batched, rollout(env, planner, plan_params, params, keys, days=DAYS)[1])
    for i, key in enumerate(keys):
        _equal(jax.tree.map(lambda x: x[i], batched), _unbatched(env, params, planner, plan_params, key))


@pytest.mark.slow
def test_off_days_play_the_base_action(env, params, planner, plan_params):
    """On days the planner does not plan (1 and 3 with every = 2), its action is the base policy's from the
    same morning; on a planned day it is one of the candidates."""
    key = jax.random.key(4)
    k_reset, k_run = jax.random.split(key)

    def run(k_reset, k_run):
        obs, state = env.reset(k_reset, params)

        def watch(obs, privileged, state, action, k_pol):
            k_base, _ = jax.random.split(k_pol)
            base = oracle(plan_params.base, obs, privileged, k_base)
            return action, base, candidate_actions(plan_params, base, obs)

        return scan_days(
            env, planner, plan_params, params, obs, state, k_run, jnp.int32(0), DAYS, watch=watch
        )[1]

    _, (action, base, candidates) = jax.jit(run)(k_reset, k_run)
    for day in range(DAYS):
        pick = lambda tree: jax.tree.map(lambda x: np.asarray(x[day]), tree)
        a, b = pick(action), pick(base)
        if day % 2:
            np.testing.assert_array_equal(a.price, b.price)
            np.testing.assert_array_equal(a.order, b.order)
        else:
            c = pick(candidates)
            same = [
                np.array_equal(a.price, c.price[i]) and np.array_equal(a.order, c.order[i]) for i in range(4)
            ]
            assert any(same), day


SMALL_FLAGS = "--plan-futures 2 --plan-horizon 3 --plan-every 2"


@pytest.mark.slow
def test_through_the_tools_equals_its_rollout(env, params, planner, plan_params):
    """``agents run --model policy:plan``'s path: the planner's actions as tool calls give its rollout's records."""
    from rbjax.agents.runs.policy import run_policy_agents

    short = params.replace(horizon=np.int32(3))
    keys = jax.random.split(jax.random.key(6), 2)
    tools, _, _ = run_policy_agents(env, short, planner, plan_params, keys)
    batched, _ = rollout(env, planner, plan_params, short, keys, days=3, records="full")
    for name, want in vars(batched).items():
        np.testing.assert_array_equal(np.asarray(getattr(tools, name)), np.asarray(want), err_msg=name)


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the default is one device")
def test_the_planners_commands_on_the_default_devices(env, params, tmp_path):
    """``run --policy plan`` on the default devices (one per core) equals a one-device rollout; its snapshots
    continued with ``--from-states --reference plan`` equal the uninterrupted run; ``sweep --policy plan`` runs."""
    from rbjax.policies import PlanSettings, make

    out = rbjax_commands(
        f"run --policy plan --stores 3 --days 4 --seed 5 {SMALL_FLAGS} --records --out P --save-states S --every 2"
        " --progress 0",
        f"run --policy plan --from-states S --days 2 --reference plan {SMALL_FLAGS} --out C --progress 0",
        f"sweep --policy plan --shelf 30,40 --seeds 2 --days 3 {SMALL_FLAGS} --out W",
        cwd=tmp_path,
    )
    assert "plan policy, 3 stores x 4 days" in out and "paper row: oracle" in out
    policy, policy_params = make("plan", env, plan=PlanSettings(futures=2, horizon=3, every=2))
    keys = jax.random.split(jax.random.key(5), 3)
    short = params.replace(horizon=np.int32(4))
    want, _ = rollout(env, policy, policy_params, short, keys, days=4, records="full")
    with np.load(tmp_path / "P" / "records.npz") as got:
        for name, value in vars(want).items():
            np.testing.assert_array_equal(got[name], np.asarray(value), err_msg=name)
    slices = pd.read_csv(tmp_path / "C" / "slices.csv")
    assert len(slices) == 3 and (slices["net_worth_diff"] == 0).all()
    np.testing.assert_array_equal(slices["ref_net_worth"], np.asarray(want.net_worth)[slices["store"], -1])
    sweep = pd.read_csv(tmp_path / "W" / "sweep.csv")
    assert len(sweep) == 4 and np.isfinite(sweep["final_net_worth"]).all()

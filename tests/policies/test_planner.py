"""rbjax.policies.planner: its candidates, no leaked randomness, batched == unbatched == sharded, its cadence,
the tools, and the commands that take it.

Small settings throughout (the CLI's ``SMALL``): the default candidates (C = 9), M = 2 futures, H = 3 days,
planning every 2nd day; the stores and days are few, and the runs share their compiled programs where they can.
"""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import rbjax_commands

from rbjax.day_loop import scan_days
from rbjax.model import future_draws
from rbjax.policies import OracleParams, PlanSettings, make, oracle
from rbjax.policies import planner as planner_module
from rbjax.policies.planner import Planner, candidate_actions, default_params, future_keys
from rbjax.policies.registry import POLICIES
from rbjax.runners.rollout import rollout

DAYS, SEED = 4, 2
SETTINGS = PlanSettings(futures=2, horizon=3, every=2)
SMALL = "--plan-futures 2 --plan-horizon 3 --plan-every 2"


@pytest.fixture(scope="module")
def planned(env):
    """(Planner, PlannerParams) as ``rbjax run --policy plan {SMALL}`` makes them."""
    return make("plan", env, plan=SETTINGS)


@pytest.fixture(scope="module")
def morning(env, params):
    """(obs, state, the oracle's action) of one store on its opening morning (the oracle orders then)."""
    obs, state = jax.jit(env.reset)(jax.random.key(3), params)
    return obs, state, oracle(OracleParams.default(), obs, env.privileged(state, params))


def test_candidates_start_with_the_base_and_move_only_what_they_say(morning):
    obs, state, base = morning
    plan_params = default_params(OracleParams.default(), price_moves=[1.5], order_moves=[0.0])
    c = jax.jit(candidate_actions, static_argnums=3)(plan_params, base, obs, True)
    assert c.price.shape == (plan_params.candidate_count(cheapest=True), 96) == (4, 96)
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
    assert default_params(OracleParams.default()).candidate_count() == 9  # base, 5 price and 3 order moves
    with pytest.raises(ValueError, match="no field 'price'"):
        default_params(OracleParams.default(), price=[2.0])


@pytest.mark.slow
@pytest.mark.parametrize("base_name", ["oracle", "base_stock"])
def test_candidate_zero_is_the_base_action_counts_included(env, params, morning, step, base_name):
    """Candidate 0 steps exactly as the base action does, records and action counts included, for a base that
    sets ``set_price`` (the oracle) and one that leaves it unset (base_stock: price calls only where a price
    changes, none on a morning it keeps every price; its action steps as it is, in its own layout). The
    candidate, and the oracle's action, step in the scenario tests' program (the session's ``step``)."""
    obs, state, _ = morning
    spec = POLICIES[base_name]
    privileged = env.privileged(state, params)
    base = spec.fn(spec.default_params(), obs, privileged, jax.random.key(1))
    zero = jax.tree.map(lambda x: x[0], candidate_actions(default_params(spec.default_params()), base, obs))
    base_step = step if base.set_price is not None else jax.jit(env.step)
    (*_, info), (*_, info0) = (
        f(jax.random.key(2), state, a, params) for f, a in ((base_step, base), (step, zero))
    )
    for name, a, b in zip(info.__dataclass_fields__, jax.tree.leaves(info), jax.tree.leaves(info0)):
        np.testing.assert_array_equal(a, b, err_msg=f"DayInfo.{name}")
    assert int(np.asarray(info.ordered).sum()) > 0  # the base orders today: the day is not empty


def altered(state, field: str):
    """``state`` with another value of ``field`` (a ``future_draws.FUTURE_DRAWS`` name), one the store could
    have drawn: a different future, the same morning."""
    w, n = state.world, state.news
    business = np.asarray(n.mode) != 0
    assert business.any()  # the morning has a business item whose days left can change
    change = {
        "world.key": lambda: w.replace(key=w.key ^ np.uint32(0x5A5A5A5A)),
        "world.cycle_len": lambda: w.replace(cycle_len=(300 - w.cycle_len).astype(w.cycle_len.dtype)),
        "world.first_cycle": lambda: w.replace(first_cycle=(w.first_cycle - 1).astype(w.first_cycle.dtype)),
        "world.cycle_quality": lambda: w.replace(cycle_quality=(6 - w.cycle_quality).astype(np.int8)),
        "world.cycle_price": lambda: w.replace(cycle_price=(4 - w.cycle_price).astype(np.int8)),
        "news.remain": lambda: n.replace(remain=jnp.where(business, (n.remain + 3) % 6, n.remain)),
    }[field]()
    return state.replace(**{field.split(".")[0]: change})


def redraw_but(keep: jax.Array):
    """``future_draws.redraw`` with the redraws of the fields where ``keep`` ([F] bool, traced) is True
    removed: those fields stay as they are (a planner that reads them)."""

    def own_future(state, env_params, key):
        cal = env_params.open_day + state.day
        for i, (field, fn) in enumerate(future_draws.FUTURE_DRAWS.items()):
            part, name = field.split(".")
            before = getattr(getattr(state, part), name)
            after = fn(state, env_params, key, cal)
            value = jnp.where(keep[i], before, getattr(getattr(after, part), name))
            state = after.replace(**{part: getattr(after, part).replace(**{name: value})})
        return state

    return own_future


LEAK = PlanSettings(futures=2, horizon=14)  # two weeks ahead (the default horizon), so tier changes and news
LEAK_KEY = 5  # endings fall inside the futures


@pytest.fixture(scope="module")
def leak_check(env, params, morning):
    """(values, states, got). values(states, keep) -> [S, C, M]: the ``LEAK`` planner's values of each state
    on the same futures (``LEAK_KEY``), with the redraws where ``keep`` ([S, F] bool) is True removed; states:
    the morning, then the morning with each future draw changed in turn; got: values of one batch (one
    program), the states as they are (nothing kept), then each field's redraw removed in turn, on the morning
    and the morning with that field changed."""
    obs, state, base = morning
    planner = Planner(env, LEAK)
    plan_params = default_params(OracleParams.default())
    candidates = candidate_actions(plan_params, base, obs)
    keys = future_keys(jax.random.key(LEAK_KEY), LEAK.futures)
    states = [state] + [altered(state, f) for f in future_draws.FUTURE_DRAWS]

    def values(states, keep):
        stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)

        def one(s, kept):
            with pytest.MonkeyPatch.context() as m:  # the planner's own_future replaced while this is traced
                m.setattr(planner_module, "own_future", redraw_but(kept))
                return planner.values(plan_params, candidates, obs, env.privileged(s, params), keys)

        return np.asarray(jax.jit(jax.vmap(one))(stacked, jnp.asarray(keep)))

    F = len(future_draws.FUTURE_DRAWS)
    pairs = [s for i in range(F) for s in (states[0], states[1 + i])]
    keep = np.concatenate([np.zeros((len(states), F), bool), np.repeat(np.eye(F, dtype=bool), 2, axis=0)])
    return values, states, values(states + pairs, keep)


@pytest.mark.slow
def test_the_planner_reads_no_draw_the_store_made_for_later_days(env, params, leak_check):
    """Each field of ``future_draws.FUTURE_DRAWS`` changed alone leaves the observation and the oracle's view
    as they were, the future's redrawn morning, and the planner's values; with that field's redraw removed,
    the values move (so each redraw is needed, and the test can fail)."""
    _, states, got = leak_check
    fields = list(future_draws.FUTURE_DRAWS)
    F = len(fields)
    view = lambda s: (env.observe(s, params), env.privileged(s, params).replace(state=None, params=None))  # noqa: E731
    key = jax.random.key(4)
    redrawn = jax.jit(future_draws.redraw)
    for field, changed in zip(fields, states[1:]):
        same = [np.array_equal(a, b) for a, b in zip(jax.tree.leaves(states[0]), jax.tree.leaves(changed))]
        assert not all(same), f"{field} was not changed"
        for a, b in zip(jax.tree.leaves(view(states[0])), jax.tree.leaves(view(changed))):
            np.testing.assert_array_equal(a, b, err_msg=f"{field} changed what an agent or the oracle sees")
        for a, b in zip(*(jax.tree.leaves(redrawn(s, params, key)) for s in (states[0], changed))):
            np.testing.assert_array_equal(a, b, err_msg=f"the future's morning depends on {field}")
    # nothing kept is the planner's own redraw (so the values below are the shipped planner's)
    kept_none = jax.jit(redraw_but(jnp.zeros(F, bool)))(states[0], params, key)
    _equal(kept_none, redrawn(states[0], params, key))
    honest, leaky = got[: len(states)], got[len(states) :].reshape(F, 2, 9, 2)
    assert honest.shape == (7, 9, 2) and len(np.unique(honest[0, :, 0])) > 1  # the candidates differ
    for i, field in enumerate(fields, 1):
        np.testing.assert_array_equal(honest[0], honest[i], err_msg=f"the planner read {field}")
    for i, field in enumerate(fields):
        assert not np.array_equal(leaky[i, 0], leaky[i, 1]), f"removing the redraw of {field} went unseen"


def test_the_planner_refuses_what_it_cannot_plan_with(env, params, planned, morning):
    planner, plan_params = planned
    obs, state, _ = morning
    blind = env.privileged(state, params).replace(state=None, params=None)
    with pytest.raises(ValueError, match="true state and params"):
        planner(plan_params, obs, blind, jax.random.key(0))
    with pytest.raises(ValueError, match="call it with a key"):
        planner(plan_params, obs, env.privileged(state, params), None)
    with pytest.raises(ValueError, match="futures must be an int >= 1, got 0"):
        PlanSettings(futures=0)
    with pytest.raises(ValueError, match="does not plan"):
        PlanSettings(base=planner)
    with pytest.raises(ValueError, match="halving needs futures 2 or more"):
        PlanSettings(futures=1, halving=True)
    with pytest.raises(ValueError, match="cheapest 1: must be True or False"):
        PlanSettings(cheapest=1)
    with pytest.raises(ValueError, match="planner settings are for the policies plan, plan_obs"):
        make("oracle", env, plan=SETTINGS)
    with pytest.raises(ValueError, match="base 'ppo': not a policy that does not plan"):
        make("plan", env, plan=PlanSettings(base="ppo"))


@pytest.mark.slow
def test_halving_keeps_the_base_and_the_better_half_then_plays_the_best_over_all_futures(
    env, params, morning, leak_check
):
    """Against a hand computation from the full planner's values of the morning on the same futures (the leak
    check's, which it checks are the shipped planner's: no second values program to compile)."""
    obs, state, base = morning
    plan_params = default_params(OracleParams.default())
    privileged = env.privileged(state, params)
    candidates = candidate_actions(plan_params, base, obs)
    v = leak_check[2][0]  # [9, 2]: the morning as it is, nothing kept
    # round one: every candidate on future 0; the base and the best 4 others (lax.top_k: ties to the lower index)
    kept = sorted([0, *(1 + np.argsort(-v[1:, 0], kind="stable")[:4])])
    best = kept[int(np.argmax(v[kept].sum(-1)))]
    halving = Planner(env, dataclasses.replace(LEAK, halving=True))
    assert halving.simulated_days(plan_params) == (9 * 1 + 5 * 1) * LEAK.horizon
    got = jax.jit(halving.plan)(plan_params, base, obs, privileged, jax.random.key(LEAK_KEY))
    for name in ("price", "order"):
        np.testing.assert_array_equal(getattr(got, name), getattr(candidates, name)[best])


@pytest.fixture(scope="module")
def short(params):
    """The params of a ``--days 4`` run: the episode ends after day 4, and the planner's futures see it end."""
    return params.replace(horizon=np.int32(DAYS))


@pytest.fixture(scope="module")
def batched(env, short, planned):
    """``rollout`` of the planner on the stores of ``rbjax run --policy plan --stores 2 --days 4 --seed 2
    {SMALL}``: (keys [2], final states [2, ...], DaySummary records [2, 4])."""
    keys = jax.random.split(jax.random.key(SEED), 2)
    # in calls of 2 days: a snapshot's continuation (after day 2) runs the same program
    records, final = rollout(env, *planned, short, keys, days=DAYS, days_per_call=2)
    return keys, final, records


def _unbatched(env, params, planned, key, reset):
    """One store with no ``vmap`` at all (the cadence then runs as a plain ``lax.cond``): its final state and,
    each morning, (the action played, the base action, the candidates). Opened by the scenario tests' reset
    program (the session's ``reset``), so that the days' program holds no reset of its own."""
    planner, plan_params = planned

    def watch(day, obs, privileged, state, action, k_pol):
        k_base, _ = jax.random.split(k_pol)
        base = oracle(plan_params.base, obs, privileged, k_base)
        return action, base, candidate_actions(plan_params, base, obs)

    def run(obs, state, k_run):
        (_, final), (_, watched) = scan_days(
            env, planner, plan_params, params, obs, state, k_run, jnp.int32(0), DAYS, watch=watch
        )
        return final, watched

    k_reset, k_run = jax.random.split(key)
    return jax.jit(run)(*reset(k_reset, params), k_run)


def _equal(a, b):
    jax.tree.map(np.testing.assert_array_equal, a, b)


@pytest.mark.slow
def test_batched_equals_unbatched_and_plans_only_on_its_days(env, short, planned, batched, reset):
    """Same keys, same result; a store in a batch (the plan's ``vmap`` rule) is the store alone (``lax.cond``);
    on the days it does not plan (1 and 3 with every = 2) it plays the base action, on the others a candidate."""
    keys, final, _ = batched
    _equal(final, rollout(env, *planned, short, keys, days=DAYS, days_per_call=2)[1])
    moved = 0
    for i, key in enumerate(keys):
        alone, (action, base, candidates) = _unbatched(env, short, planned, key, reset)
        _equal(jax.tree.map(lambda x: x[i], final), alone)
        for day in range(DAYS):
            a, b, c = jax.tree.map(lambda x: np.asarray(x[day]), (action, base, candidates))
            same = [
                np.array_equal(a.price, c.price[j]) and np.array_equal(a.order, c.order[j]) for j in range(9)
            ]
            assert any(same), (i, day)
            if day % 2:
                assert np.array_equal(a.price, b.price) and np.array_equal(a.order, b.order), (i, day)
            moved += not same[0]
    assert moved > 0  # some planned day departs from the base action


@pytest.mark.slow
def test_through_the_tools_equals_its_rollout(env, short, planned, batched):
    """``agents run --model policy:plan``'s path: the planner's actions as tool calls give its rollout's records
    and final states (the rollout's program is the batched fixture's; the engine's, another, to float rounding)."""
    from rbjax.agents.runs.policy import run_policy_agents
    from rbjax.results.records import summarize

    keys, final, records = batched
    tools, engine, _ = run_policy_agents(env, short, *planned, keys)
    for name, value in vars(summarize(tools)).items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(getattr(records, name)), err_msg=name)
    # the final states: the agent engine's step is another XLA program than the rollout's, so a float kept in
    # the state (a running mean) may differ in its last bit; counts and flags exactly
    for got, want in zip(jax.tree.leaves(engine.state), jax.tree.leaves(final), strict=True):
        got, want = np.asarray(got)[: len(keys)], np.asarray(want)
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the default is one device")
def test_the_planners_command_on_the_default_devices_and_its_snapshot_continued(
    env, planned, batched, tmp_path
):
    """``run --policy plan`` on the default devices (one per core) equals the one-device rollout; its manifest
    holds the planner's settings, and its snapshot continued with them equals the uninterrupted run. (The
    continuation runs here, on the batched fixture's program of 2 days: ``--from-states`` pairs it with a
    reference in another program, whose command path tests/cli/test_default_devices.py runs.)"""
    from rbjax.files import snapshots
    from rbjax.files.slices_folder import read_manifest
    from rbjax.runners.continuation import rollout_from

    out = rbjax_commands(
        f"run --policy plan --stores 2 --days {DAYS} --seed {SEED} {SMALL} --records --out P --save-states S"
        " --every 2 --progress 0",
        cwd=tmp_path,
    )
    assert "plan policy, 2 stores x 4 days" in out and "paper row: oracle" in out
    keys, final, _ = batched
    with np.load(tmp_path / "P" / "records.npz") as got:
        np.testing.assert_array_equal(got["net_worth"][:, -1], np.asarray(final.net_worth))
    settings = PlanSettings.from_dict(read_manifest(str(tmp_path / "S"))["plan"])
    assert settings == SETTINGS
    snap = snapshots.load(tmp_path / "S" / "day_002.npz", env)
    assert snap.day == 2 and np.array_equal(jax.random.key_data(snap.keys), jax.random.key_data(keys))
    policy, policy_params = make("plan", env, plan=settings)
    assert policy == planned[0]  # the same program as the fixture's
    _, continued = rollout_from(
        env, policy, policy_params, snap.env_params(env), snap.state, snap.keys, snap.day, DAYS - snap.day
    )
    np.testing.assert_array_equal(np.asarray(continued.net_worth), np.asarray(final.net_worth))


def test_every_command_that_takes_a_policy_takes_the_planner():
    """``sweep`` runs its points through ``rollout`` as ``run`` does (tested above); here: the parsers."""
    from rbjax.cli import parser

    for line in (
        f"run --policy plan {SMALL} --plan-halving",
        f"sweep --policy plan --rent 600,700 {SMALL}",
        f"run --policy oracle --from-states S --reference plan {SMALL}",
        "agents run --model policy:plan --stores 2 --days 2 --out A",
        "lm tasks --from-states S --days 2 --reference plan --out T.jsonl",
    ):
        for name in ("plan", "plan_obs"):  # the planner on the true state, and on what the tools show
            args = parser().parse_args(line.replace("plan ", f"{name} ").split())
            chosen = {getattr(args, n, None) for n in ("policy", "reference", "model")}
            assert chosen & {name, f"policy:{name}"}, line


def test_a_slices_manifest_holds_the_planners_settings_or_nothing():
    from rbjax.files.slices_folder import plan_settings_ok

    good = PlanSettings().as_dict()
    assert plan_settings_ok(None) and plan_settings_ok(good)
    for bad in (
        {**good, "futures": 0},
        {**good, "base": "plan"},
        {**good, "halving": "yes"},
        {"base": "oracle"},
        {**good, "moves": 3},
        [1],
    ):
        assert not plan_settings_ok(bad), bad
    older = {k: v for k, v in good.items() if k != "cheapest"}  # recorded before the field existed: off
    assert plan_settings_ok(older) and PlanSettings.from_dict(older) == PlanSettings()


def test_planners_of_equal_settings_are_one_program(env):
    """The program cache keys a program by its policy: two planners made alike are equal (and hash alike), so
    they share one compiled program; any setting that changes the program tells them apart."""
    a, b = make("plan", env)[0], make("plan", env, plan=PlanSettings())[0]
    assert a == b and hash(a) == hash(b) and a is not b
    for change in (dict(futures=2), dict(horizon=7), dict(every=2), dict(halving=True), dict(cheapest=True)):
        assert make("plan", env, plan=PlanSettings(**change))[0] != a, change
    assert make("plan", env, plan=PlanSettings(base="base_stock"))[0] != a
    from rbjax.env import Env

    assert Planner(Env(), PlanSettings()) != a  # another env, by identity

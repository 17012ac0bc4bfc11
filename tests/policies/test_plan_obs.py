"""The observation-only planner (``plan_obs``, ``PlanSettings(view="agent")``): a leak test per hidden field,
its candidates, and its registration.

Leak test: a store's morning a few days in (lots in the store, orders on their way, supplier records), then the
same morning with one hidden field changed (``belief_state.HIDDEN``, and a fixed supplier world in the params):
the observation is equal, and the agent-view planner's values and action do not move; the same planner made to
read the truth (``visible`` and the future's redraws replaced by the identity) moves on every field, so the test
can fail.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hidden_fields import changed, oracle_morning

from rbjax.model import future_draws
from rbjax.policies import OracleParams, PlanSettings, belief_state, make
from rbjax.policies import planner as planner_module
from rbjax.policies.honest_oracle import honest_oracle
from rbjax.policies.planner import Planner, default_params, future_keys
from rbjax.policies.registry import NAMES, PLANNING
from rbjax.runners.rollout import rollout

LEAK = PlanSettings(futures=2, horizon=14, view="agent")
DAYS_IN = 6


@pytest.fixture(scope="module")
def morning(env, params):
    """(obs, state) of one oracle store on its day DAYS_IN."""
    return oracle_morning(env, params, DAYS_IN)


def test_every_hidden_field_is_changed_and_listed():
    assert set(belief_state.HIDDEN) >= set(future_draws.FUTURE_DRAWS)
    for field in ("suppliers.quality_tier", "suppliers.quote_quality", "lots.quality", "pending.quality"):
        assert field in belief_state.HIDDEN


@pytest.mark.slow
def test_the_agent_view_reads_no_hidden_field(env, params, morning):
    obs, state = morning
    fields = list(belief_state.HIDDEN)
    states = [state] + [changed(state, f) for f in fields]
    # the params' fixed world: the true one and a changed one, with the truthful morning
    world_params = [
        params.replace(world=state.world),
        params.replace(world=changed(state, "world.key").world),
    ]
    for field, other in zip(fields, states[1:]):
        differs = [not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(other))]
        assert any(differs), f"{field} was not changed"
        for a, b in zip(
            jax.tree.leaves(env.observe(state, params)), jax.tree.leaves(env.observe(other, params))
        ):
            np.testing.assert_array_equal(a, b, err_msg=f"{field} changed what an agent sees")
    plan_params = default_params(OracleParams.default())
    keys = future_keys(jax.random.key(5), LEAK.futures)
    honest = Planner(env, LEAK)

    def seen(planner, action: bool):
        """``(state, params) -> (the candidates' values [C, M], the planner's action or None)``."""

        def one(s, p):
            privileged = env.privileged(s, p)
            base = honest_oracle(OracleParams.default(), obs, privileged)  # agent-legal, as the planner's own
            # and a few units from every supplier of each shelved product, so that today's hidden quality of
            # every quote reaches the futures (the truth-reading planner below must see it)
            base = base.replace(order=base.order + 5.0 * base.shelf[:, None])
            candidates = planner.candidates(plan_params, base, obs, privileged, jax.random.key(6))
            values = planner.values(plan_params, candidates, obs, privileged, keys)
            return values, (planner(plan_params, obs, privileged, jax.random.key(7)) if action else None)

        return one

    # three programs: values and action on each morning, values on the params' two worlds, and (below) the
    # truth-reading planner's values on each morning
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)
    values, actions = jax.jit(jax.vmap(seen(honest, True), in_axes=(0, None)))(stacked, params)
    values = np.asarray(values)
    pv, _ = jax.jit(jax.vmap(seen(honest, False), in_axes=(None, 0)))(
        state, jax.tree.map(lambda *x: jnp.stack(x), *world_params)
    )
    pv = np.asarray(pv)
    C = honest.candidate_count(plan_params)
    assert values.shape == (len(states), C, 2) and len(np.unique(values[0, :, 0])) > 1
    for i, field in enumerate(fields, 1):
        np.testing.assert_array_equal(values[0], values[i], err_msg=f"the agent view read {field}")
        for a in jax.tree.leaves(actions):
            np.testing.assert_array_equal(
                np.asarray(a)[0], np.asarray(a)[i], err_msg=f"its action read {field}"
            )
    np.testing.assert_array_equal(pv[0], pv[1], err_msg="the agent view read the params' world")
    # the same planner reading the truth: every field moves its values
    with pytest.MonkeyPatch.context() as m:
        m.setattr(belief_state, "visible", lambda s: s)
        m.setattr(belief_state, "public_params", lambda p: p)
        m.setattr(belief_state, "sample", lambda s, p, b, k: s)
        m.setattr(planner_module, "own_future", lambda s, p, k: s)
        leaky, _ = jax.jit(jax.vmap(seen(Planner(env, LEAK), False), in_axes=(0, None)))(stacked, params)
    for i, field in enumerate(fields, 1):
        assert not np.array_equal(leaky[0], leaky[i]), f"reading {field} went unseen"


def test_plan_obs_is_registered_everywhere_a_planner_is(env):
    assert "plan_obs" in PLANNING and "plan_obs" in NAMES and "honest_oracle" in NAMES
    planner, plan_params = make("plan_obs", env, plan=PlanSettings(futures=2))
    assert planner.settings.view == "agent" and planner.settings.futures == 2
    assert planner.simulated_days(plan_params) == 11 * 2 * 14  # C = 9 + the two supplier moves
    assert make("plan", env)[0].settings.view == "state"
    with pytest.raises(ValueError, match="view"):
        PlanSettings(view="truth")
    assert (
        PlanSettings.from_dict({k: v for k, v in PlanSettings().as_dict().items() if k != "view"}).view
        == "state"
    )


@pytest.mark.slow
def test_a_planner_plays_on_with_a_shipped_student(env, params):
    """``--plan-base distilled``: policy iteration's next teacher from the command line. The planner's base is the
    shipped student with its params, its manifest settings name it, and its days run."""
    from rbjax.cli import parser

    settings = PlanSettings(base="distilled", futures=2, horizon=3, every=2)
    planner, plan_params = make("plan", env, plan=settings)
    student, student_params = make("distilled", env)
    assert planner.base == student
    for a, b in zip(jax.tree.leaves(plan_params.base), jax.tree.leaves(student_params)):
        np.testing.assert_array_equal(a, b)
    assert PlanSettings.from_dict(settings.as_dict()) == settings  # a run's manifest records the name
    args = parser().parse_args("run --policy plan --plan-base distilled_obs".split())
    assert args.plan_base == "distilled_obs"
    with pytest.raises(ValueError, match="not a policy that does not plan"):
        PlanSettings(base="plan_obs")
    keys = jax.random.split(jax.random.key(1), 2)
    _, final = rollout(env, planner, plan_params, params.replace(horizon=np.int32(2)), keys, days=2)
    assert np.isfinite(np.asarray(final.net_worth)).all()

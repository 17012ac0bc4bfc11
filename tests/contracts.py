"""The environment contract every engine variant must keep (the default; 19 labels, 4 suppliers and float64).

``check_env(env, params)`` plays a few stores under the random policy and checks: the step compiles once and
keeps its dtypes; a vmapped batch equals the stores stepped one by one (``one_by_one``: the variant skips this
second compile, as what ``vmap`` does to a step does not depend on the grouping, the supplier count or the float
width); every value stays finite; units are conserved (ordered = sold + expired + in the lots + pending); the cash
identity holds.
"""

import chex
import jax
import numpy as np
from helpers import oracle_layout, uncommitted

from rbjax.policies import RandomParams, random_policy
from rbjax.runners.rollout_programs import open_stores


def check_env(env, params, stores: int = 4, days: int = 12, seed: int = 0, one_by_one: bool = True) -> None:
    step = jax.jit(env.step)
    batched_step = jax.jit(jax.vmap(chex.assert_max_traces(env.step, n=1), in_axes=(0, 0, 0, None)))
    policy = jax.jit(jax.vmap(random_policy, in_axes=(None, 0, None, 0)))
    keys = jax.random.split(jax.random.key(seed), stores)
    # a rollout's reset program (for the default engine, the golden records' one), its stores then uncommitted,
    # so that the steps below are the scenario tests' programs
    obs, state = uncommitted(open_stores(env, keys, params, (jax.devices()[0],)))
    dtypes = jax.tree.map(lambda x: x.dtype, state)
    start_funds = np.asarray(state.funds, np.float64)
    ordered = sold = expired = spent = takings = rent = 0.0
    for day in range(days):
        pairs = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, day)))(keys)
        k_pol, k_env = pairs[:, 0], pairs[:, 1]
        # the oracle's layout (helpers.oracle_layout: the same day), one batched program with tests/rl's
        action = jax.vmap(oracle_layout)(state, policy(RandomParams.default(), obs, None, k_pol))
        obs, new, reward, _, _, info = batched_step(k_env, state, action, params)
        for s in range(stores if one_by_one else 0):  # batched == unbatched, bit for bit
            one = jax.tree.map(lambda x: x[s], (state, action))
            # the scenario tests' single-store program (tests/conftest.py's step)
            _, single, _, _, _, single_info = step(k_env[s], *one, params)
            for a, b in zip(
                jax.tree.leaves((single, single_info)),
                jax.tree.leaves(jax.tree.map(lambda x: x[s], (new, info))),
            ):
                assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
        assert jax.tree.map(lambda x: x.dtype, new) == dtypes
        state = new
        ordered += np.asarray(info.ordered).sum(-1)
        sold += np.asarray(info.sold).sum(-1)
        expired += np.asarray(info.expired).sum(-1)
        spent += np.asarray(info.order_cost, np.float64)
        takings += np.asarray(info.revenue, np.float64) - np.asarray(info.refunds, np.float64)
        rent += float(params.rent) * np.asarray(info.alive)
        for leaf in jax.tree.leaves((state, info)):
            if np.issubdtype(leaf.dtype, np.floating):
                assert np.isfinite(np.asarray(leaf)).all()
    held = (
        np.asarray(state.lots.store).sum((-1, -2))
        + np.asarray(state.lots.wait).sum((-1, -2))
        + np.asarray(state.pending.qty).sum((-1, -2))
    )
    assert (ordered > 0).all()
    np.testing.assert_array_equal(ordered, sold + expired + held)
    np.testing.assert_allclose(
        np.asarray(state.funds, np.float64), start_funds - spent + takings - rent, rtol=1e-5, atol=1.0
    )

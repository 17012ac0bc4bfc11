"""rbjax.runners.rollout: whole random-policy episodes, determinism, batch position, devices."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_script

from rbjax.policies import RandomParams, random_policy
from rbjax.runners.rollout import rollout


@pytest.fixture(scope="module")
def episodes(env, params):
    """Three 180-day random-policy stores with full per-product records."""
    keys = jax.random.split(jax.random.key(42), 3)
    rec, final = rollout(env, random_policy, RandomParams.default(), params, keys, days=180, records="full")
    return jax.tree.map(np.asarray, rec), final


def test_unit_conservation(episodes):
    rec, final = episodes
    alive = rec.alive[..., None]
    ordered = (rec.ordered * alive).sum(1)
    accounted = (
        rec.sold.sum(1)
        + rec.expired.sum(1)
        + np.asarray(final.lots.store).sum(-1)
        + np.asarray(final.lots.wait).sum(-1)
        + np.asarray(final.pending.qty).sum(1)
    )
    assert rec.ordered.sum() > 0 and (ordered == accounted).all()
    assert (rec.returned <= rec.sold).all()


def test_cash_identity(episodes, params):
    rec, final = episodes
    days = rec.alive.sum(1)
    expected = (
        float(params.initial_funds)
        - rec.order_cost.sum(1)
        + rec.revenue.sum(1)
        - rec.refunds.sum(1)
        - float(params.rent) * days
    )
    np.testing.assert_allclose(np.asarray(final.funds), expected, rtol=1e-5, atol=1.0)


def test_episodes_finite_and_off_shelf_never_sells(episodes):
    rec, final = episodes
    for leaf in jax.tree.leaves(final):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert np.isfinite(np.asarray(leaf)).all()
    assert np.isfinite(rec.net_worth).all()
    assert rec.sold[..., 40:].sum() == 0  # the random policy shelves products 0..39 only
    assert (rec.sold <= rec.demand).all()
    assert (rec.stockout == (rec.demand > rec.sold)).all()


def test_same_key_same_trajectory_and_batched_equals_unbatched(env, params, reset, step, episodes):
    rec, _ = episodes
    key = jax.random.split(jax.random.key(42), 3)[1]
    k_reset, k_run = jax.random.split(key)
    obs, s = reset(k_reset, params)
    policy = jax.jit(random_policy)
    for d in range(12):
        k_pol, k_env = jax.random.split(jax.random.fold_in(k_run, d))
        obs, s, r, term, trunc, info = step(
            k_env, s, policy(RandomParams.default(), obs, None, k_pol), params
        )
        assert (np.asarray(info.sold) == rec.sold[1, d]).all()
        np.testing.assert_allclose(float(info.net_worth), rec.net_worth[1, d], rtol=1e-6)


def test_a_store_does_not_depend_on_its_position_in_a_large_batch(env, params):
    """1,024 stores = 32 copies of 32 seeds: every copy must match the first, record for record.

    Guards an XLA:CPU miscompile: with the review gain written as a float power, stores at positions
    >= B/3 of a 1,024-store batch read another product's gain from day 3 on, so a swept point's results
    depended on where it sat in the batch (an (s, S) point scored 89 days alone and 146 in a sweep).
    """
    from rbjax.policies import BEST_RATED, SSParams, s_S

    seeds, copies = 32, 32
    keys = jnp.concatenate([jax.random.split(jax.random.key(0), seeds)] * copies)
    policy_params = SSParams.default().replace(supplier=jnp.int32(BEST_RATED))
    rec, _ = rollout(env, s_S, policy_params, params, keys, days=10, records="full")
    for name, x in zip(rec.__dataclass_fields__, jax.tree.leaves(rec)):
        x = np.asarray(x).reshape((copies, seeds) + x.shape[1:])
        differ = [c for c in range(1, copies) if not np.array_equal(x[c], x[0])]
        assert not differ, f"DayInfo.{name}: copies {differ[:5]} differ from the first"
    assert np.asarray(rec.sold).sum() > 0


SHARDED = """
import sys
sys.path.insert(0, TESTS)
import jax, numpy as np
import rbjax
rbjax.devices.split_cpu(2)
import golden
from rbjax.policies import random_policy, RandomParams
assert len(jax.devices()) == 2
env = rbjax.Env()
keys = jax.random.split(jax.random.key(golden.SEED), golden.STORES)[:3]    # odd: the sharded batch is padded
rec, state = rbjax.rollout(env, random_policy, RandomParams.default(), env.default_params(), keys,
                           days=golden.DAYS, records="full")
expected = np.load(golden.FIXTURE)
for name, value in golden.record_arrays(rec).items():
    assert np.array_equal(value, expected[f"random/records/{name}"][:3]), name
for name, value in golden.state_arrays(state).items():
    assert np.array_equal(value, expected[f"random/state/{name}"][:3]), name
print("identical")
"""


def test_sharded_rollout_equals_single_device():
    """2 forced CPU devices (an odd batch, padded) give the golden fixture's one-device records and state."""
    run_script(SHARDED.replace("TESTS", repr(str(Path(__file__).parent))), "identical")

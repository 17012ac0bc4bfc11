"""rbjax.model.supplier_world: the lazy selection keeps, for every key, the world the rule as written keeps."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.model import supplier_world, suppliers


def _worlds(make, keys, params, config):
    return jax.jit(jax.vmap(lambda k: make(k, params, config, return_stats=True)))(keys)


def _assert_same(got, want):
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=jax.tree_util.keystr(path))


@pytest.mark.slow
def test_the_lazy_selection_keeps_the_reference_world_bit_for_bit(env, params):
    """12 stores x 96 products: the kept attempts, the whole kept world (cycles, transport, tier tables, key) and
    the kept attempts' statistics equal those of ``make_world_reference``, which draws and plays all 50
    attempts and applies ``select``. Among them are products that stop at their first attempt and products
    that play all 50 (none inside the band), so both ends of the pool's work are covered."""
    keys = jax.random.split(jax.random.key(2024), 12)
    want = _worlds(suppliers.make_world_reference, keys, params, env.config)
    got = _worlds(supplier_world.make_world, keys, params, env.config)
    _assert_same(got, want)
    band = np.asarray(params.copula_rho)
    corr = np.asarray(want[1])
    outside = (corr < band[:, 0]) | (corr > band[:, 1])
    assert outside.any() and not outside.all()  # some products kept the closest attempt, not a hit


def test_one_attempt_keeps_the_first_attempt(env, params):
    config = dataclasses.replace(env.config, supplier_attempts=1)
    keys = jax.random.split(jax.random.key(5), 2)
    one = lambda make: jax.jit(jax.vmap(lambda k: make(k, params, config)))(keys)
    _assert_same(one(supplier_world.make_world), one(suppliers.make_world_reference))


@pytest.mark.slow
def test_stores_with_their_own_params_keep_the_reference_worlds(env, params):
    """A batch whose params vary by store (here the copula band) plays each store in a pool of its own (the
    shared-params batch pools every store's products): still the reference's worlds, store by store."""
    keys = jax.random.split(jax.random.key(3), 4)
    per_store = params.replace(
        copula_rho=jnp.stack([params.copula_rho + d for d in (0.0, 0.01, -0.01, 0.02)])
    )
    axes = jax.tree.map(lambda _: None, params).replace(copula_rho=0)
    run = lambda make: jax.jit(jax.vmap(lambda k, p: make(k, p, env.config), in_axes=(0, axes)))(
        keys, per_store
    )
    _assert_same(run(supplier_world.make_world), run(suppliers.make_world_reference))


def test_the_price_cuts_give_the_cdfs_tier_for_every_float32_near_them():
    """``tier_code`` finds the price tier by comparing z with ``price_cuts`` instead of evaluating the normal CDF
    (``suppliers.copula_price_tier``, which ``suppliers.draw_tier_pairs`` calls): the two agree on every float32
    within 2^16 steps of each cut and on a million normal draws, so the drawn tiers are the same bits."""
    cuts = np.asarray(supplier_world.price_cuts(), np.float32)
    near = cuts.view(np.int32)[:, None] + np.arange(-(2**16), 2**16, dtype=np.int32)
    z = np.concatenate([near.view(np.float32).ravel(), np.random.default_rng(0).normal(size=10**6)])
    z = jnp.asarray(z, jnp.float32)
    by_cuts = jax.jit(lambda z: sum((z >= c).astype(jnp.int32) for c in cuts))(z)
    np.testing.assert_array_equal(np.asarray(by_cuts), np.asarray(jax.jit(suppliers.copula_price_tier)(z)))
    assert np.array_equal(np.unique(np.asarray(by_cuts)), np.arange(suppliers.PRICE_TIERS))


@pytest.mark.slow
def test_the_kept_worlds_do_not_depend_on_the_pool_width(env, params):
    """``select_pooled`` at 16 and 32 lanes a store (``pool_lanes``'s two widths; at 6 stores the wider pool also
    finishes its stragglers in the narrow loop): the same kept attempts and statistics."""
    J, K, A = env.config.num_products, env.config.num_suppliers, env.config.supplier_attempts
    keys = jax.random.split(jax.random.key(9), 6)
    k_world, k_attempts = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
    seeds = jax.vmap(lambda k: supplier_world.attempt_seeds(k, A))(k_attempts)
    rule = jax.vmap(lambda k: suppliers.rule_seed_of(jax.random.key_data(k)))(k_world)
    pooled = lambda lanes: jax.jit(lambda s, r: supplier_world.select_pooled(params, s, r, J, K, lanes))
    _assert_same(pooled(16)(seeds, rule), pooled(32)(seeds, rule))

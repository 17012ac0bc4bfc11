"""rbjax.model.suppliers: quotes inside their tier bands, the diversity rule, tier cycles, transport ranges."""

import jax
import jax.numpy as jnp
import numpy as np
from helpers import J, K

from rbjax.model import supplier_world, suppliers


def test_supplier_quotes_obey_bands_and_diversity(env, params):
    world = supplier_world.make_world(jax.random.key(11), params, env.config)

    def day(tiers, cal):
        q, p = suppliers.update_tiers(world, params, *tiers, cal, redraw_all=cal == 0)
        price, quality = suppliers.daily_quotes(world, params, q, p, cal, jnp.zeros(J))
        return (q, p), (q, p, price, quality)

    zero = jnp.zeros((J, K), jnp.int8)  # the state's tier dtype
    _, (q, p, price, quality) = jax.lax.scan(day, (zero, zero), jnp.arange(0, 300))
    q, p, price, quality = (np.asarray(x) for x in (q, p, price, quality))
    assert ((q == 6) & (p == 4)).any(-1).all()  # a bad-cheap supplier every day, for every product
    # Q1 is checked before the bad override, which may hit the only Q1 supplier (the reference tolerates < 20
    # such dates per product), so a best-quality supplier is present on nearly every day, not every day
    assert (q == 0).any(-1).mean() > 0.97
    qb, pb = np.asarray(params.quality_bands), np.asarray(params.price_bands)
    anchor = np.asarray(params.anchor_rating)[None, :, None]
    lo = np.clip(anchor + qb[q, 0], 1, 5) - 1e-4
    hi = np.clip(anchor + qb[q, 1], 1, 5) + 1e-4
    assert ((quality >= lo) & (quality <= hi)).all()
    ratio = price / np.asarray(params.base_cost)[:300, :, None]
    assert ((ratio >= pb[p, 0] - 1e-5) & (ratio <= pb[p, 1] + 1e-5)).all()
    changes = (np.diff(q, axis=0) != 0).sum(0)
    assert changes.max() >= 1 and np.median(changes) <= 4  # cycles of 120-180 days
    tmin, tmax = np.asarray(world.transport_min), np.asarray(world.transport_max)
    assert (tmin >= 2).all() and (tmin < tmax).all() and (tmax <= 7).all()


# the selection among attempts (docs/model.md, "Suppliers")


def _calendar_world(env, params, seed):
    return suppliers.draw_world(
        jax.random.key(seed), params, env.config, suppliers.calendar_cycles(params), 0
    )


def _day_by_day(world, params):
    """The calendar played one day at a time with ``update_tiers``: tiers [T, J, K] and lacking dates [J]."""

    def day(carry, cal):
        q, p = suppliers.update_tiers(world, params, *carry, cal, redraw_all=cal == 0)
        return (q, p), (q, p)

    zero = jnp.zeros((J, K), jnp.int8)
    _, (q, p) = jax.lax.scan(day, (zero, zero), jnp.arange(params.base_cost.shape[0]))
    q, p = np.asarray(q, np.int32), np.asarray(p, np.int32)
    lacking = (~((q == 0).any(-1) & ((q == 6) & (p == 4)).any(-1))).sum(0)
    return q, p, lacking


def test_the_event_scan_counts_the_lacking_dates_of_a_day_by_day_replay(env, params):
    """The rejection rule's count: dates (after the day's diversity rule) without a Q1 or a (Q7, P5) supplier,
    over the whole calendar. The event scan must give the day-by-day count exactly; the pooled correlation
    from expected moments must match the correlation of drawn rows within 0.02."""
    world = _calendar_world(env, params, 5)
    corr, lacking = jax.jit(suppliers.selection_stats)(world, params)
    q, p, want = _day_by_day(world, params)
    np.testing.assert_array_equal(np.asarray(lacking), want)
    assert want.sum() > 0  # the count is exercised: the bad override sometimes hits the only Q1 supplier
    rng = np.random.default_rng(0)
    pb, qb = np.asarray(params.price_bands), np.asarray(params.quality_bands)
    price = np.asarray(params.base_cost)[:, :, None] * rng.uniform(pb[p, 0], pb[p, 1])
    anchor = np.asarray(params.anchor_rating)[None, :, None]
    quality = np.clip(anchor + rng.uniform(qb[q, 0], qb[q, 1]), 1, 5)
    drawn = [np.corrcoef(price[:, j].ravel(), quality[:, j].ravel())[0, 1] for j in range(J)]
    assert np.abs(np.asarray(corr) - drawn).max() < 0.02


def test_the_rule_on_tier_codes_equals_the_rule_on_tier_pairs():
    """The scan's ``diversity_codes`` and the daily step's ``diversity`` on 20,000 random product-days, a third
    with a (Q7, P5) supplier planted, a third with a Q1 supplier planted."""
    rng = np.random.default_rng(0)
    n = 20_000
    q, p = rng.integers(0, 7, (n, K)), rng.integers(0, 5, (n, K))
    q[: n // 3, 1], p[: n // 3, 1] = suppliers.WORST_QUALITY, suppliers.CHEAPEST_PRICE
    q[n // 3 : 2 * n // 3, 3] = suppliers.BEST_QUALITY
    u = jnp.asarray(rng.uniform(size=(n, 3)), jnp.float32)
    q, p = jnp.asarray(q, jnp.int32), jnp.asarray(p, jnp.int32)
    want_q, want_p = jax.jit(suppliers.diversity)(q, p, u)
    codes = jax.jit(suppliers.diversity_codes)(list((q * suppliers.PRICE_TIERS + p).T), u)
    got = np.stack([np.asarray(c) for c in codes], -1)
    np.testing.assert_array_equal(got // suppliers.PRICE_TIERS, np.asarray(want_q))
    np.testing.assert_array_equal(got % suppliers.PRICE_TIERS, np.asarray(want_p))
    assert (np.asarray(want_q) != np.asarray(q)).any()  # the rule does act


def test_the_kept_attempt_is_the_first_in_the_band_or_the_closest_valid_one():
    band = jnp.asarray([[0.2, 0.3]] * 4)
    corr = jnp.asarray(
        [
            [0.50, 0.35, 0.10, 0.25],
            [0.25, 0.29, 0.15, 0.60],
            [0.28, 0.31, 0.40, 0.26],
        ]
    )
    lacking = jnp.asarray([[0, 0, 0, 0], [0, 25, 0, 0], [0, 0, 30, 0]])
    # product 0: attempt 1 is the first in the band; 1: attempt 1 is rejected (25 dates), 2 is the closest
    # valid; 2: none in the band, 1 is closest among the valid (2 is rejected); 3: attempt 0, the first hit
    np.testing.assert_array_equal(np.asarray(suppliers.select(corr, lacking, band)), [1, 2, 1, 0])


def test_the_selection_keeps_attempts_inside_the_band_and_the_same_key_gives_the_same_world(env, params):
    make = jax.jit(lambda k: supplier_world.make_world(k, params, env.config, return_stats=True))
    world, corr, lacking = make(jax.random.key(3))
    again, _, _ = make(jax.random.key(3))
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(world), jax.tree.leaves(again)))
    band = np.asarray(params.copula_rho)
    inside = (np.asarray(corr) >= band[:, 0]) & (np.asarray(corr) <= band[:, 1])
    assert inside.mean() > 0.95 and (np.asarray(lacking) < suppliers.MAX_LACKING_DATES).all()
    assert world.cycle_quality.shape == (suppliers.TIER_CYCLES, J, K)

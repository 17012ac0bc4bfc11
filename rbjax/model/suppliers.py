"""Generated suppliers (``docs/model.md``): tiers, cycles, diversity rule, daily quotes.

Tier pairs live in the state ([J, K] int8, quality Q1..Q7 -> 0..6, price P1..P5 -> 0..4). A supplier
redraws its pair on the first day of each of its cycles, then the diversity rule runs every day; the
draws come from the World key folded with the calendar day, so a World fixes the whole quote stream.
Not reproduced: the reference's offline selection among 50 generation attempts by price-quality
correlation (``docs/model.md``, "Suppliers").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr, ndtri

from rbjax.config import EnvConfig
from rbjax.kernels import rng
from rbjax.kernels.xla import materialize
from rbjax.params import EnvParams, World
from rbjax.state import Suppliers

BEST_QUALITY, WORST_QUALITY, CHEAPEST_PRICE = 0, 6, 4
TIER_CYCLES = 4
TRANSPORT_DAYS = (2, 7)  # lead-time ranges satisfy 2 <= tmin < tmax <= 7


def cycle_index(world_cycle_len, cost_series_start, cal_day):
    return (cal_day - cost_series_start[:, None]) // world_cycle_len.astype(jnp.int32)


def make_world(key: jax.Array, params: EnvParams, config: EnvConfig) -> World:
    """Draw cycle lengths, transport ranges and the tier pair of every cycle for every (product, supplier)."""
    J, K = config.num_products, config.num_suppliers
    t_lo, t_hi = TRANSPORT_DAYS
    k_cycle, k_t1, k_t2, k_tiers, k_world = jax.random.split(key, 5)
    cycle = rng.randint(
        k_cycle, jnp.full((J, K), params.cycle_range[0]), jnp.full((J, K), params.cycle_range[1])
    )
    a = rng.randint(k_t1, jnp.full((J, K), t_lo), jnp.full((J, K), t_hi))
    b = rng.randint(k_t2, jnp.full((J, K), t_lo), jnp.full((J, K), t_hi))
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    equal = lo == hi
    hi = jnp.where(equal & (hi < t_hi), hi + 1, hi)
    lo = jnp.where(equal & (lo == t_hi), lo - 1, lo)  # lo == hi == t_hi: widen downwards
    quality, price = _draw_tier_pairs(k_tiers, params, (TIER_CYCLES, J, K))
    first = cycle_index(cycle, params.cost_series_start, params.open_day - config.history_days)
    # small integer types: the world is a quarter of a store's state otherwise
    return World(
        key=jax.random.key_data(k_world),
        cycle_len=cycle.astype(jnp.int16),
        transport_min=lo.astype(jnp.int8),
        transport_max=hi.astype(jnp.int8),
        first_cycle=first.astype(jnp.int16),
        cycle_quality=quality.astype(jnp.int8),
        cycle_price=price.astype(jnp.int8),
    )


def _draw_tier_pairs(key: jax.Array, params: EnvParams, shape):
    """Gaussian-copula tier pairs: quality = floor(7 u1), price = floor(5 Phi(z2)), corr(z1, z2) = rho ~ U(band)."""
    u = rng.uniform(key, shape + (3,))
    lo, hi = params.copula_rho[:, 0:1], params.copula_rho[:, 1:2]  # [J, 1]: broadcast over suppliers
    rho = lo + (hi - lo) * u[..., 2]
    z2 = rho * ndtri(u[..., 0]) + jnp.sqrt(1.0 - rho**2) * ndtri(u[..., 1])
    q = jnp.minimum(jnp.floor(7.0 * u[..., 0]), 6).astype(jnp.int32)
    p = jnp.minimum(jnp.floor(5.0 * ndtr(z2)), 4).astype(jnp.int32)
    return q, p


def update_tiers(world: World, params: EnvParams, quality_tier, price_tier, cal_day, redraw_all=False):
    """Tier pairs for calendar day ``cal_day``: suppliers starting a cycle take its drawn pair, then the
    enforced-diversity rule runs (its overrides last until the supplier's next cycle)."""
    k_bad, k_best, k_best_price = jax.random.split(jax.random.fold_in(world.prng(), cal_day), 3)
    J, K = quality_tier.shape
    idx = cycle_index(world.cycle_len, params.cost_series_start, cal_day)
    starts = (
        (cal_day - params.cost_series_start[:, None]) % world.cycle_len.astype(jnp.int32) == 0
    ) | redraw_all
    which = (idx - world.first_cycle.astype(jnp.int32)) % TIER_CYCLES == jnp.arange(TIER_CYCLES)[
        :, None, None
    ]
    pick = lambda table: jnp.sum(jnp.where(which, table.astype(jnp.int32), 0), 0)
    q = jnp.where(starts, pick(world.cycle_quality), quality_tier.astype(jnp.int32))
    p = jnp.where(starts, pick(world.cycle_price), price_tier.astype(jnp.int32))
    # diversity: someone must be (Q7, P5), and someone Q1 (checked before the first override)
    had_best = (q == BEST_QUALITY).any(-1, keepdims=True)
    is_bad = (q == WORST_QUALITY) & (p == CHEAPEST_PRICE)
    no_bad = ~is_bad.any(-1, keepdims=True)
    pick_bad = rng.randint(k_bad, jnp.zeros((J,), jnp.int32), jnp.full((J,), K - 1))
    bad_slot = jnp.where(no_bad[:, 0], pick_bad, jnp.argmax(is_bad, -1))
    force_bad = no_bad & (jnp.arange(K) == bad_slot[:, None])
    q = jnp.where(force_bad, WORST_QUALITY, q)
    p = jnp.where(force_bad, CHEAPEST_PRICE, p)
    pick_best = rng.randint(k_best, jnp.zeros((J,), jnp.int32), jnp.full((J,), K - 2))
    best_slot = pick_best + (pick_best >= bad_slot)  # uniform over the suppliers other than the bad one
    force_best = ~had_best & (jnp.arange(K) == best_slot[:, None])
    best_price = rng.randint(k_best_price, jnp.zeros((J,), jnp.int32), jnp.full((J,), 4)).astype(jnp.int32)
    q = jnp.where(force_best, BEST_QUALITY, q)
    p = jnp.where(force_best, best_price[:, None], p)
    q, p = materialize(q.astype(jnp.int8), p.astype(jnp.int8))  # computed once, not inside each consumer
    return q, p


def daily_quotes(world: World, params: EnvParams, quality_tier, price_tier, cal_day, supply_effect):
    """Today's (price [J, K] after supply news, hidden quality [J, K]), drawn inside the tier bands."""
    u = rng.uniform(
        jax.random.fold_in(jax.random.fold_in(world.prng(), cal_day), 7),
        quality_tier.shape + (2,),
        params.base_cost.dtype,
    )
    qb = params.quality_bands[quality_tier.astype(jnp.int32)]  # [J, K, 2]
    pb = params.price_bands[price_tier.astype(jnp.int32)]
    quality = params.anchor_rating[:, None] + qb[..., 0] + (qb[..., 1] - qb[..., 0]) * u[..., 0]
    quality = jnp.round(jnp.clip(quality, 1.0, 5.0) * 1e4) / 1e4
    multiplier = pb[..., 0] + (pb[..., 1] - pb[..., 0]) * u[..., 1]
    price = params.base_cost[cal_day][:, None] * multiplier * (1.0 - supply_effect[:, None])
    return price, quality


def advance(suppliers: Suppliers, world: World, params: EnvParams, cal_day, supply_effect) -> Suppliers:
    """The tiers and quotes of calendar day ``cal_day`` (supply_effect [J]: that day's supply-side news)."""
    q_tier, p_tier = update_tiers(world, params, suppliers.quality_tier, suppliers.price_tier, cal_day)
    price, quality = daily_quotes(world, params, q_tier, p_tier, cal_day, supply_effect)
    f = suppliers.quote_price.dtype
    return suppliers.replace(
        quality_tier=q_tier, price_tier=p_tier, quote_price=price.astype(f), quote_quality=quality.astype(f)
    )

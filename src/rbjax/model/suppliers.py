"""Generated suppliers (``docs/model.md``): tiers, cycles, diversity rule, daily quotes.

Tier pairs live in the state ([J, K] int8, quality Q1..Q7 -> 0..6, price P1..P5 -> 0..4). A supplier
redraws its pair on the first day of each of its cycles, then the diversity rule runs every day; the
draws come from the World key folded with the calendar day, so a World fixes the whole quote stream.
``make_world_reference`` keeps, per product, one of ``EnvConfig.supplier_attempts`` attempts by the reference's
selection rule (``docs/model.md``, "Suppliers"), drawing and playing every attempt: the rule as written, which
``rbjax.model.supplier_world.make_world`` (what ``Env.reset`` uses) reproduces bit for bit at a fraction of the cost.
"""

from __future__ import annotations

from functools import partial, reduce

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr, ndtri

from rbjax.config import EnvConfig
from rbjax.kernels import rng
from rbjax.kernels.xla import materialize
from rbjax.params import EnvParams, World
from rbjax.state import Suppliers

BEST_QUALITY, WORST_QUALITY, CHEAPEST_PRICE = 0, 6, 4
PRICE_TIERS, TIER_CODES = 5, 35  # a tier pair's code: PRICE_TIERS * quality + price
BAD_CODE = WORST_QUALITY * PRICE_TIERS + CHEAPEST_PRICE
TIER_CYCLES = 4
TRANSPORT_DAYS = (2, 7)  # lead-time ranges satisfy 2 <= tmin < tmax <= 7


def cycle_index(world_cycle_len, cost_series_start, cal_day):
    return (cal_day - cost_series_start[:, None]) // world_cycle_len.astype(jnp.int32)


def make_world_reference(key: jax.Array, params: EnvParams, config: EnvConfig, return_stats: bool = False):
    """The episode's supplier world (``docs/model.md``, "Suppliers"): ``config.supplier_attempts`` attempts
    drawn over the whole calendar, the one ``select`` keeps for each product, cut to the episode's window.
    Every attempt is drawn and played (about 10 MB and 36 ms per store): the reference for
    ``supplier_world.make_world``, which keeps the same world without holding the attempts.

    With ``return_stats`` also the kept attempts' (pooled correlation [J], lacking dates [J]).
    """
    k_world, k_attempts = jax.random.split(key)
    cycles, count = calendar_cycles(params), config.supplier_attempts
    attempts = jax.vmap(lambda k: draw_world(k, params, config, cycles, jnp.int32(0)))(
        jax.random.split(k_attempts, count)
    )
    # one stream of daily draws for every attempt: the kept world replays the tiers its statistics saw
    attempts = attempts.replace(key=jax.random.key_data(k_world))
    axes = jax.tree.map(lambda _: 0, attempts).replace(key=None)
    if count > 1 or return_stats:
        corr, lacking = jax.vmap(lambda w: selection_stats(w, params), in_axes=(axes,))(attempts)
        kept = select(corr, lacking, params.copula_rho)  # [J]
    else:
        kept = jnp.zeros((config.num_products,), jnp.int32)
    chosen = kept == jnp.arange(count)[:, None]  # [A, J]

    def pick(x):  # each product's kept attempt (a mask: A is small); leaves [A, J] or [A, ..., J, K]
        if x.ndim < 2:  # the shared key
            return x
        shape = chosen.shape if x.ndim == 2 else (count,) + (1,) * (x.ndim - 3) + (chosen.shape[1], 1)
        return jnp.where(chosen.reshape(shape), x, 0).sum(0).astype(x.dtype)

    # every attempt cut to the episode's window first: the kept one is then picked from 4 cycles, not ~15
    window = partial(to_window, params=params, config=config, first_day=params.open_day - config.history_days)
    world = jax.tree.map(pick, jax.vmap(window, in_axes=(axes,), out_axes=axes)(attempts))
    if return_stats:
        return world, pick(corr), pick(lacking)
    return world


# The reference's selection among attempts (``docs/model.md``, "Suppliers")
MAX_LACKING_DATES = 20  # an attempt is rejected once this many dates lack a Q1 or a (Q7, P5) supplier
CYCLE_MIN = 120  # the shortest default cycle: sets how many cycles the calendar tables hold


def calendar_cycles(params: EnvParams) -> int:
    """Cycles a world drawn over the whole calendar holds per supplier (static: from the calendar's length)."""
    return -(-params.base_cost.shape[0] // CYCLE_MIN) + 1


def draw_world(
    key: jax.Array, params: EnvParams, config: EnvConfig, cycles: int = TIER_CYCLES, first_day=None
) -> World:
    """One attempt: cycle lengths, transport ranges and the tier pair of ``cycles`` cycles per (product,
    supplier), the first being the cycle under way on calendar day ``first_day`` (default: the first
    history day)."""
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
    quality, price = materialize(*draw_tier_pairs(k_tiers, params, (cycles, J, K)))  # not redone per reader
    start = params.open_day - config.history_days if first_day is None else first_day
    first = cycle_index(cycle, params.cost_series_start, start)
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


def selection_stats(world: World, params: EnvParams):
    """(pooled price-quality correlation [J], dates lacking a Q1 or a (Q7, P5) supplier [J]) of a world drawn
    over the whole calendar, its tiers played from calendar day 0 as ``update_tiers`` plays them.

    Tiers change only when a supplier starts a cycle, or the day after a date that lacked a Q1 supplier (the
    rule's forced Q1), so a ``while_loop`` steps from one such event to the next instead of day by day, and
    the rule draws the same ``rule_draws`` a daily step would: the tiers, hence the lacking dates, are the
    day-by-day ones exactly (``tests/model/test_suppliers.py``).

    The correlation pools every (date, supplier) row of a product. A row's price and quality are uniform
    inside its tier bands, so the sums it needs are taken at their expectations given the tiers (exact
    moments of the uniform draws, the quality clipped at 5 stars): no daily draw is made. Over thousands of
    rows per product this differs from the correlation of drawn rows by about 0.01 (tested).
    """
    J, K = world.cycle_len.shape
    T = params.base_cost.shape[0]
    f = params.base_cost.dtype
    # supplier-major [K, J] lanes: every reduction over suppliers is an unrolled elementwise pass (XLA:CPU runs
    # the loop body as fewer, fused kernels; 1.5x faster than [J, K] with reductions)
    L = world.cycle_len.astype(jnp.int32).T
    origin = params.cost_series_start[None, :]
    C = world.cycle_quality.shape[0]
    seed = rule_seed(world)
    # the flat [C, K, J] table of tier codes, computed once (XLA would otherwise redo the draws in every gather)
    table = jnp.swapaxes(world.cycle_quality.astype(jnp.int32) * PRICE_TIERS + world.cycle_price, 1, 2)
    codes = materialize(table)[0].reshape(-1)
    slot = jnp.arange(K, dtype=jnp.int32)[:, None] * J + jnp.arange(J, dtype=jnp.int32)  # [K, J]
    moments = _code_moments(params, J).reshape(J * TIER_CODES, 5)
    first_code = jnp.arange(J, dtype=jnp.int32) * TIER_CODES
    cost = params.base_cost.astype(f)
    running = lambda x: jnp.concatenate([jnp.zeros((1, J), f), jnp.cumsum(x, 0)])
    cum = jnp.stack([running(cost), running(cost**2)], -1)  # [T + 1, J, 2]
    products = jnp.arange(J)

    def accumulate(sums, code, start, stop):  # rows of days start .. stop - 1 with the tier codes [K, J]
        m = reduce(jnp.add, [jnp.take(moments, first_code + c, axis=0) for c in code])  # [J, 5]
        c = cum[stop, products] - cum[start, products]
        n = (stop - start).astype(f)
        return sums + m * jnp.stack([c[:, 0], c[:, 1], n, n, c[:, 0]], -1)

    def rule(code, t, live):
        new = jnp.stack(diversity_codes(list(code), rule_draws(seed, jnp.minimum(t, T - 1))))
        code = jnp.where(live[None], new, code)
        return code, live & ~(_has_best(code) & _has_bad(code))

    def event(carry):
        code, nxt, row, fix, now, sums, lacking = carry
        t = reduce(jnp.minimum, [*nxt, fix])  # [J] each product's next event
        live = t < T
        t_end = jnp.minimum(t, T)
        sums = accumulate(sums, code, now, t_end)
        starting = (nxt == t[None]) & live[None]
        row = jnp.where(starting, row + 1, row)
        row = jnp.where(row == C, 0, row)  # later cycles reuse the table
        code = jnp.where(starting, codes[row * (K * J) + slot], code)
        nxt = jnp.where(starting, nxt + L, nxt)
        code, lack = rule(code, t, live)
        return code, nxt, row, jnp.where(lack, t + 1, BEYOND), t_end, sums, lacking + lack.astype(jnp.int32)

    # day 0 redraws every supplier from the cycle under way (row 0), then the rule runs
    day0 = jnp.zeros((J,), jnp.int32)
    code, lack = rule(codes[slot], day0, day0 < T)
    nxt = L - (-origin) % L  # each supplier's first cycle start after day 0
    row = jnp.zeros((K, J), jnp.int32)
    init = (code, nxt, row, jnp.where(lack, 1, BEYOND), day0, jnp.zeros((J, 5), f), lack.astype(jnp.int32))
    code, _, _, _, now, sums, lacking = jax.lax.while_loop(lambda c: (c[4] < T).any(), event, init)
    mp, mp2, mq, mq2, mpq = (accumulate(sums, code, now, jnp.full((J,), T)) / (T * K)).T
    corr = (mpq - mp * mq) / jnp.sqrt(jnp.maximum(mp2 - mp**2, 1e-30) * jnp.maximum(mq2 - mq**2, 1e-30))
    return corr, lacking


def _code_moments(params: EnvParams, J: int) -> jax.Array:
    """[J, TIER_CODES, 5] per product and tier code, the expected (price multiplier, its square, quality, its
    square, their product) of one row: uniform draws inside the tier bands, the quality clipped at 5 stars."""
    f = params.base_cost.dtype
    pb, qb = params.price_bands.astype(f), params.quality_bands.astype(f)
    m1 = pb.mean(-1)  # [5]
    m2 = m1**2 + (pb[:, 1] - pb[:, 0]) ** 2 / 12
    anchor = params.anchor_rating.astype(f)[:, None]
    e1, e2 = _clipped_uniform_moments(anchor + qb[None, :, 0], anchor + qb[None, :, 1], 5.0)  # [J, 7]
    q, p = jnp.arange(TIER_CODES) // PRICE_TIERS, jnp.arange(TIER_CODES) % PRICE_TIERS
    price = lambda m: jnp.broadcast_to(m[p], (J, TIER_CODES))
    return jnp.stack([price(m1), price(m2), e1[:, q], e2[:, q], m1[p] * e1[:, q]], -1)


BEYOND = 2**30  # "no event": later than any calendar day


def _has_best(code: jax.Array) -> jax.Array:
    """[K, J] tier codes -> [J] some supplier is Q1."""
    return reduce(jnp.logical_or, [c < PRICE_TIERS for c in code])


def _has_bad(code: jax.Array) -> jax.Array:
    """[K, J] tier codes -> [J] some supplier is (Q7, P5)."""
    return reduce(jnp.logical_or, [c == BAD_CODE for c in code])


def _clipped_uniform_moments(lo, hi, cap):
    """E[min(X, cap)], E[min(X, cap)^2] for X ~ U(lo, hi) (elementwise)."""
    c = jnp.clip(cap, lo, hi)
    w = hi - lo
    m1 = ((c**2 - lo**2) / 2 + cap * (hi - c)) / w
    m2 = ((c**3 - lo**3) / 3 + cap**2 * (hi - c)) / w
    return m1, m2


def select(corr: jax.Array, lacking: jax.Array, band: jax.Array) -> jax.Array:
    """The attempt kept per product: the first valid one (fewer than ``MAX_LACKING_DATES`` lacking dates) whose
    correlation lies in ``band`` [J, 2], else the valid one closest to it, else the closest of all.

    corr, lacking: [A, J]. Returns [J] int32 attempt indices.
    """
    distance = jnp.maximum(jnp.maximum(band[:, 0] - corr, corr - band[:, 1]), 0.0)
    distance = jnp.where(jnp.isfinite(distance), distance, 1e3)
    rejected = lacking >= MAX_LACKING_DATES
    return jnp.argmin(distance + 1e4 * rejected, axis=0).astype(jnp.int32)


def to_window(world: World, params: EnvParams, config: EnvConfig, first_day) -> World:
    """A calendar world (tables from the cycle under way on calendar day 0) cut to the ``TIER_CYCLES`` cycles
    from the one under way on ``first_day`` on, as the episode reads them."""
    first = cycle_index(world.cycle_len, params.cost_series_start, first_day)
    offset = first - world.first_cycle.astype(jnp.int32)  # [J, K] rows from the calendar's first cycle
    total = world.cycle_quality.shape[0]
    rows = (offset[None] + jnp.arange(TIER_CYCLES)[:, None, None]) % total  # later cycles reuse the table
    take = lambda table: jnp.take_along_axis(table, rows, 0)
    return world.replace(
        first_cycle=first.astype(jnp.int16),
        cycle_quality=take(world.cycle_quality),
        cycle_price=take(world.cycle_price),
    )


def draw_tier_pairs(key: jax.Array, params: EnvParams, shape):
    """Gaussian-copula tier pairs: quality = floor(7 u1), price = floor(5 Phi(z2)), corr(z1, z2) = rho ~ U(band)."""
    u = rng.uniform(key, shape + (3,))
    lo, hi = params.copula_rho[:, 0:1], params.copula_rho[:, 1:2]  # [J, 1]: broadcast over suppliers
    rho = lo + (hi - lo) * u[..., 2]
    z2 = rho * ndtri(u[..., 0]) + jnp.sqrt(1.0 - rho**2) * ndtri(u[..., 1])
    q = jnp.minimum(jnp.floor(7.0 * u[..., 0]), 6).astype(jnp.int32)
    return q, copula_price_tier(z2)


def copula_price_tier(z: jax.Array) -> jax.Array:
    """The price tier of the copula's normal z: min(floor(5 ndtr(z)), 4) (int32, elementwise)."""
    return jnp.minimum(jnp.floor(5.0 * ndtr(z)), PRICE_TIERS - 1).astype(jnp.int32)


def update_tiers(world: World, params: EnvParams, quality_tier, price_tier, cal_day, redraw_all=False):
    """Tier pairs for calendar day ``cal_day``: suppliers starting a cycle take its drawn pair, then the
    enforced-diversity rule runs (its overrides last until the supplier's next cycle)."""
    J, K = quality_tier.shape
    idx = cycle_index(world.cycle_len, params.cost_series_start, cal_day)
    starts = (
        (cal_day - params.cost_series_start[:, None]) % world.cycle_len.astype(jnp.int32) == 0
    ) | redraw_all
    cycles = world.cycle_quality.shape[0]  # TIER_CYCLES, or a calendar world's
    which = (idx - world.first_cycle.astype(jnp.int32)) % cycles == jnp.arange(cycles)[:, None, None]
    pick = lambda table: jnp.sum(jnp.where(which, table.astype(jnp.int32), 0), 0)
    q = jnp.where(starts, pick(world.cycle_quality), quality_tier.astype(jnp.int32))
    p = jnp.where(starts, pick(world.cycle_price), price_tier.astype(jnp.int32))
    q, p = diversity(q, p, rule_draws(rule_seed(world), jnp.full((J,), cal_day, jnp.int32)))
    q, p = materialize(q.astype(jnp.int8), p.astype(jnp.int8))  # computed once, not inside each consumer
    return q, p


def rule_seed(world: World) -> jax.Array:
    """[2] uint32: the seed of the diversity rule's counter stream (``rule_draws``)."""
    return rule_seed_of(world.key)


def rule_seed_of(world_key: jax.Array) -> jax.Array:
    """``rule_seed`` of a world with raw key data ``world_key`` [2]."""
    return rng.seed_words(jax.random.fold_in(jax.random.wrap_key_data(world_key), _RULE_STREAM))


def rule_draws(seed: jax.Array, days: jax.Array, products: jax.Array | None = None, J: int | None = None):
    """[n, 3] uniforms for the diversity rule of product ``products[i]`` of a store of ``J`` products on
    calendar day ``days[i]`` (default: product i of the n = J products). Words of one counter stream at (day,
    product), so the selection's event scans draw, for any day, what the daily step draws."""
    if products is None:
        J = days.shape[0]
        products = jnp.arange(J)
    counter = (days[:, None] * J + products[:, None]) * 3 + jnp.arange(3)
    return rng.unit_interval(rng.bits_at(seed, counter))


_RULE_STREAM = 0x5EED_D1  # apart from the day keys of the quotes and the news


def _index(u: jax.Array, n: int) -> jax.Array:
    """Uniform (0, 1) -> uniform integer in 0 .. n - 1."""
    return jnp.minimum(jnp.floor(u * n), n - 1).astype(jnp.int32)


def diversity(q: jax.Array, p: jax.Array, u: jax.Array):
    """The enforced-diversity rule on one day: if nobody is (Q7, P5), a random supplier becomes so; then, if
    nobody was Q1 (checked before that override), a random other supplier becomes Q1 with a random price tier.

    q, p: [J, K] int32 tiers; u: [J, 3] ``rule_draws``. Returns the new (q, p).
    """
    K = q.shape[-1]
    had_best = (q == BEST_QUALITY).any(-1, keepdims=True)
    is_bad = (q == WORST_QUALITY) & (p == CHEAPEST_PRICE)
    no_bad = ~is_bad.any(-1, keepdims=True)
    bad_slot = jnp.where(no_bad[:, 0], _index(u[:, 0], K), jnp.argmax(is_bad, -1))
    pick_best = _index(u[:, 1], K - 1)
    best_slot = pick_best + (pick_best >= bad_slot)  # uniform over the suppliers other than the bad one
    # per product, computed once (XLA:CPU would otherwise redo the rule and its draws for every supplier):
    # the supplier forced to (Q7, P5), the one forced to Q1 (-1: none) and the forced Q1's price tier
    force_bad, force_best, best_price = materialize(
        jnp.where(no_bad[:, 0], bad_slot, -1),
        jnp.where(had_best[:, 0], -1, best_slot),
        _index(u[:, 2], CHEAPEST_PRICE + 1),
    )
    slot = jnp.arange(K)
    forced_bad, forced_best = slot == force_bad[:, None], slot == force_best[:, None]
    q = jnp.where(forced_best, BEST_QUALITY, jnp.where(forced_bad, WORST_QUALITY, q))
    p = jnp.where(forced_best, best_price[:, None], jnp.where(forced_bad, CHEAPEST_PRICE, p))
    return q, p


def diversity_codes(code: list[jax.Array], u: jax.Array) -> list[jax.Array]:
    """``diversity`` on tier codes, for the selection's event scan (the two agree exactly: the scan's lacking
    dates equal a day-by-day replay through ``update_tiers``, ``tests/model/test_suppliers.py``).

    code: K arrays [J] of int32 tier codes (``PRICE_TIERS`` x quality + price); u: [J, 3] ``rule_draws``.
    Returns the K new code arrays. Per supplier, not over a [J, K] axis: elementwise passes that fuse.
    """
    K = len(code)
    had_best = reduce(jnp.logical_or, [c < PRICE_TIERS for c in code])
    is_bad = [c == BAD_CODE for c in code]
    any_bad = reduce(jnp.logical_or, is_bad)
    first_bad = jnp.zeros(code[0].shape, jnp.int32)
    for k in reversed(range(K)):
        first_bad = jnp.where(is_bad[k], k, first_bad)
    bad_slot = jnp.where(any_bad, first_bad, _index(u[:, 0], K))
    pick_best = _index(u[:, 1], K - 1)
    best_slot = pick_best + (pick_best >= bad_slot)  # uniform over the suppliers other than the bad one
    # per product, computed once (as in ``diversity``): the supplier forced to (Q7, P5), the one forced to
    # Q1 (-1: none) and the forced Q1's code
    force_bad, force_best, best_code = materialize(
        jnp.where(any_bad, -1, bad_slot),
        jnp.where(had_best, -1, best_slot),
        BEST_QUALITY * PRICE_TIERS + _index(u[:, 2], CHEAPEST_PRICE + 1),
    )
    return [
        jnp.where(force_best == k, best_code, jnp.where(force_bad == k, BAD_CODE, c))
        for k, c in enumerate(code)
    ]


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

"""The episode's supplier world: the reference's selection among attempts, evaluated lazily.

``make_world`` keeps, per product, the attempt that ``suppliers.select`` keeps among all
``EnvConfig.supplier_attempts`` attempts played by ``suppliers.selection_stats`` (``docs/model.md``,
"Suppliers"), bit for bit (``tests/test_supplier_world.py``), at a fraction of the cost:

- **Attempts in order, stopping at the first kept one.** The rule keeps the first valid attempt inside the
  band, so a product stops at its first such attempt (7.6 attempts on average, not 50); only the ~1 % of
  products with none in the band play all of them, keeping the closest valid one as ``select`` would.
- **A pool of lanes over the products.** ``POOL_LANES`` lanes each play one (product, attempt) at a time and
  take the next product when theirs is decided, so a product that needs 50 attempts does not hold up the
  others. One ``while_loop`` trip plays one event (a supplier's cycle start, or the day after a date that
  lacked a Q1 supplier) on every lane.
- **Draws where they are needed.** Every attempt's draws are words of counter streams (``rng.bits_at``), so a
  lane draws the one tier pair a cycle start needs, at the counter the full [cycles, J, K] table would have
  used; the kept world is drawn the same way from the kept attempts' streams. No attempt is ever held whole.

Memory per store: the attempts' cycle lengths ([A, K, J] int32, 96 KB) and the pool's lanes.
"""

from __future__ import annotations

import functools
from functools import reduce

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr, ndtri

from rbjax.config import EnvConfig
from rbjax.kernels import rng
from rbjax.model import suppliers as S
from rbjax.params import EnvParams, World

POOL_LANES = 16  # lanes per store: enough to keep the longest product (50 attempts) from setting the pace
_SUBKEYS = 5  # draw_world splits an attempt's key into (cycle, transport a, transport b, tiers, world)


def make_world(key: jax.Array, params: EnvParams, config: EnvConfig, return_stats: bool = False):
    """The episode's supplier world: per product the attempt the reference's selection keeps, cut to the
    episode's window (``TIER_CYCLES`` cycles from the first history day's). Equal, leaf for leaf, to the
    world of ``suppliers.make_world_reference`` for the same key.

    With ``return_stats`` also the kept attempts' (pooled correlation [J], lacking dates [J]).
    """
    J, K, A = config.num_products, config.num_suppliers, config.supplier_attempts
    k_world, k_attempts = jax.random.split(key)
    seeds = attempt_seeds(k_attempts, A)  # [A, 4, 2]: cycle, transport a, transport b, tiers
    world_key = jax.random.key_data(k_world)
    if A > 1 or return_stats:
        kept, corr, lacking = _selector(J, K)(params, seeds, S.rule_seed_of(world_key))
    else:
        kept = jnp.zeros((J,), jnp.int32)
    world = kept_world(params, config, seeds, kept, world_key)
    if return_stats:
        return world, corr, lacking
    return world


def attempt_seeds(k_attempts: jax.Array, attempts: int) -> jax.Array:
    """[A, 4, 2] uint32 the counter-stream seeds of each attempt's cycle, transport (two) and tier draws: the
    keys ``suppliers.draw_world`` draws from, one split of ``k_attempts`` per attempt."""
    subkeys = jax.vmap(lambda k: jax.random.split(k, _SUBKEYS))(jax.random.split(k_attempts, attempts))
    return jax.vmap(jax.vmap(rng.seed_words))(subkeys[:, :4])


def _uniform_at(seed: jax.Array, counter: jax.Array) -> jax.Array:
    """``rng.uniform`` of the key with ``seed = rng.seed_words(key)``, element at flat position ``counter``."""
    return rng.unit_interval(rng.bits_at(seed, counter))


def _randint_at(seed, counter, lo, hi):
    """``rng.randint(key, lo, hi)`` at flat position ``counter`` (same words, same arithmetic)."""
    u = _uniform_at(seed, counter)
    span = (hi - lo + 1).astype(jnp.float32)
    return lo + jnp.minimum(jnp.floor(u * span), span - 1).astype(jnp.int32)


def tier_code(seed, row, product, supplier, rho_lo, rho_hi, J: int, K: int):
    """The tier code (``PRICE_TIERS`` x quality + price) an attempt draws for ``row`` of its cycle table at
    (product, supplier): ``suppliers._draw_tier_pairs``'s draw at that element, elementwise over lanes.

    seed: [2, ...] the attempt's tier seed; the rest broadcast together.
    """
    base = ((row * J + product) * K + supplier).astype(jnp.uint32) * 3
    u0, u1, u2 = (_uniform_at(seed, base + i) for i in range(3))
    rho = rho_lo + (rho_hi - rho_lo) * u2
    z2 = rho * ndtri(u0) + jnp.sqrt(1.0 - rho**2) * ndtri(u1)
    q = jnp.minimum(jnp.floor(7.0 * u0), 6).astype(jnp.int32)
    p = jnp.minimum(jnp.floor(5.0 * ndtr(z2)), 4).astype(jnp.int32)
    return q * S.PRICE_TIERS + p


def kept_world(params: EnvParams, config: EnvConfig, seeds, kept, world_key) -> World:
    """Each product's kept attempt, cut to the episode's window (``suppliers.to_window``).

    seeds: [A, 4, 2] (``attempt_seeds``); kept: [J] int32 attempt per product.
    """
    J, K = config.num_products, config.num_suppliers
    t_lo, t_hi = S.TRANSPORT_DAYS
    products = jnp.arange(J)
    seed = jnp.moveaxis(seeds[kept], -1, 0)[..., None]  # [2, J, 4, 1]: the kept attempt's seeds per product
    counter = (products[:, None] * K + jnp.arange(K)).astype(jnp.uint32)  # [J, K]
    cycle = _randint_at(seed[:, :, 0], counter, *params.cycle_range)  # [J, K]
    a = _randint_at(seed[:, :, 1], counter, jnp.int32(t_lo), jnp.int32(t_hi))
    b = _randint_at(seed[:, :, 2], counter, jnp.int32(t_lo), jnp.int32(t_hi))
    lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
    equal = lo == hi
    hi = jnp.where(equal & (hi < t_hi), hi + 1, hi)
    lo = jnp.where(equal & (lo == t_hi), lo - 1, lo)
    first = S.cycle_index(cycle, params.cost_series_start, params.open_day - config.history_days)
    offset = first - S.cycle_index(cycle, params.cost_series_start, 0)
    rows = (offset[None] + jnp.arange(S.TIER_CYCLES)[:, None, None]) % S.calendar_cycles(params)  # [4, J, K]
    rho = params.copula_rho[:, None, :]  # [J, 1, 2]
    code = tier_code(
        seed[:, None, :, 3], rows, products[:, None], jnp.arange(K), rho[..., 0], rho[..., 1], J, K
    )
    return World(
        key=world_key,
        cycle_len=cycle.astype(jnp.int16),
        transport_min=lo.astype(jnp.int8),
        transport_max=hi.astype(jnp.int8),
        first_cycle=first.astype(jnp.int16),
        cycle_quality=(code // S.PRICE_TIERS).astype(jnp.int8),
        cycle_price=(code % S.PRICE_TIERS).astype(jnp.int8),
    )


@functools.cache
def _selector(J: int, K: int):
    """``select_lazily`` for one store, pooling the lanes of a batch when vmapped: a batch of stores with shared
    params plays all its stores' products in one pool (``select_pooled``), so no store's slowest product holds
    up the batch. Stores with their own params (a leading axis on some params leaf) get a pool each."""

    @jax.custom_batching.custom_vmap
    def select(params, seeds, rule_seed):
        return jax.tree.map(lambda x: x[0], select_pooled(params, seeds[None], rule_seed[None], J, K))

    @select.def_vmap
    def batched(size, in_batched, params, seeds, rule_seed):
        params_batched, seeds_batched, rule_batched = in_batched
        spread = lambda x, b: x if b else jnp.broadcast_to(x, (size,) + x.shape)
        seeds, rule_seed = spread(seeds, seeds_batched), spread(rule_seed, rule_batched)
        if any(jax.tree.leaves(params_batched)):
            axes = jax.tree.map(lambda b: 0 if b else None, params_batched)
            one = lambda p, s, r: select_lazily(p, s, r, J, K)
            out = jax.vmap(one, in_axes=(axes, 0, 0))(params, seeds, rule_seed)
        else:
            out = select_pooled(params, seeds, rule_seed, J, K)
        return out, (True, True, True)

    return select


def select_lazily(params: EnvParams, seeds, rule_seed, J: int, K: int, lanes: int = POOL_LANES):
    """The attempt ``suppliers.select`` keeps per product of one store, with its (correlation, lacking dates):
    ``select_pooled`` for one store. seeds: [A, 4, 2] (``attempt_seeds``); rule_seed: [2]. Returns (kept [J]
    int32, corr [J], lacking [J] int32)."""
    return jax.tree.map(lambda x: x[0], select_pooled(params, seeds[None], rule_seed[None], J, K, lanes))


def select_pooled(params: EnvParams, seeds, rule_seed, J: int, K: int, lanes: int = POOL_LANES):
    """The attempt ``suppliers.select`` keeps per product of each of N stores that share ``params``, with its
    (correlation, lacking dates): each product's attempts played in order by a pool of ``lanes`` x N lanes,
    stopping at the first valid one in the band.

    seeds: [N, A, 4, 2] (``attempt_seeds``); rule_seed: [N, 2]. Returns (kept [N, J] int32, corr [N, J],
    lacking [N, J] int32). Each attempt's statistics are ``suppliers.selection_stats``'s, with the same
    arithmetic.

    A trip applies the event its lanes prepared at the end of the previous trip (``prepare``: the event's
    day, the starting supplier's drawn tier pair, the rule's draws, the current tiers' moments). Loop-carried
    values are computed once; XLA:CPU would otherwise recompute a lane's draws inside every [K, W] consumer.
    """
    N, A = seeds.shape[:2]
    tasks = N * J
    cycle_seeds, tier_seeds = seeds[:, :, 0].reshape(N * A, 2), seeds[:, :, 3].reshape(N * A, 2)
    W = min(lanes * N, tasks)
    T = params.base_cost.shape[0]
    C = S.calendar_cycles(params)
    f = params.base_cost.dtype
    origin = params.cost_series_start.astype(jnp.int32)  # [J]
    moments = S._code_moments(params, J).reshape(J * S.TIER_CODES, 5)
    cost = params.base_cost.astype(f)
    running = lambda x: jnp.concatenate([jnp.zeros((1, J), f), jnp.cumsum(x, 0)])
    cum = jnp.stack([running(cost), running(cost**2)], -1).reshape((T + 1) * J, 2)
    supplier = jnp.arange(K, dtype=jnp.int32)[:, None]  # [K, 1]
    band = params.copula_rho
    # products in the order lanes take them: lowest band first. A lane's last product sets the pool's pace,
    # so the products likely to need many attempts go first (hard_v2's food band, 0.2-0.3, lies below most
    # attempts' correlation: 11 attempts on average against 3 for the others). Any order keeps the same worlds.
    # Task t is product order[t // N] of store t % N: every store's first product, then every store's second...
    order = jnp.argsort(band[:, 0], stable=True).astype(jnp.int32)
    # a lane's task number "j" decides its (product "p", store "s"), carried: XLA:CPU would otherwise redo the
    # division inside every gather that reads them
    of_task = lambda task: (order[(task % tasks) // N], (task % tasks) % N)
    product = lambda lane: lane["p"]
    store = lambda lane: lane["s"]
    attempt = lambda lane: lane["s"] * A + lane["a"]  # [W] row of the [N * A] seed tables

    def segment(lane, stop):  # ``selection_stats``'s accumulate: rows of days now .. stop - 1
        j, start = product(lane), lane["now"]
        c = jnp.take(cum, stop * J + j, axis=0) - jnp.take(cum, start * J + j, axis=0)
        n = (stop - start).astype(f)
        return lane["sums"] + lane["m"] * jnp.stack([c[:, 0], c[:, 1], n, n, c[:, 0]], -1)

    def prepare(lane):  # the next event of every lane, and what applying it needs
        j = product(lane)
        nxt = lane["nxt"]
        t_s = reduce(jnp.minimum, list(nxt))
        k_star = jnp.full_like(t_s, K - 1)
        for k in reversed(
            range(K - 1)
        ):  # the first supplier starting next (unrolled: XLA:CPU's argmax is slow)
            k_star = jnp.where(nxt[k] == t_s, k, k_star)
        t = jnp.minimum(t_s, lane["fix"])
        r = jnp.sum(jnp.where(supplier == k_star, lane["row"], 0), 0)
        seed = jnp.moveaxis(tier_seeds[attempt(lane)], -1, 0)  # [2, W]
        code = list(lane["code"])
        m = reduce(jnp.add, [jnp.take(moments, j * S.TIER_CODES + c, axis=0) for c in code])  # [W, 5]
        lane = dict(lane, t=t, start=(t_s == t), k_star=k_star, m=m)
        lane["sums_next"] = segment(lane, jnp.minimum(t, T))  # the sums once the rows up to the event are in
        # the attempt's correlation if this event ends it (t >= T)
        mp, mp2, mq, mq2, mpq = (lane["sums_next"] / (T * K)).T
        corr = (mpq - mp * mq) / jnp.sqrt(jnp.maximum(mp2 - mp**2, 1e-30) * jnp.maximum(mq2 - mq**2, 1e-30))
        return dict(
            lane,
            drawn=tier_code(seed, r, j, k_star, band[j, 0], band[j, 1], J, K),
            rule_u=S.rule_draws(
                jnp.moveaxis(rule_seed[store(lane)], -1, 0)[..., None], jnp.minimum(t, T - 1), j, J
            ),
            corr=corr,
        )

    def begin(lane, take):  # lanes in ``take`` start attempt ``lane["a"]`` of their product
        j = product(lane)
        seed = jnp.moveaxis(cycle_seeds[attempt(lane)], -1, 0)[:, None]  # [2, 1, W]
        fresh = dict(
            L=_randint_at(seed, (j * K + supplier).astype(jnp.uint32), *params.cycle_range).astype(jnp.int32),
            nxt=jnp.zeros((K, W), jnp.int32),  # day 0 draws every supplier's pair from the cycle under way
            row=jnp.zeros((K, W), jnp.int32),
            code=jnp.zeros((K, W), jnp.int32),
            fix=jnp.full((W,), S.BEYOND, jnp.int32),
            now=jnp.zeros((W,), jnp.int32),
            sums=jnp.zeros((W, 5), f),
            lacking=jnp.zeros((W,), jnp.int32),
        )
        out = dict(lane)
        for name, x in fresh.items():
            out[name] = jnp.where(take[:, None] if name == "sums" else take, x, lane[name])
        return out

    def trip(carry):
        lane, nxt_task, out = carry
        t, active = lane["t"], lane["j"] < tasks
        finished = active & (t >= T)
        live = active & ~finished
        sums = lane["sums_next"]
        # a cycle start: supplier k_star takes its row's tier pair
        starts = live & lane["start"] & (supplier == lane["k_star"])  # [K, W]
        code = jnp.where(starts, lane["drawn"], lane["code"])
        # the next start: a cycle's length later, or for day 0's draw the first cycle start after day 0
        L = jnp.sum(jnp.where(supplier == lane["k_star"], lane["L"], 0), 0)  # [W] the starting supplier's
        after = (t + L - (t - origin[product(lane)]) % L).astype(jnp.int32)
        nxt = jnp.where(starts, after, lane["nxt"])
        row = jnp.where(starts, lane["row"] + 1, lane["row"])
        row = jnp.where(row == C, 0, row)  # later cycles reuse the table
        # the day's rule, once every supplier starting that day has its pair
        rule_day = live & ~(nxt == t).any(0)
        code = jnp.where(rule_day, jnp.stack(S.diversity_codes(list(code), lane["rule_u"])), code)
        lack = rule_day & ~(S._has_best(code) & S._has_bad(code))
        fix = jnp.where(rule_day, jnp.where(lack, t + 1, S.BEYOND), lane["fix"])
        lane = dict(
            lane,
            nxt=nxt,
            code=code,
            row=row,
            fix=fix,
            now=jnp.where(active, jnp.minimum(t, T), lane["now"]),
            sums=sums,
            lacking=lane["lacking"] + lack.astype(jnp.int32),
        )
        # an attempt played out: score it as ``select`` does, keep the best so far
        j, corr = product(lane), lane["corr"]
        distance = jnp.maximum(jnp.maximum(band[j, 0] - corr, corr - band[j, 1]), 0.0)
        distance = jnp.where(jnp.isfinite(distance), distance, 1e3)
        score = distance + 1e4 * (lane["lacking"] >= S.MAX_LACKING_DATES)
        better = finished & (score < lane["best"])
        lane["best"] = jnp.where(better, score, lane["best"])
        lane["best_a"] = jnp.where(better, lane["a"], lane["best_a"])
        lane["best_corr"] = jnp.where(better, corr, lane["best_corr"])
        lane["best_lacking"] = jnp.where(better, lane["lacking"], lane["best_lacking"])
        decided = finished & ((lane["best"] == 0) | (lane["a"] == A - 1))
        target = jnp.where(decided, store(lane) * J + j, tasks)  # tasks: dropped
        out = tuple(
            o.at[target].set(v, mode="drop")
            for o, v in zip(out, (lane["best_a"], lane["best_corr"], lane["best_lacking"]))
        )
        # decided lanes take the next products; the others play their product's next attempt
        rank = jnp.cumsum(decided.astype(jnp.int32)) - 1
        lane["j"] = jnp.where(decided, jnp.minimum(nxt_task + rank, tasks), lane["j"])
        lane["p"], lane["s"] = of_task(lane["j"])
        lane["a"] = jnp.where(decided, 0, jnp.where(finished, lane["a"] + 1, lane["a"]))
        lane["best"] = jnp.where(decided, jnp.inf, lane["best"])
        nxt_task = nxt_task + decided.sum(dtype=jnp.int32)
        return prepare(begin(lane, finished)), nxt_task, out

    zi, zk = jnp.zeros((W,), jnp.int32), jnp.zeros((K, W), jnp.int32)
    lane = dict(
        j=jnp.arange(W, dtype=jnp.int32),
        p=of_task(jnp.arange(W, dtype=jnp.int32))[0],
        s=of_task(jnp.arange(W, dtype=jnp.int32))[1],
        a=zi,
        best=jnp.full((W,), jnp.inf, f),
        best_a=zi,
        best_corr=jnp.zeros((W,), f),
        best_lacking=zi,
        L=zk,
        nxt=zk,
        row=zk,
        code=zk,
        fix=zi,
        now=zi,
        sums=jnp.zeros((W, 5), f),
        lacking=zi,
        m=jnp.zeros((W, 5), f),
        sums_next=jnp.zeros((W, 5), f),
    )
    lane = prepare(begin(lane, jnp.ones((W,), bool)))
    out = (jnp.zeros((tasks,), jnp.int32), jnp.zeros((tasks,), f), jnp.zeros((tasks,), jnp.int32))
    _, _, out = jax.lax.while_loop(lambda c: (c[0]["j"] < tasks).any(), trip, (lane, jnp.int32(W), out))
    return tuple(x.reshape(N, J) for x in out)

"""The episode's supplier world: the reference's selection among attempts, evaluated lazily.

``make_world`` keeps, per product, the attempt that ``suppliers.select`` keeps among all
``EnvConfig.supplier_attempts`` attempts played by ``suppliers.selection_stats`` (``docs/model.md``,
"Suppliers"), bit for bit (``tests/model/test_supplier_world.py``), at a fraction of the cost:

- **Attempts in order, stopping at the first kept one.** The rule keeps the first valid attempt inside the
  band, so a product stops at its first such attempt (7.6 attempts on average, not 50); only the ~1 % of
  products with none in the band play all of them, keeping the closest valid one as ``select`` would.
- **Rounds of whole attempts over a pool of lanes.** ``pool_lanes()`` lanes a store each play one (product,
  attempt) a round, from the first event to the last (a supplier's cycle start, or the day after a date that
  lacked a Q1 supplier). Lanes go to the undecided products in queue order; once fewer products are left
  than lanes, the spare lanes play those products' following attempts in the same round, so a product that
  needs 50 attempts takes a round or two instead of holding the pool for 50. A round's lanes play in lockstep
  until only 1 / ``STRAGGLERS`` of them are left; those finish in a narrow loop of their own.
- **Draws where they are needed, in vectorised passes.** Every attempt's draws are words of counter streams
  (``rng.bits_at``): a round draws each lane's tier pairs (every row its attempt may start) in one pass at
  the counters the full [cycles, J, K] table would have used, and the kept world is drawn the same way from
  the kept attempts' streams. No attempt is ever held whole.

Memory per store: the pool's 16 or 32 lanes (each its attempt's 75 tier pairs and five suppliers' state) and the
products' running bests, well under 0.1 MB (``docs/performance.md``, which also has what each trip of the event
loop costs and why it is written the way it is).
"""

from __future__ import annotations

import functools
import os
from functools import reduce

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtri

from rbjax.config import EnvConfig
from rbjax.kernels import rng
from rbjax.kernels.xla import materialize
from rbjax.model import suppliers as S
from rbjax.params import EnvParams, World

STRAGGLERS = 16  # a round plays its last 1 / STRAGGLERS lanes in a narrow loop of their own (``_play``)
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
    (product, supplier): ``suppliers.draw_tier_pairs``'s draw at that element, elementwise over lanes.

    seed: [2, ...] the attempt's tier seed; the rest broadcast together.
    """
    base = ((row * J + product) * K + supplier).astype(jnp.uint32) * 3
    u0, u1, u2 = (_uniform_at(seed, base + i) for i in range(3))
    rho = rho_lo + (rho_hi - rho_lo) * u2
    z2 = rho * ndtri(u0) + jnp.sqrt(1.0 - rho**2) * ndtri(u1)
    q = jnp.minimum(jnp.floor(7.0 * u0), 6).astype(jnp.int32)
    p = sum((z2 >= cut).astype(jnp.int32) for cut in price_cuts())  # S.copula_price_tier without the CDF
    return q * S.PRICE_TIERS + p


@functools.cache
def _price_cuts(backend: str) -> tuple[float, ...]:
    """``price_cuts`` on ``backend`` (the cache key: the bisection's jit runs on the default backend)."""
    ordered = lambda x: np.where(x < 0, -(x.view(np.int32) & 0x7FFFFFFF), x.view(np.int32)).astype(np.int64)
    as_float = lambda k: np.where(k < 0, (-k) | -0x80000000, k).astype(np.int32).view(np.float32)
    tier = jax.jit(S.copula_price_tier)
    steps = np.arange(1, S.PRICE_TIERS, dtype=np.int32)  # the tier each cut starts
    middle = np.asarray(ndtri(steps / np.float32(S.PRICE_TIERS)), np.float32)
    lo, hi = ordered(middle - np.float32(0.01)), ordered(middle + np.float32(0.01))
    if (np.asarray(tier(as_float(lo))) >= steps).any() or (np.asarray(tier(as_float(hi))) < steps).any():
        raise RuntimeError("the normal CDF's steps are not where expected")
    while (hi - lo > 1).any():  # invariant: tier(lo) < step <= tier(hi)
        mid = (lo + hi) // 2
        up = np.asarray(tier(as_float(mid))) >= steps
        lo, hi = np.where(up, lo, mid), np.where(up, mid, hi)
    return tuple(float(x) for x in as_float(hi))


def price_cuts() -> tuple[float, ...]:
    """The four float32 z at which ``suppliers.copula_price_tier`` steps up to tiers 1 .. 4 on the default
    backend, found by bisection over the float32 values with that backend's own ``ndtr``: ``z >= cut`` counts
    give the same tier as the CDF, which costs XLA:CPU about a third of a tier pair's draw
    (``tests/model/test_supplier_world.py`` checks every float32 near each cut)."""
    with jax.ensure_compile_time_eval():
        return _price_cuts(jax.default_backend())


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


def pool_lanes() -> int:
    """Lanes a store in the selection's pool (the default of ``select_pooled``): 32 where the pool runs on the
    only CPU device, whose loop kernels XLA:CPU splits over the host's threads (wider kernels pay that back), 16
    where the CPU is split into one device per core (a thread each: the narrower pool stays in cache) and on
    accelerators (not measured at 32). The worlds do not depend on it. At 1,024 stores on 2 cores, default /
    one-attempt reset: one device 1.58 at 32 against 1.71 at 16; split per core 1.51 against 1.46
    (``docs/performance.md``)."""
    cpus = jax.local_devices(backend="cpu") if jax.default_backend() == "cpu" else []
    return 32 if len(cpus) == 1 and (os.cpu_count() or 1) > 1 else 16


def select_lazily(params: EnvParams, seeds, rule_seed, J: int, K: int, lanes: int | None = None):
    """The attempt ``suppliers.select`` keeps per product of one store, with its (correlation, lacking dates):
    ``select_pooled`` for one store. seeds: [A, 4, 2] (``attempt_seeds``); rule_seed: [2]. Returns (kept [J]
    int32, corr [J], lacking [J] int32)."""
    return jax.tree.map(lambda x: x[0], select_pooled(params, seeds[None], rule_seed[None], J, K, lanes))


def select_pooled(params: EnvParams, seeds, rule_seed, J: int, K: int, lanes: int | None = None):
    """The attempt ``suppliers.select`` keeps per product of each of N stores that share ``params``, with its
    (correlation, lacking dates): each product's attempts played in order by a pool of ``lanes`` x N lanes,
    stopping at the first valid one in the band.

    seeds: [N, A, 4, 2] (``attempt_seeds``); rule_seed: [N, 2]. Returns (kept [N, J] int32, corr [N, J],
    lacking [N, J] int32). Each attempt's statistics are ``suppliers.selection_stats``'s, with the same
    arithmetic in the same order.

    Rounds: in a round every lane plays one whole attempt (``_play``). Lanes go to the undecided products in
    queue order, one attempt each while there are more of them than lanes; once there are fewer, the spare
    lanes play their following attempts too, so the few products that need many attempts (about 1 % need all
    50) take a round or two, not 50. A product is decided by the first of its attempts, in order, that the
    rule keeps at once (valid, in the band); attempts played after it are ignored.
    """
    N, A = seeds.shape[:2]
    tasks = N * J
    lanes = pool_lanes() if lanes is None else lanes
    W = min(lanes * N, tasks)
    f = params.base_cost.dtype
    band = params.copula_rho
    # the queue: products by lowest band first (hard_v2's food band, 0.2-0.3, lies below most attempts'
    # correlation: 11 attempts on average against 3 for the others, so they start first). Task q is product
    # order[q // N] of store q % N. Any order keeps the same worlds.
    order = jnp.argsort(band[:, 0], stable=True).astype(jnp.int32)
    queue = jnp.arange(tasks, dtype=jnp.int32)
    task_product, task_store = order[queue // N], queue % N
    tables = _tables(params, J)
    lane = jnp.arange(W, dtype=jnp.int32)

    def round_(carry):
        nxt_a, best, best_a, best_corr, best_lacking, decided = carry
        undecided = ~decided
        count = jnp.maximum(undecided.sum(dtype=jnp.int32), 1)  # 0 only in a finished store of a vmapped pool
        rank = jnp.cumsum(undecided.astype(jnp.int32)) - 1
        waiting = (
            jnp.full((tasks,), tasks, jnp.int32).at[jnp.where(undecided, rank, tasks)].set(queue, mode="drop")
        )
        task = waiting[lane % count]
        attempt = nxt_a[task] + lane // count
        active = attempt < A
        task = jnp.where(active, task, tasks)  # tasks: a spare lane, dropped by every scatter
        j, s = task_product[task % tasks], task_store[task % tasks]
        row = s * A + jnp.minimum(attempt, A - 1)
        seed = lambda which: jnp.moveaxis(seeds[:, :, which].reshape(N * A, 2)[row], -1, 0)  # [2, W]
        corr, lacking = _play(
            params, tables, seed(0), seed(3), jnp.moveaxis(rule_seed[s], -1, 0), j, active, J, K
        )
        # the round's best attempt per product as ``select`` scores them: lowest score, then earliest attempt
        distance = jnp.maximum(jnp.maximum(band[j, 0] - corr, corr - band[j, 1]), 0.0)
        distance = jnp.where(jnp.isfinite(distance), distance, 1e3)
        score = distance + 1e4 * (lacking >= S.MAX_LACKING_DATES)
        low = jnp.full((tasks,), jnp.inf, f).at[task].min(score, mode="drop")
        tied = active & (score == low[task % tasks])
        first = jnp.full((tasks,), A, jnp.int32).at[jnp.where(tied, task, tasks)].min(attempt, mode="drop")
        pick = jnp.where(tied & (attempt == first[task % tasks]), task, tasks)
        better = low < best  # ties keep the earlier round's, an earlier attempt
        best = jnp.where(better, low, best)
        best_a = jnp.where(better, first, best_a)
        best_corr = jnp.where(better, jnp.zeros_like(best_corr).at[pick].set(corr, mode="drop"), best_corr)
        best_lacking = jnp.where(
            better, jnp.zeros_like(best_lacking).at[pick].set(lacking, mode="drop"), best_lacking
        )
        nxt_a = nxt_a + jnp.zeros_like(nxt_a).at[task].add(1, mode="drop")
        return nxt_a, best, best_a, best_corr, best_lacking, (best == 0) | (nxt_a >= A)

    zi = jnp.zeros((tasks,), jnp.int32)
    init = (zi, jnp.full((tasks,), jnp.inf, f), zi, jnp.zeros((tasks,), f), zi, jnp.zeros((tasks,), bool))
    _, _, kept, corr, lacking, _ = jax.lax.while_loop(lambda c: (~c[-1]).any(), round_, init)
    at = task_store * J + task_product  # queue order -> store-major [N, J]
    return tuple(jnp.zeros_like(x).at[at].set(x).reshape(N, J) for x in (kept, corr, lacking))


def _tables(params: EnvParams, J: int):
    """What every attempt reads: the price tiers' two moments [2, PRICE_TIERS] (the same for every product),
    the tier codes' other three moments, flat for one-index gathers [3, J * TIER_CODES], and the running sums
    of the base cost and of its square [2, (T + 1) * J] (``selection_stats``'s ``accumulate``)."""
    f = params.base_cost.dtype
    moments = S._code_moments(params, J)  # [J, TIER_CODES, 5]
    price = moments[0, : S.PRICE_TIERS, :2].T  # codes 0 .. 4 are quality 0 at every price tier
    cost = params.base_cost.astype(f)
    running = lambda x: jnp.concatenate([jnp.zeros((1, J), f), jnp.cumsum(x, 0)]).reshape(-1)
    return (
        price,
        moments[..., 2:].reshape(J * S.TIER_CODES, 3).T,
        jnp.stack([running(cost), running(cost**2)]),
    )


def _pick(index: jax.Array, values) -> jax.Array:
    """``values[index]`` for a short sequence of scalars, as a chain of selects (XLA:CPU gathers cost more)."""
    out = values[-1]
    for i in reversed(range(len(values) - 1)):
        out = jnp.where(index == i, values[i], out)
    return out


def _play(params: EnvParams, tables, cycle_seed, tier_seed, rule_seed, j, active, J: int, K: int):
    """One attempt per lane played over the whole calendar: (pooled correlation [W], lacking dates [W] int32),
    ``suppliers.selection_stats``'s numbers for that attempt's product ``j`` [W], bit for bit.

    An event is a supplier's cycle start (its tier pair drawn at its counter) or the day after a date that
    lacked a Q1 supplier; the rule runs once every supplier starting that day has its pair. Lanes are the
    minor axis of every array ([K, W] suppliers). The day's moments are the same left-to-right sum of the
    suppliers' five moments that ``accumulate`` takes, looked up from each supplier's tier code.

    The lanes play in lockstep until at most 1 / ``STRAGGLERS`` of them are still playing (the attempts with
    the most events: short cycles); those few finish in a loop of their own, gathered into a narrow batch, so
    the round does not run all its lanes for the longest attempt's events.
    """
    T, W = params.base_cost.shape[0], j.shape[0]
    seeds = (j, cycle_seed, tier_seed, rule_seed)
    zk = jnp.zeros((K, W), jnp.int32)
    state = dict(
        nxt=zk,  # day 0 draws every supplier's pair from the cycle under way
        row=zk,
        code=zk,
        fix=jnp.full((W,), S.BEYOND, jnp.int32),
        now=jnp.zeros((W,), jnp.int32),
        cum_now=jnp.take(tables[2], j, axis=1),  # the running sums at day ``now`` (day 0: zeros)
        sums=jnp.zeros((5, W), params.base_cost.dtype),
        lacking=jnp.zeros((W,), jnp.int32),
        done=~active,
    )
    playing = lambda st: (~st["done"]).sum()
    few = W // STRAGGLERS if W >= 8 * STRAGGLERS else 0  # none for a store alone (16 or 32 lanes)
    wide = _event(params, tables, _lane_values(params, *seeds, J, K), J, K)
    st = jax.lax.while_loop(lambda st: playing(st) > few, wide, state)
    if few:
        at = jnp.nonzero(~st["done"], size=few, fill_value=W)[0]  # [few] the lanes still playing (W: none)
        narrow = lambda x: jnp.take(x, at, axis=-1, mode="clip")
        rest = jax.tree.map(narrow, st) | dict(done=narrow(st["done"]) | (at == W))
        # the narrow lanes' tables are drawn again: a second reader of the wide table splits its fusion
        # into a dozen kernels on XLA:CPU
        narrow_event = _event(params, tables, _lane_values(params, *map(narrow, seeds), J, K), J, K)
        rest = jax.lax.while_loop(lambda st: playing(st) > 0, narrow_event, rest)
        st = st | {k: st[k].at[..., at].set(rest[k], mode="drop") for k in ("sums", "lacking")}
    mp, mp2, mq, mq2, mpq = st["sums"] / (T * K)
    corr = (mpq - mp * mq) / jnp.sqrt(jnp.maximum(mp2 - mp**2, 1e-30) * jnp.maximum(mq2 - mq**2, 1e-30))
    return corr, st["lacking"]


def _lane_values(params: EnvParams, j, cycle_seed, tier_seed, rule_seed, J: int, K: int) -> dict:
    """What each lane of ``_play`` reads, lanes last: its product j [W] and the cycle's origin [W], its
    suppliers' cycle lengths L [K, W], the rule's seed [2, W], and the tier code of every row of every
    supplier's cycle table, drawn at once (a draw inside the event loop costs XLA:CPU several times as much as
    in one vectorised pass, and so does a flat [K * C * W] table), as int8 [K * C, W]."""
    C = S.calendar_cycles(params)
    supplier = jnp.arange(K, dtype=jnp.int32)[:, None]  # [K, 1]
    lo, hi = params.copula_rho[j, 0], params.copula_rho[j, 1]
    table = tier_code(
        tier_seed[:, None, None], jnp.arange(C)[None, :, None], j, supplier[:, None], lo, hi, J, K
    )
    return dict(
        j=j,
        origin=params.cost_series_start.astype(jnp.int32)[j],
        L=_randint_at(cycle_seed[:, None], (j * K + supplier).astype(jnp.uint32), *params.cycle_range),
        rule_seed=rule_seed,
        table=table.reshape(K * C, -1).astype(jnp.int8),
    )


def _event(params: EnvParams, tables, lanes: dict, J: int, K: int):
    """``_play``'s loop body: every lane to its next event. lanes: ``_play``'s per-lane values, [..., W]."""
    price, moments, cum = tables
    T = params.base_cost.shape[0]
    C = S.calendar_cycles(params)
    f = params.base_cost.dtype
    j, origin, L, table = lanes["j"], lanes["origin"], lanes["L"], lanes["table"]
    rule_seed = lanes["rule_seed"][..., None]  # [2, W, 1]
    lane_index = jnp.arange(j.shape[0], dtype=jnp.int32)
    supplier = jnp.arange(K, dtype=jnp.int32)[:, None]  # [K, 1]
    price = [[price[m, p] for p in range(S.PRICE_TIERS)] for m in range(2)]

    def moment_sums(code):  # [K, W] tier codes -> [5, W]: each moment summed over suppliers left to right
        # the price moments picked by selects; the others gathered one index each ("clip" costs XLA:CPU a
        # third of the default bounds check: every index is in bounds)
        by_price = [reduce(jnp.add, [_pick(c % S.PRICE_TIERS, values) for c in code]) for values in price]
        at = [j * S.TIER_CODES + c for c in code]
        gathered = [reduce(jnp.add, [jnp.take(moments[m], i, mode="clip") for i in at]) for m in range(3)]
        return jnp.stack(by_price + gathered)

    def event(st):
        nxt = st["nxt"]
        t_s = reduce(jnp.minimum, list(nxt))
        # the first supplier starting next (unrolled: XLA:CPU's argmax is slow)
        k_star = jnp.full_like(t_s, K - 1)
        for k in reversed(range(K - 1)):
            k_star = jnp.where(nxt[k] == t_s, k, k_star)
        t = jnp.minimum(t_s, st["fix"])
        going = ~st["done"]
        live = going & (t < T)
        start = live & (t_s == t)
        star = supplier == k_star  # [K, W]
        row_star = jnp.sum(jnp.where(star, st["row"], 0), 0)
        L_star = jnp.sum(jnp.where(star, L, 0), 0)
        after = t + L_star - (t - origin) % L_star  # its next start (day 0: the first one after day 0)
        # per lane, computed once (XLA:CPU would otherwise redo a lane's chain inside every [K, W] consumer)
        lane_values = (t, k_star, row_star, after, going, live, start)
        t, k_star, row_star, after, going, live, start = materialize(
            *(x.astype(jnp.int32) for x in lane_values)
        )
        going, live, start = going > 0, live > 0, start > 0
        # the rows of days now .. t - 1 at the tiers held since ``now``
        stop = jnp.minimum(t, T)
        cum_stop = jnp.stack([jnp.take(x, stop * J + j, mode="clip") for x in cum])  # [2, W]
        c = cum_stop - st["cum_now"]
        n = (stop - st["now"]).astype(f)
        m = moment_sums(list(st["code"]))
        sums = st["sums"] + m * jnp.stack([c[0], c[1], n, n, c[0]])
        # a cycle start: supplier k_star takes its row's tier pair (later cycles reuse the table)
        drawn = table.at[k_star * C + row_star, lane_index].get(mode="clip").astype(jnp.int32)
        here = start & (supplier == k_star)
        code = jnp.where(here, drawn, st["code"])
        nxt = jnp.where(here, after, nxt)
        row = jnp.where(here, jnp.where(st["row"] + 1 == C, 0, st["row"] + 1), st["row"])
        # the day's rule, once every supplier starting that day has its pair
        rule_day = live & ~(nxt == t).any(0)
        ruled = S.diversity_codes(list(code), S.rule_draws(rule_seed, jnp.minimum(t, T - 1), j, J))
        code = jnp.where(rule_day, jnp.stack(ruled), code)
        lack = rule_day & ~(S._has_best(list(code)) & S._has_bad(list(code)))
        return dict(
            nxt=nxt,
            row=row,
            code=code,
            fix=jnp.where(rule_day, jnp.where(lack, t + 1, S.BEYOND), st["fix"]),
            now=jnp.where(going, stop, st["now"]),
            cum_now=jnp.where(going, cum_stop, st["cum_now"]),
            sums=jnp.where(going, sums, st["sums"]),
            lacking=st["lacking"] + lack.astype(jnp.int32),
            done=st["done"] | (going & (t >= T)),
        )

    return event

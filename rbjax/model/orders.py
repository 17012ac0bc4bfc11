"""Orders: validation, funds acceptance, lead times, the pending ring and deliveries (``docs/model.md``).

Rule for several orders on one day: every nonzero (product, supplier) entry of ``Action.order`` is one
single-line ``place_order`` call. Calls are placed product by product in ``Action.order_rank`` order
(default: product index), a product's lines in supplier order. A line is refused whole when its cost
exceeds the funds left after the lines before it (as the reference refuses "Insufficient funds"), and
a refused line does not block a later cheaper one.
Quantities are floored to whole units; negative or non-finite quantities, and lines above the per-order
unit cap, are refused and counted.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rbjax.kernels import rng
from rbjax.kernels.xla import fsum, materialize, rank
from rbjax.params import World
from rbjax.state import OrderLines, Pending


def sanitize(order: jax.Array, max_units: jax.Array):
    """Returns (units [J, K] int32 >= 0, invalid line count)."""
    finite = jnp.isfinite(order)
    units = jnp.floor(jnp.where(finite, order, 0.0))
    invalid = ~finite | (units < 0) | (units > max_units)
    return jnp.where(invalid, 0, units).astype(jnp.int32), jnp.sum(invalid, dtype=jnp.int32)


def call_positions(order_rank: jax.Array) -> jax.Array:
    """[J] int32 position of each product in the day's calls: by ``order_rank``, ties by product index.

    A NaN rank compares as +inf (those products' lines go last, in product index order), so the positions
    are always a permutation and every line is charged its own cost.
    """
    return rank(jnp.where(jnp.isnan(order_rank), jnp.inf, order_rank), descending=False)


def products_at(positions: jax.Array) -> jax.Array:
    """[J] int32 the product at each call position, from ``positions = call_positions(order_rank)``."""
    J = positions.shape[0]
    return jnp.zeros(J, jnp.int32).at[positions].set(jnp.arange(J, dtype=jnp.int32))


def accept_by_funds(cost: jax.Array, funds: jax.Array, order_rank: jax.Array | None = None):
    """Greedy acceptance in call order: a line is accepted when its cost fits the funds left.

    cost: [J, K] line costs (0 = no line); order_rank: [J] position of each product's lines (None: index
    order). Returns (accepted [J, K] bool, spent []).

    Loop-free per round: with the prefix sums of the undecided lines in call order, the lines up to the
    first one that does not fit are accepted, that line is refused, and so is every later line dearer than
    the funds then left (funds only fall). The next round resumes after the refused line. Rounds = 1 + the
    number of refusals that are followed by an affordable line, usually 1.
    """
    J, K = cost.shape
    if order_rank is not None:  # permute the lines into call order once, outside the rounds
        pos = call_positions(order_rank)
        accepted, spent = accept_by_funds(cost[products_at(pos)], funds)
        return accepted[pos], spent
    accepted, spent = accept_in_order(cost.reshape(-1), funds)
    return accepted.reshape(J, K), spent


def prefix_sums(x: jax.Array, live: jax.Array) -> jax.Array:
    """[N] running sums of ``x`` over the ``live`` entries in order (0 elsewhere).

    XLA sums a ``cumsum`` in a tree whose grouping depends on the positions of the entries, so the live
    entries are packed to the front first: the bits then depend only on the live sequence, and an order
    placed through ``Action.order`` or ``Action.lines`` is charged the same running total.
    """
    n = x.shape[0]
    idx = jnp.cumsum(live.astype(jnp.int32)) - 1
    packed = jnp.zeros_like(x).at[jnp.where(live, idx, n)].set(x, mode="drop")
    return jnp.where(live, jnp.cumsum(packed)[jnp.maximum(idx, 0)], 0.0)


def accept_in_order(flat: jax.Array, funds: jax.Array):
    """``accept_by_funds`` on costs already in call order: flat [N] (0 = no order). Returns (accepted [N], spent)."""

    def round_(carry):
        undecided, accepted, left = carry
        running = prefix_sums(flat, undecided)  # strictly increasing over the undecided lines
        fits = undecided & (running <= left)
        spent = jnp.max(jnp.where(fits, running, 0.0))  # the fitting lines form a prefix
        over = undecided & ~fits
        first_fail = over & (running == jnp.min(jnp.where(over, running, jnp.inf)))
        left = left - spent
        refused = first_fail | (over & (flat > left))
        return over & ~refused, accepted | fits, left

    start = (flat > 0, jnp.zeros(flat.shape, bool), funds)
    _, accepted, left = jax.lax.while_loop(lambda c: c[0].any(), round_, start)
    return accepted, funds - left


def place(key, pending: Pending, units, quote_price, quote_quality, world: World, cal_day) -> Pending:
    """Draw lead times ~ UniformInt[tmin, tmax] per line and add the lines to the pending ring.

    units: [J, K] accepted units. For one (arrival day, product) the ring keeps the supplier of the last
    line placed (lines are placed in supplier order), which ``inventory.receive`` gives the lot.
    """
    D, K = pending.qty.shape[0], units.shape[-1]
    (lead,) = materialize(lead_table(key, world))  # drawn once, read D*K times
    slot = (cal_day + lead) % D  # [J, K]
    u = units.astype(quote_price.dtype)
    lines = (u, u * quote_price, u * quote_quality)
    added = [[jnp.zeros_like(u[:, 0]) for _ in range(D)] for _ in lines]
    for k in range(K):  # unrolled one-hot scatter: elementwise passes beat a [J, K, D] reduction on CPU
        for d in range(D):
            hit = slot[:, k] == d
            for x, acc in zip(lines, added):
                acc[d] = acc[d] + jnp.where(hit, x[:, k], 0.0)
    qty, cost, quality = (jnp.stack(acc) for acc in added)  # [D, J]
    supplier, ring_day = pending.supplier, jnp.arange(D)[:, None]
    for k in range(K):
        hit = (slot[:, k][None, :] == ring_day) & (units[:, k] > 0)[None, :]
        supplier = jnp.where(hit, jnp.int8(k), supplier)
    return Pending(
        qty=pending.qty + qty.astype(jnp.int32),
        cost=pending.cost + cost,
        quality=pending.quality + quality,
        supplier=supplier,
    )


def lead_table(key, world: World) -> jax.Array:
    """[J, K] the day's lead times ~ UniformInt[tmin, tmax]: a single-line order of (j, k) arrives after
    ``lead[j, k]`` days, through ``Action.order`` or through the agent tools alike."""
    return rng.randint(key, world.transport_min, world.transport_max)


def as_lines(order: jax.Array, lead: jax.Array, order_rank: jax.Array | None = None) -> OrderLines:
    """``Action.order`` [J, K] as the J x K single-line orders it stands for, in call order (``order_rank``,
    None: product index order), each with its ``lead`` [J, K] (``Env.lead_days``). Through ``Action.lines``
    they give the same day, bit for bit (``benchmarks/order_paths.py`` times both forms).

    Entries that ``sanitize`` drops as invalid (non-finite, negative, above the unit cap) stay live lines
    that ``check_lines`` counts as invalid; entries that floor to 0 are padding.
    """
    J, K = order.shape
    product_at = (
        jnp.arange(J, dtype=jnp.int32) if order_rank is None else products_at(call_positions(order_rank))
    )
    flat = jnp.floor(order[product_at]).reshape(-1)
    finite = jnp.isfinite(flat)
    units = jnp.where(finite, jnp.clip(flat, -1.0, 2.0**30), -1.0).astype(jnp.int32)
    return OrderLines(
        product=jnp.repeat(product_at, K),
        supplier=jnp.tile(jnp.arange(K, dtype=jnp.int32), J),
        units=units,
        lead=lead[product_at].reshape(-1).astype(jnp.int32),
        order=jnp.arange(J * K, dtype=jnp.int32),
        live=units != 0,
    )


def check_lines(lines: OrderLines, quote_price, funds, max_units, pending_slots: int):
    """Validate and pay order lines in call order. Returns (accepted [L] bool, spent [], invalid, refused).

    A line is invalid (dropped, counted) when its product, supplier or lead is out of range or its units
    are < 1; an order whose units exceed ``max_units`` is invalid whole. The valid orders are then paid
    with ``accept_in_order`` on their costs (each at its first line's position), so single-line orders
    are charged exactly as the same lines through ``Action.order``.
    """
    J, K = quote_price.shape
    L = lines.units.shape[0]
    idx = jnp.arange(L, dtype=jnp.int32)
    valid = (
        lines.live
        & (lines.product >= 0)
        & (lines.product < J)
        & (lines.supplier >= 0)
        & (lines.supplier < K)
        & (lines.units >= 1)
        & (lines.lead >= 1)
        & (lines.lead < pending_slots)
    )
    first = (idx == 0) | (lines.order != jnp.roll(lines.order, 1))
    head = jax.lax.cummax(jnp.where(first, idx, 0))  # the first line of each line's order
    # summed as float32 of units capped at max_units + 1: an int32 sum of huge lines would wrap below the cap
    capped = jnp.minimum(lines.units.astype(jnp.float32), jnp.float32(max_units) + 1.0)
    order_units = jnp.zeros(L, jnp.float32).at[head].add(jnp.where(valid, capped, 0.0))
    valid = valid & (order_units[head] <= max_units)
    price = quote_price[jnp.clip(lines.product, 0, J - 1), jnp.clip(lines.supplier, 0, K - 1)]
    line_cost = jnp.where(valid, lines.units.astype(price.dtype) * price, 0.0)
    order_cost = jnp.zeros(L, price.dtype).at[head].add(line_cost)
    paid, spent = accept_in_order(order_cost, funds)
    accepted = valid & paid[head]
    count = lambda x: jnp.sum(x, dtype=jnp.int32)
    return accepted, spent, count(lines.live & ~valid), count(valid & ~paid[head])


def place_lines(
    pending: Pending, lines: OrderLines, accepted, quote_price, quote_quality, cal_day
) -> Pending:
    """Add accepted lines to the pending ring at ``cal_day + lead``; the ring's supplier for an (arrival
    day, product) is that of the last line placed there (as ``place``)."""
    D, J = pending.qty.shape
    u = jnp.where(accepted, lines.units, 0)
    p, k = jnp.clip(lines.product, 0, J - 1), jnp.clip(lines.supplier, 0, quote_price.shape[1] - 1)
    slot = (cal_day + lines.lead) % D
    uf = u.astype(quote_price.dtype)
    add = lambda x: jnp.zeros((D, J), x.dtype).at[slot, p].add(x)
    last = jnp.full((D, J), -1, jnp.int32).at[slot, p].max(jnp.where(accepted, jnp.arange(u.shape[0]), -1))
    return Pending(
        qty=pending.qty + add(u),
        cost=pending.cost + add(uf * quote_price[p, k]),
        quality=pending.quality + add(uf * quote_quality[p, k]),
        supplier=jnp.where(last >= 0, k[jnp.maximum(last, 0)].astype(jnp.int8), pending.supplier),
    )


def arrivals(pending: Pending, cal_day) -> tuple[Pending, Pending]:
    """Pop the orders arriving on ``cal_day``: (the ring with that slot emptied, the delivery [J] per field).

    The delivery's supplier is int32.
    """
    slot = (jnp.arange(pending.qty.shape[0]) == cal_day % pending.qty.shape[0])[:, None]
    arriving = lambda x: fsum(jnp.where(slot, x, 0), 0)
    delivery = Pending(
        qty=arriving(pending.qty),
        cost=arriving(pending.cost),
        quality=arriving(pending.quality),
        supplier=arriving(pending.supplier.astype(jnp.int32)),
    )
    emptied = pending.replace(
        qty=jnp.where(slot, 0, pending.qty),
        cost=jnp.where(slot, 0, pending.cost),
        quality=jnp.where(slot, 0, pending.quality),
    )
    return emptied, delivery


def supplier_ranks(
    lines: jax.Array, quote_quality: jax.Array, quote_price: jax.Array
) -> dict[str, jax.Array]:
    """Order-line diagnostics of the day from the quotes the lines used; lines: [J, K] bool.

    Returns int32 counts: order_lines, quality_rank_sum (each line's supplier rank by (-quality, price, id),
    1 = best), quality_first (lines from the rank-1 quality supplier), price_first (from the cheapest, ties
    to the lower id).
    """
    return _rank_counts(lines, *_ranks(quote_quality, quote_price))


def line_ranks(lines: OrderLines, accepted, quote_quality, quote_price) -> dict[str, jax.Array]:
    """``supplier_ranks`` over accepted order lines."""
    rank_q, rank_p = _ranks(quote_quality, quote_price)
    J, K = rank_q.shape
    at = lambda r: r[jnp.clip(lines.product, 0, J - 1), jnp.clip(lines.supplier, 0, K - 1)]
    return _rank_counts(accepted, at(rank_q), at(rank_p))


def _rank_counts(lines: jax.Array, rank_q: jax.Array, rank_p: jax.Array) -> dict[str, jax.Array]:
    count = lambda x: jnp.sum(x, dtype=jnp.int32)
    return dict(
        order_lines=count(lines),
        quality_rank_sum=count(jnp.where(lines, rank_q, 0)),
        quality_first=count(lines & (rank_q == 1)),
        price_first=count(lines & (rank_p == 1)),
    )


def _ranks(q: jax.Array, p: jax.Array) -> tuple[jax.Array, jax.Array]:
    """[J, K] int32 each supplier's rank by (-quality, price, id) and by (price, id), 1 = best."""
    k = jnp.arange(q.shape[-1])
    ahead_q = (q[:, None, :] > q[:, :, None]) | (
        (q[:, None, :] == q[:, :, None])
        & ((p[:, None, :] < p[:, :, None]) | ((p[:, None, :] == p[:, :, None]) & (k[None, :] < k[:, None])))
    )
    ahead_p = (p[:, None, :] < p[:, :, None]) | ((p[:, None, :] == p[:, :, None]) & (k[None, :] < k[:, None]))
    return 1 + ahead_q.sum(-1), 1 + ahead_p.sum(-1)

"""Orders: validation, funds acceptance, lead times, the pending ring (SIMULATOR.md §3.10, §4).

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
from rbjax.kernels.xla import materialize


def sanitize(order: jax.Array, max_units: jax.Array):
    """Returns (units [J, K] int32 >= 0, invalid line count)."""
    finite = jnp.isfinite(order)
    units = jnp.floor(jnp.where(finite, order, 0.0))
    invalid = ~finite | (units < 0) | (units > max_units)
    return jnp.where(invalid, 0, units).astype(jnp.int32), jnp.sum(invalid, dtype=jnp.int32)


def call_positions(order_rank: jax.Array) -> jax.Array:
    """[J] int32 position of each product in the day's calls: by ``order_rank``, ties by product index."""
    J = order_rank.shape[0]
    idx = jnp.arange(J)
    # an unrolled sum of elementwise passes: XLA CPU fuses it into one kernel, far faster than a [J, J]
    # reduction, a sort, or a rolled loop (which pays a kernel launch per trip)
    pos = jnp.zeros(J, jnp.int32)
    for i in range(J):
        pos = pos + ((order_rank[i] < order_rank) | ((order_rank[i] == order_rank) & (i < idx)))
    return pos


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
    if order_rank is not None:   # permute the lines into call order once, outside the rounds
        pos = call_positions(order_rank)
        product_at = jnp.zeros(J, jnp.int32).at[pos].set(jnp.arange(J, dtype=jnp.int32))
        accepted, spent = accept_by_funds(cost[product_at], funds)
        return accepted[pos], spent
    flat = cost.reshape(-1)

    def round_(carry):
        undecided, accepted, left = carry
        running = jnp.cumsum(jnp.where(undecided, flat, 0.0))   # strictly increasing over the undecided lines
        fits = undecided & (running <= left)
        spent = jnp.max(jnp.where(fits, running, 0.0))          # the fitting lines form a prefix
        over = undecided & ~fits
        first_fail = over & (running == jnp.min(jnp.where(over, running, jnp.inf)))
        left = left - spent
        refused = first_fail | (over & (flat > left))
        return over & ~refused, accepted | fits, left

    start = (flat > 0, jnp.zeros(flat.shape, bool), funds)
    _, accepted, left = jax.lax.while_loop(lambda c: c[0].any(), round_, start)
    return accepted.reshape(J, K), funds - left


def place(key, units, quote_price, quote_quality, transport_min, transport_max, cal_day, pend_qty, pend_cost,
          pend_quality):
    """Draw lead times ~ UniformInt[tmin, tmax] per line and add the lines to the pending ring.

    units: [J, K] accepted units; pend_*: [D, J] ring over arrival day (c % D).
    """
    D, K = pend_qty.shape[0], units.shape[-1]
    lead, = materialize(rng.randint(key, transport_min, transport_max))   # drawn once, read D * K times
    slot = (cal_day + lead) % D                                            # [J, K]
    u = units.astype(quote_price.dtype)
    lines = (u, u * quote_price, u * quote_quality)
    added = [[jnp.zeros_like(u[:, 0]) for _ in range(D)] for _ in lines]
    for k in range(K):        # unrolled one-hot scatter: elementwise passes beat a [J, K, D] reduction on CPU
        for d in range(D):
            hit = slot[:, k] == d
            for x, acc in zip(lines, added):
                acc[d] = acc[d] + jnp.where(hit, x[:, k], 0.0)
    qty, cost, quality = (jnp.stack(acc) for acc in added)                 # [D, J]
    return pend_qty + qty.astype(jnp.int32), pend_cost + cost, pend_quality + quality, lead

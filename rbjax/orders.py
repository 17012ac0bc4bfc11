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

from rbjax import rng


def sanitize(order: jax.Array, max_units: jax.Array):
    """Returns (units [J, K] int32 >= 0, invalid line count)."""
    finite = jnp.isfinite(order)
    units = jnp.floor(jnp.where(finite, order, 0.0))
    invalid = ~finite | (units < 0) | (units > max_units)
    return jnp.where(invalid, 0, units).astype(jnp.int32), jnp.sum(invalid, dtype=jnp.int32)


def accept_by_funds(cost: jax.Array, funds: jax.Array, order_rank: jax.Array | None = None):
    """Greedy acceptance in call order.

    cost: [J, K] line costs (0 = no line); order_rank: [J] position of each product's lines (None: index
    order, ties broken by index). Returns (accepted [J, K] bool, spent []).
    """
    J, K = cost.shape
    sequence = None if order_rank is None else jnp.argsort(order_rank, stable=True)   # [J] product per position
    in_order = cost if sequence is None else cost[sequence]

    def body(left, c):
        ok = (c > 0) & (c <= left)
        return left - jnp.where(ok, c, 0.0), ok

    def greedy():
        left, ok = jax.lax.scan(body, funds, in_order.reshape(-1), unroll=8)
        ok = ok.reshape(J, K)
        return left, ok if sequence is None else jnp.zeros_like(ok).at[sequence].set(ok)

    # fast path: everything affordable is the common case, and the scan only runs when it is not
    total = cost.sum()
    left, accepted = jax.lax.cond(total <= funds, lambda: (funds - total, cost > 0), greedy)
    return accepted, funds - left


def place(key, units, quote_price, quote_quality, transport_min, transport_max, cal_day, pend_qty, pend_cost,
          pend_quality):
    """Draw lead times ~ UniformInt[tmin, tmax] per line and add the lines to the pending ring.

    units: [J, K] accepted units; pend_*: [D, J] ring over arrival day (c % D).
    """
    D = pend_qty.shape[0]
    lead = rng.randint(key, transport_min, transport_max)
    slot = (cal_day + lead) % D                                            # [J, K]
    hit = (slot[..., None] == jnp.arange(D)) & (units > 0)[..., None]      # [J, K, D]
    u = units.astype(quote_price.dtype)
    add = lambda x: jnp.sum(jnp.where(hit, x[..., None], 0.0), 1).T               # [D, J]
    pend_qty = pend_qty + add(u).astype(jnp.int32)
    pend_cost = pend_cost + add(u * quote_price)
    pend_quality = pend_quality + add(u * quote_quality)
    return pend_qty, pend_cost, pend_quality, lead

"""Orders: validation, funds acceptance, lead times, the pending ring (SIMULATOR.md §3.10, §4).

Rule for several orders on one day: every nonzero (product, supplier) entry of ``Action.order`` is one
single-line ``place_order`` call, placed in product-major index order (product 0 suppliers 1..5,
product 1, ...). A line is refused whole when its cost exceeds the funds left after the lines before it
(as the reference refuses "Insufficient funds"), and a refused line does not block a later cheaper
one. A policy that needs another order (the oracle's shelf order) pre-filters its lines itself.
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


def accept_by_funds(cost: jax.Array, funds: jax.Array):
    """Greedy acceptance in index order. cost: [L] line costs (0 = no line). Returns (accepted [L] bool, spent)."""
    def body(left, c):
        ok = (c > 0) & (c <= left)
        return left - jnp.where(ok, c, 0.0), ok

    # fast path: everything affordable is the common case, and the scan only runs when it is not
    total = cost.sum()
    left, accepted = jax.lax.cond(total <= funds,
                                  lambda: (funds - total, cost > 0),
                                  lambda: jax.lax.scan(body, funds, cost, unroll=8))
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

"""Inventory lots, the capacity-waiting queue, FIFO sales, expiry and book value (SIMULATOR.md §3.5, §3.8-3.9).

A lot is one product's delivery of one day: (store units, waiting units, arrival A, unit cost, quality),
arrays of shape [J, C]. Because the waiting queue only holds units while the store is full, admission
order equals delivery order (SIMULATOR.md §3.9), so one list of lots ordered by the key (A, product)
represents the store and the global FIFO queue exactly. Within a product, sales take the oldest lot
first.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from rbjax.kernels.xla import fsum

_BISECTION_STEPS = 20  # keys A*J + j stay below 2**20 for any day of the data window


def fifo_key(lot_arrival: jax.Array) -> jax.Array:
    """[J, C] global delivery order: arrival day, then product index."""
    J = lot_arrival.shape[0]
    return lot_arrival * J + jnp.arange(J, dtype=lot_arrival.dtype)[:, None]


def admit_waiting(lot_store, lot_wait, lot_arrival, capacity):
    """Move waiting units into the store, front of the global queue first, while capacity allows.

    Finds the largest key s with (waiting units keyed <= s) <= free room by bisection (no sort);
    lots up to s enter whole, the next lot in part. Returns (lot_store, lot_wait).
    """
    free = jnp.maximum(capacity - jnp.sum(lot_store, dtype=jnp.int32), 0)
    key = fifo_key(lot_arrival)
    waiting = lot_wait > 0

    def below(s):
        return jnp.sum(jnp.where(waiting & (key <= s), lot_wait, 0), dtype=jnp.int32)

    lo = jnp.asarray(-1, key.dtype)
    hi = jnp.max(jnp.where(waiting, key, -1))
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi + 1) // 2
        ok = below(mid) <= free
        lo, hi = jnp.where(ok, mid, lo), jnp.where(ok, hi, mid - 1)
    admitted_whole = waiting & (key <= lo)
    rest = free - below(lo)
    next_key = jnp.min(jnp.where(waiting & (key > lo), key, jnp.iinfo(key.dtype).max))
    partial = waiting & (key == next_key)
    move = jnp.where(admitted_whole, lot_wait, jnp.where(partial, jnp.minimum(lot_wait, rest), 0))
    return lot_store + move, lot_wait - move


def take_fifo(lot_store: jax.Array, lot_arrival: jax.Array, sold: jax.Array) -> jax.Array:
    """[J, C] units taken from each lot to sell ``sold`` [J] units, oldest lot first."""
    # one [J, C] pass per other lot (C is small): a [J, C, C] comparison gets a slow transposed layout on CPU
    before = jnp.zeros_like(lot_store)
    for other in range(lot_store.shape[-1]):
        older = lot_arrival[:, other:other + 1] < lot_arrival
        before = before + jnp.where(older, lot_store[:, other:other + 1], 0)
    return jnp.clip(sold[:, None] - before, 0, lot_store)


def expire(lot_store, lot_wait, lot_arrival, shelf_life, cal_day):
    """Destroy store and waiting units with cal_day > A + L. Returns (lot_store, lot_wait, expired [J])."""
    gone = cal_day > lot_arrival + shelf_life[:, None]
    expired = fsum(jnp.where(gone, lot_store + lot_wait, 0), -1)
    return jnp.where(gone, 0, lot_store), jnp.where(gone, 0, lot_wait), expired


def deliver(lot_store, lot_wait, lot_arrival, lot_cost, lot_quality, qty, cost_total, quality_sum, arrival, capacity):
    """Add today's deliveries (qty [J], paid cost_total [J], quality_sum [J]) as new lots arriving ``arrival``.

    Units fill the free store room in product order; the rest joins the waiting queue. Each delivery
    takes the product's first empty lot slot; with none left it merges into the newest lot
    (quantity-weighted cost and quality, the older arrival day kept) and is counted.
    Returns the five lot arrays and the number of merged deliveries.
    """
    free = jnp.maximum(capacity - jnp.sum(lot_store, dtype=jnp.int32), 0)
    before = jnp.cumsum(qty, dtype=jnp.int32) - qty
    into_store = jnp.clip(free - before, 0, qty)
    into_wait = qty - into_store
    occupied = (lot_store + lot_wait) > 0
    empty = ~occupied
    first_empty = empty & (jnp.cumsum(empty, -1, dtype=jnp.int32) == 1)
    has_empty = empty.any(-1, keepdims=True)
    newest_slot = jnp.argmax(jnp.where(occupied, lot_arrival, -1), -1)
    newest = jnp.arange(lot_store.shape[-1]) == newest_slot[:, None]
    target = jnp.where(has_empty, first_empty, newest) & (qty > 0)[:, None]
    old_units = (lot_store + lot_wait).astype(lot_cost.dtype)
    new_units = old_units + qty[:, None].astype(lot_cost.dtype)
    safe = jnp.maximum(new_units, 1.0)
    lot_cost = jnp.where(target, (lot_cost * old_units + cost_total[:, None]) / safe, lot_cost)
    lot_quality = jnp.where(target, (lot_quality * old_units + quality_sum[:, None]) / safe, lot_quality)
    lot_arrival = jnp.where(target & empty, arrival, lot_arrival)
    lot_store = lot_store + jnp.where(target, into_store[:, None], 0)
    lot_wait = lot_wait + jnp.where(target, into_wait[:, None], 0)
    merged = jnp.sum(((qty > 0) & ~has_empty[:, 0]).astype(jnp.int32))
    return lot_store, lot_wait, lot_arrival, lot_cost, lot_quality, merged


def product_book_value(lot_store, lot_wait, lot_arrival, lot_cost, shelf_life, cal_day):
    """[J] per product: sum of units * cost * max(0, (E - D) / (E - A)), E = A + L (linear depreciation, §3.13)."""
    life = shelf_life[:, None].astype(lot_cost.dtype)
    left = jnp.clip((lot_arrival + shelf_life[:, None] - cal_day).astype(lot_cost.dtype) / life, 0.0, 1.0)
    return fsum((lot_store + lot_wait).astype(lot_cost.dtype) * lot_cost * left, -1)


def book_value(lot_store, lot_wait, lot_arrival, lot_cost, shelf_life, cal_day):
    """[] the store's book value (``product_book_value`` summed)."""
    return fsum(product_book_value(lot_store, lot_wait, lot_arrival, lot_cost, shelf_life, cal_day))

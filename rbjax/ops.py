"""Small reductions written as explicit adds.

XLA on CPU may sum an axis in a different order for different batch sizes, so a vmapped float
reduction can change in its last bit when the batch is split over devices. ``fsum`` adds the slices
of one axis in index order: the same bits for any batch size or sharding, and on CPU also faster than a
reduction for the small axes used here (lots, suppliers, pending days, products).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def fsum(x: jax.Array, axis: int = -1) -> jax.Array:
    """Sum over ``axis`` in index order (sequential adds; unrolled, so keep the axis small)."""
    x = jnp.moveaxis(x, axis, 0)
    total = x[0]
    for i in range(1, x.shape[0]):
        total = total + x[i]
    return total

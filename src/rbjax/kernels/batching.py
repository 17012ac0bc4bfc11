"""Batching tools for policies under ``vmap``: a branch that runs only when some member of the batch takes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def unless_all_skip(plan: Callable, planned: jax.Array, fallback: Any, args: tuple) -> Any:
    """``plan(*args)`` where ``planned`` ([] bool), else ``fallback``, running ``plan`` only when some store plans.

    Under ``vmap`` a ``lax.cond`` on a per-store predicate runs both branches for every store; this one's
    batching rule asks ``any(planned)`` over the batch instead, then plans every store and keeps the plans of
    the stores that planned. In a rollout all stores share the day, so a day without planning costs nothing.
    Under several nested ``vmap``s the outer ones fall back to running both branches (same results).
    """

    @jax.custom_batching.custom_vmap
    def choose(planned, fallback, args):
        return jax.lax.cond(planned, lambda: plan(*args), lambda: fallback)

    @choose.def_vmap
    def batched(axis_size, in_batched, planned, fallback, args):
        grow = lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))
        planned, fallback = jax.tree.map(grow, (planned, fallback), tuple(in_batched[:2]))
        # leaves shared by every store (the env params, most often) stay unbatched inside the plan
        axes = jax.tree.map(lambda b: 0 if b else None, in_batched[2])

        def all_stores():
            plans = jax.vmap(plan, in_axes=axes, axis_size=axis_size)(*args)
            keep = lambda p, f: jnp.where(planned.reshape((-1,) + (1,) * (p.ndim - 1)), p, f)
            return jax.tree.map(keep, plans, fallback)

        out = jax.lax.cond(jnp.any(planned), all_stores, lambda: fallback)
        return out, jax.tree.map(lambda _: True, out)

    return choose(planned, fallback, args)

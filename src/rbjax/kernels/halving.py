"""Sequential halving in two rounds over candidates that share their evaluation keys (common random numbers).

``sequential_halving(value, C, keys)``: every candidate is valued on the first half of the M keys; candidate 0
(the base action, in the planner) and the best ceil(C / 2) - 1 of the others go on to the second half; the
survivor with the best total over all M keys wins. Ties go to the lowest index in both rounds, so with equal
values the base is kept and chosen. It costs C x M1 + ceil(C / 2) x M2 valuations instead of C x M
(M1 = M // 2, M2 = M - M1): about 3/4 of them. mctx's Gumbel search prunes its root candidates the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def survivors(candidates: int) -> int:
    """Candidates kept after the first round: half, rounded up (candidate 0 among them)."""
    return (candidates + 1) // 2


def sequential_halving(value: Callable[[jax.Array, jax.Array], jax.Array], candidates: int, keys: jax.Array):
    """The index ([] int32) of the best of ``candidates`` by two rounds of halving.

    value(indices [n] int32, keys [m]) -> [n, m] the values of those candidates under those keys (higher is
    better; the same key gives every candidate the same randomness). keys: [M], M >= 2.
    """
    M = keys.shape[0]
    first, second = keys[: M // 2], keys[M // 2 :]
    everyone = jnp.arange(candidates, dtype=jnp.int32)
    early = value(everyone, first).sum(-1)  # [C]
    # candidate 0 always survives; top_k keeps the lower index among equal values
    rest = 1 + jax.lax.top_k(early[1:], survivors(candidates) - 1)[1].astype(jnp.int32)
    kept = jnp.sort(jnp.concatenate([jnp.zeros(1, jnp.int32), rest]))  # candidate order: ties go low
    total = early[kept] + value(kept, second).sum(-1)
    return kept[jnp.argmax(total)]

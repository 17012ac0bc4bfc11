"""Actor-critic network shared across products (flax.linen).

Each product's row goes through the same MLP together with the store's global row; the mean of the
product embeddings is the store context, fed back to every product. The critic is per product too: it
values each product's share of the net worth (``rbjax.rl.rewards``). Parameters do not depend on the
number of products, so one network serves any catalogue size.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from rbjax.rl.actions import COVER_DAYS, PRICE_OPTIONS, Heads
from rbjax.rl.features import HISTORY_PROFIT

# Priors, added to the network's outputs: an untrained policy mostly keeps its prices or takes the
# history's best one, orders about a week of demand, and shelves the products with the best (standardised)
# pre-opening profit. Early episodes then last long enough to teach something; the network learns the rest.
PRICE_PRIOR = (0.0, 0.0, 1.0, 0.0, 0.0, 1.0)
ORDER_PRIOR = (0.5, 0.0, 0.5, 1.0, 0.5, 0.0)
SHELF_PRIOR = 1.0


def _dense(n: int, scale: float = np.sqrt(2.0)):
    return nn.Dense(n, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros)


class ActorCritic(nn.Module):
    """(products [J, F], global [G]) -> (Heads, values [J]). Apply with vmap for a batch of stores."""

    num_suppliers: int
    hidden: int = 64

    @nn.compact
    def __call__(self, products: jax.Array, glob: jax.Array) -> tuple[Heads, jax.Array]:
        J = products.shape[0]
        g = jnp.broadcast_to(glob, (J, glob.shape[-1]))
        h = nn.tanh(_dense(self.hidden)(jnp.concatenate([products, g], -1)))
        h = nn.tanh(_dense(self.hidden)(h))
        context = h.mean(0)
        z = nn.tanh(_dense(self.hidden)(jnp.concatenate([h, jnp.broadcast_to(context, h.shape)], -1)))
        log_std = self.param("shelf_log_std", nn.initializers.constant(-0.5), ())
        heads = Heads(
            price=_dense(PRICE_OPTIONS, 0.01)(z) + jnp.asarray(PRICE_PRIOR),
            order=_dense(len(COVER_DAYS), 0.01)(z) + jnp.asarray(ORDER_PRIOR),
            supplier=_dense(self.num_suppliers, 0.01)(z),
            shelf_mean=_dense(1, 0.01)(z)[:, 0] + SHELF_PRIOR * products[:, HISTORY_PROFIT],
            shelf_log_std=jnp.clip(log_std, -3.0, 1.0),
        )
        v = nn.tanh(_dense(self.hidden)(jnp.concatenate([h, jnp.broadcast_to(context, h.shape), g], -1)))
        return heads, _dense(1, 1.0)(v)[:, 0]

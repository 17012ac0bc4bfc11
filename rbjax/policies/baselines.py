"""Classic baselines that see only the agent's observation."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from rbjax.state import Action, Observation


def null_policy(policy_params, obs: Observation, privileged, key) -> Action:
    """Do nothing (the shelf stays empty, nothing sells): the cheapest possible day."""
    return Action(price=obs.prices, shelf=obs.shelf, order=jnp.zeros(obs.quote_price.shape, obs.quote_price.dtype))


@struct.dataclass
class RandomParams:
    shelf_size: jax.Array     # [] int32 products put on the shelf (the first ones by index)
    order_prob: jax.Array     # [] chance a shelf product is reordered on a day
    max_units: jax.Array      # [] order size ~ UniformInt[1, max_units]
    price_jitter: jax.Array   # [] relative price change ~ U(-jitter, jitter)

    @classmethod
    def default(cls):
        return cls(shelf_size=jnp.int32(40), order_prob=jnp.float32(0.2), max_units=jnp.float32(150.0),
                   price_jitter=jnp.float32(0.05))


def random_policy(params: RandomParams, obs: Observation, privileged, key) -> Action:
    """Random orders from a random supplier and small random price moves; may well go bankrupt."""
    J, K = obs.quote_price.shape
    k_o, k_q, k_s, k_p = jax.random.split(key, 4)
    shelf = jnp.arange(J) < params.shelf_size
    place = shelf & (jax.random.uniform(k_o, (J,)) < params.order_prob)
    qty = jnp.ceil(jax.random.uniform(k_q, (J,)) * params.max_units)
    supplier = jax.random.randint(k_s, (J,), 0, K)
    order = jnp.where(place[:, None] & (jnp.arange(K) == supplier[:, None]), qty[:, None], 0.0)
    price = obs.prices * (1.0 + params.price_jitter * jax.random.uniform(k_p, (J,), minval=-1.0, maxval=1.0))
    return Action(price=price.astype(obs.prices.dtype), shelf=shelf, order=order.astype(obs.quote_price.dtype))


@struct.dataclass
class BaseStockParams:
    shelf_size: jax.Array     # [] int32
    level: jax.Array          # [] order up to this many units of stock + waiting + incoming
    cheapest: jax.Array       # [] bool True: cheapest quote; False: best average rating is not per supplier, so
                              # False picks the supplier with the longest-standing (lowest-index) quote

    @classmethod
    def default(cls):
        return cls(shelf_size=jnp.int32(40), level=jnp.float32(200.0), cheapest=jnp.bool_(True))


def base_stock(params: BaseStockParams, obs: Observation, privileged, key) -> Action:
    """Order-up-to ``level`` on the first ``shelf_size`` products, fixed prices."""
    J, K = obs.quote_price.shape
    shelf = jnp.arange(J) < params.shelf_size
    position = obs.on_hand + obs.waiting + obs.incoming
    qty = jnp.where(shelf, jnp.maximum(params.level - position, 0.0), 0.0)
    supplier = jnp.where(params.cheapest, jnp.argmin(obs.quote_price, -1), 0)
    order = jnp.where(jnp.arange(K) == supplier[:, None], qty[:, None], 0.0)
    return Action(price=obs.prices, shelf=shelf, order=order.astype(obs.quote_price.dtype))

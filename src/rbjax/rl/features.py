"""Observation encoding for learned policies: per-product feature rows plus one global row.

Only ``Observation`` fields are read, so no hidden quality or news metadata can leak in (tested). The
features are roughly O(1) by construction (logs, ratios); ``rbjax.rl.normalize`` standardises them
further with running statistics.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rbjax.config import EPISODE_DAYS
from rbjax.policies.estimates import daily_demand, stock_position
from rbjax.state import Observation

RECENT = 7  # days of "recent" sales
HISTORY_PROFIT = 16  # column of symlog(pre-opening profit) in the product rows
HORIZON = float(EPISODE_DAYS)  # day scale of the global day feature


def symlog(x: jax.Array) -> jax.Array:
    """sign(x) log(1 + |x|), elementwise (any shape)."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


def product_features(obs: Observation) -> jax.Array:
    """[J, PRODUCT_FEATURES] one row per product: its own state, then K blocks of supplier fields."""
    f = obs.prices.dtype
    cheapest = obs.quote_price.min(-1)
    units = obs.sales_units.astype(f)
    recent = units[-RECENT:]
    recorded = jnp.sum(obs.sales_units > 0, 0)
    mean_price = jnp.sum(jnp.where(obs.sales_units > 0, obs.sales_price, 0.0), 0) / jnp.maximum(recorded, 1)
    rate = daily_demand(obs)
    position = stock_position(obs)
    recent_profit = jnp.mean((obs.sales_price[-RECENT:] - cheapest) * recent, 0)
    own = jnp.stack(
        [
            jnp.log(obs.prices / cheapest),
            jnp.where(recorded > 0, jnp.log(obs.prices / jnp.maximum(mean_price, 1e-3)), 0.0),
            jnp.log1p(obs.on_hand.astype(f)),
            jnp.log1p(obs.waiting.astype(f)),
            jnp.log1p(obs.incoming.astype(f)),
            jnp.log1p(rate),
            jnp.log1p(position / jnp.maximum(rate, 0.5)),
            jnp.log1p(units[-1]),
            jnp.log1p(recent.mean(0)),
            symlog(recent_profit),
            recorded.astype(f) / obs.sales_units.shape[0],
            obs.shelf.astype(f),
            obs.rating_mean - 4.5,
            jnp.log1p(obs.rating_count.astype(f)),
            obs.return_rate,
            jnp.minimum(obs.news_mentions, 3).astype(f),
            symlog(obs.history_profit),
        ],
        -1,
    )
    rated = obs.supplier_rating > 0
    supplier = jnp.stack(
        [
            jnp.log(obs.quote_price / cheapest[:, None]),
            obs.transport_min.astype(f) / 7.0,
            obs.transport_max.astype(f) / 7.0,
            jnp.where(rated, obs.supplier_rating - obs.rating_mean[:, None], 0.0),
            rated.astype(f),
            obs.supplier_return_rate,
        ],
        -1,
    )  # [J, K, 6]
    return jnp.concatenate([own, supplier.reshape(supplier.shape[0], -1)], -1)


def global_features(obs: Observation) -> jax.Array:
    """[GLOBAL_FEATURES] store-wide fields: calendar, money, capacity and shelf use."""
    f = obs.prices.dtype
    weekday = jax.nn.one_hot(obs.day % 7, 7, dtype=f)
    scalars = jnp.stack(
        [
            obs.day.astype(f) / HORIZON,
            symlog(obs.funds / 1000.0),
            symlog(obs.net_worth / 1000.0),
            obs.capacity_used.astype(f),
            obs.shelf.sum().astype(f) / obs.shelf_capacity.astype(f),
        ]
    )
    return jnp.concatenate([scalars, weekday])


def encode(obs: Observation) -> tuple[jax.Array, jax.Array]:
    """Observation -> (product rows [J, F], global row [G]); vmap for a batch."""
    return product_features(obs), global_features(obs)


def feature_sizes(num_suppliers: int) -> tuple[int, int]:
    """(F, G) for ``num_suppliers`` suppliers per product."""
    return 17 + 6 * num_suppliers, 12

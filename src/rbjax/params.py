"""Everything a sweep may vary: the params pytree, with hard_v2 values as defaults.

Every leaf is an array; give any leaf a leading batch axis and ``rbjax.rollout`` vmaps over it.
Shapes: J products, K suppliers, G categories, T calendar days of the data window.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rbjax.config import EPISODE_DAYS, EnvConfig
from rbjax.data.catalog import Catalog

FOOD_CATEGORIES = (
    "Bottled Juices",
    "Cereals",
    "Cookies",
    "Crackers",
    "Cheeses",
    "Canned Soup",
    "Canned Tuna",
    "Frozen Entrees",
    "Frozen Juices",
    "Snack Crackers",
    "Soft Drinks",
)
NEWS_MODES = ("neutral", "single_category", "macro_all", "sku_level")
DEFAULT_OPENING = "1991-09-07"


@struct.dataclass
class World:
    """The generated supplier world of one episode (``docs/model.md``, "Decisions").

    Daily tier redraws, quotes and news are drawn from ``key`` and the calendar day, so the same World
    gives the same supplier quotes and news stream whatever the episode key.
    """

    key: jax.Array  # [2] uint32 raw key data (``prng()`` wraps it)
    cycle_len: jax.Array  # [J, K] int16 tier-cycle length, UniformInt[120, 180]
    transport_min: jax.Array  # [J, K] int8, 2 <= min < max <= 7
    transport_max: jax.Array  # [J, K] int8
    first_cycle: jax.Array  # [J, K] int16 cycle index at the first history day
    cycle_quality: (
        jax.Array
    )  # [NC, J, K] int8 quality tier drawn for each cycle (NC = 4 cover 120+ day cycles
    cycle_price: jax.Array  # [NC, J, K] int8 price tier      over history + horizon; later cycles reuse them)

    def prng(self) -> jax.Array:
        return jax.random.wrap_key_data(self.key)


@struct.dataclass
class EnvParams:
    # economics
    initial_funds: jax.Array  # [] 30000
    rent: jax.Array  # [] 600 per day
    capacity: jax.Array  # [] int32 15000 store units
    shelf_capacity: jax.Array  # [] int32 40 products
    max_units_per_order: jax.Array  # [] int32 15000
    neg_funds_days: jax.Array  # [] int32 5 consecutive negative end-of-day funds terminate
    horizon: jax.Array  # [] int32 180 days, then truncated
    open_day: jax.Array  # [] int32 calendar index of the opening date (1991-09-07 -> 93)
    # demand (docs/model.md, "Demand")
    rho: jax.Array  # [] 3.0 power-mean exponent
    alpha: jax.Array  # [J]
    beta: jax.Array  # [J]
    beta_s: jax.Array  # [J]
    beta_c: jax.Array  # [J]
    sigma: jax.Array  # [J]
    shelf_life: jax.Array  # [J] int32 L
    price_min: jax.Array  # [J]
    price_max: jax.Array  # [J]
    price_p30: jax.Array  # [J]
    price_p70: jax.Array  # [J]
    # reviews and returns ("Returns and reviews", "Pre-opening history")
    review_ratio: jax.Array  # [] 0.05 reviews per sold unit
    history_review_ratio: jax.Array  # [] 0.03 in the simulated pre-opening history
    anchor_rating: jax.Array  # [J] now_start_point
    review_poly: jax.Array  # [G, 5] gain quartic per category, highest power first
    # news ("News")
    news_ratios: jax.Array  # [4] neutral, single_category, macro_all, sku_level
    news_weights: jax.Array  # [4]
    news_scale: jax.Array  # [] lambda 0.8
    news_cap: jax.Array  # [] 0.5
    supply_category: jax.Array  # [J] int32 category used by supply-side news matching
    # suppliers ("Suppliers")
    quality_bands: jax.Array  # [7, 2] offsets on the anchor rating, Q1..Q7
    price_bands: jax.Array  # [5, 2] multipliers on the base cost, P1..P5
    copula_rho: jax.Array  # [J, 2] range of the Gaussian-copula correlation per product
    cycle_range: jax.Array  # [2] int32 120, 180
    cost_series_start: jax.Array  # [J] int32 cycle origin (first date of the cost series)
    # exogenous series over the data window
    traffic: jax.Array  # [T] customers per day
    base_cost: jax.Array  # [T, J]
    week_index: jax.Array  # [T] int32
    world: World | None = None  # None: draw a new world from each reset key


def default_params(catalog: Catalog, config: EnvConfig) -> EnvParams:
    """hard_v2 parameters for the catalogue (the paper's configuration, ``docs/model.md``)."""
    f = config.float_dtype
    names = catalog.category_names
    food = np.array([names[c] in FOOD_CATEGORIES for c in catalog.category])
    supply_cat = catalog.category  # supplier rows use the folder category (20 groups) in both groupings
    arr = lambda x, dt=f: jnp.asarray(np.asarray(x, dtype=dt))
    return EnvParams(
        initial_funds=arr(30000.0),
        rent=arr(600.0),
        capacity=arr(15000, np.int32),
        shelf_capacity=arr(40, np.int32),
        max_units_per_order=arr(15000, np.int32),
        neg_funds_days=arr(5, np.int32),
        horizon=arr(EPISODE_DAYS, np.int32),
        open_day=arr(catalog.day_of(DEFAULT_OPENING), np.int32),
        rho=arr(3.0),
        alpha=arr(catalog.alpha),
        beta=arr(catalog.beta),
        beta_s=arr(catalog.beta_s),
        beta_c=arr(catalog.beta_c),
        sigma=arr(catalog.sigma),
        shelf_life=arr(catalog.shelf_life, np.int32),
        price_min=arr(catalog.price_min),
        price_max=arr(catalog.price_max),
        price_p30=arr(catalog.price_p30),
        price_p70=arr(catalog.price_p70),
        review_ratio=arr(0.05),
        history_review_ratio=arr(0.03),
        anchor_rating=arr(catalog.anchor_rating),
        review_poly=arr(catalog.review_poly),
        news_ratios=arr([0.90, 0.02, 0.03, 0.05]),
        news_weights=arr([0.0, 1.0, 1.0, 1.2]),
        news_scale=arr(0.8),
        news_cap=arr(0.5),
        supply_category=arr(supply_cat, np.int32),
        quality_bands=arr(
            [[0.2, 0.3], [0.1, 0.2], [0.0, 0.1], [-1.0, 0.0], [-2.0, -1.0], [-2.5, -2.0], [-3.0, -2.5]]
        ),
        price_bands=arr([[1.00, 1.05], [0.90, 1.00], [0.80, 0.90], [0.70, 0.80], [0.60, 0.70]]),
        copula_rho=arr(np.where(food[:, None], [[0.2, 0.3]], [[0.4, 0.5]])),
        cycle_range=arr([120, 180], np.int32),
        cost_series_start=arr(catalog.cost_series_start, np.int32),
        traffic=arr(catalog.traffic),
        base_cost=arr(catalog.base_cost),
        week_index=arr(catalog.week_index, np.int32),
    )

"""Simulated pre-opening history (``docs/model.md``), run once at reset.

Over the ``history_days`` before opening: prices held in blocks of UniformInt[3, 7] days, drawn from
U(price_min, p30) or U(p70, price_max) with probability 1/2; every product always in stock; legacy
demand (per product Binomial(N, T/(1+T)), T = a_j + sum of a over its category, stochastic rounding
of X a_j / T); supply from the best (0.6) or second-best (0.4) quality supplier of the day; reviews at
rate 0.03 per unit with the tilted rating distribution; neutral news only, no review gain.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rbjax.config import EnvConfig
from rbjax.kernels import rng
from rbjax.model import demand, reviews, sales, suppliers
from rbjax.params import EnvParams, World
from rbjax.state import Reviews, Sales

SHARE_DAYS = 30  # the history days ``Opening.supplier_share`` counts (the agent tools show every one of them)


@struct.dataclass
class Opening:
    """What the pre-opening history leaves the store on its first morning."""

    reviews: Reviews  # review ring and older totals; rating0 = the mean rating at opening
    sales: Sales  # the last W days' prices and units
    profit: jax.Array  # [J] float profit at the cheapest daily quote, summed over the history
    quality_tier: jax.Array  # [J, K] int8 supplier tiers on the last history day
    price_tier: jax.Array  # [J, K] int8
    supplier_share: jax.Array  # [J, K] float share of the last SHARE_DAYS history days each supplier supplied


@struct.dataclass
class OpeningRecords:
    """The pre-opening days as the agent tools' ledgers show them, each with a leading [H] day axis."""

    price: jax.Array  # [H, J] float the day's retail price
    units: jax.Array  # [H, J] int32 units sold
    reviews: jax.Array  # [H, J] int32 reviews written
    stars: jax.Array  # [H, J] int32 sum of their star ratings
    quote_price: jax.Array  # [H, J, K] float the day's supplier quotes
    supplier: jax.Array  # [H, J] int32 the supplier that day's units came from


def simulate(key: jax.Array, config: EnvConfig, params: EnvParams, world: World, records: bool = False):
    """Play the ``config.history_days`` days before ``params.open_day``.

    Returns the ``Opening``, and with ``records=True`` also the ``OpeningRecords`` (static flag: the
    per-day quotes are only kept when asked for).
    """
    J, K, H = config.num_products, config.num_suppliers, config.history_days
    cats = np.asarray(config.category_of)
    one_hot_cat = jnp.asarray(np.eye(config.num_categories)[cats], params.alpha.dtype)  # [J, G]
    f = params.alpha.dtype
    start = params.open_day - H

    def day(carry, i):
        q_tier, p_tier, price, left, profit_sum = carry
        cal = start + i
        k = jax.random.fold_in(key, i)
        k_block, k_len, k_band, k_sup, k_attr, k_dem, k_round, k_rev, k_star = jax.random.split(k, 9)
        q_tier, p_tier = suppliers.update_tiers(world, params, q_tier, p_tier, cal, redraw_all=(i == 0))
        quote_price, quote_quality = suppliers.daily_quotes(
            world, params, q_tier, p_tier, cal, jnp.zeros(J, f)
        )
        # price blocks
        renew = left <= 0
        u = rng.uniform(k_band, (J, 2), f)
        low = params.price_min + (params.price_p30 - params.price_min) * u[:, 1]
        high = params.price_p70 + (params.price_max - params.price_p70) * u[:, 1]
        price = jnp.where(renew, jnp.where(u[:, 0] < 0.5, low, high), price)
        left = jnp.where(renew, rng.randint(k_len, jnp.full((J,), 3), jnp.full((J,), 7)), left) - 1
        # supply from one of the two best-quality suppliers
        best = jnp.argmax(quote_quality, -1)
        second = jnp.argmax(jnp.where(jnp.arange(K) == best[:, None], -jnp.inf, quote_quality), -1)
        chosen = jnp.where(rng.uniform(k_sup, (J,)) < 0.6, best, second)
        quality = jnp.take_along_axis(quote_quality, chosen[:, None], -1)[:, 0]
        # legacy demand, everything in stock
        a = demand.attraction(k_attr, params, price, jnp.zeros(J, f), cal)
        total = a + one_hot_cat @ (a @ one_hot_cat)
        buyers = rng.binomial(k_dem, jnp.full((J,), params.traffic[cal], f), total / (1.0 + total))
        raw = buyers * a / jnp.maximum(total, 1e-30)
        units = jnp.floor(raw) + (rng.uniform(k_round, (J,), f) < raw - jnp.floor(raw))
        n_rev = rng.binomial(k_rev, units, jnp.broadcast_to(params.history_review_ratio, (J,)))
        stars = reviews.sample_stars(k_star, n_rev, reviews.rating_probs(quality))
        profit_sum = (
            profit_sum + (price - quote_price.min(-1)) * units
        )  # in day order: same bits at any batch size
        extra = (quote_price,) if records else ()
        return (q_tier, p_tier, price, left, profit_sum), (
            price,
            units,
            n_rev,
            stars,
            chosen.astype(jnp.int32),
            *extra,
        )

    init = (
        jnp.zeros((J, K), jnp.int8),
        jnp.zeros((J, K), jnp.int8),
        params.price_min,
        jnp.zeros(J, jnp.int32),
        jnp.zeros(J, f),
    )
    (q_tier, p_tier, _, _, profit), days = jax.lax.scan(day, init, jnp.arange(H))
    return opened(config, params, (q_tier, p_tier, profit), days, records)


def opened(config: EnvConfig, params: EnvParams, last, days, records: bool):
    """The ``Opening`` (and with ``records`` the ``OpeningRecords``) from the pre-opening scan: ``last`` its
    final (quality tiers [J, K], price tiers [J, K], profit [J]); ``days`` its per-day outputs, leaves [H, J]
    (price, units, reviews, stars, the chosen supplier, and with ``records`` the quotes [H, J, K])."""
    (q_tier, p_tier, profit), (price, units, n_rev, stars, chosen, *extra) = last, days
    f = params.alpha.dtype
    H, R, W = config.history_days, config.review_window, config.sales_window
    # a day's reviews and stars held at the ring's int16 range, as reviews.push holds a played day's
    n_rev, stars = (jnp.clip(x.astype(jnp.int32), 0, 32767) for x in (n_rev, stars))
    units = units.astype(jnp.int32)
    ring = lambda x, length: jnp.roll(x, (params.open_day - length) % length, axis=0)
    opening_reviews = Reviews(
        count=ring(n_rev[H - R :], R).astype(jnp.int16),
        sum=ring(stars[H - R :], R).astype(jnp.int16),
        window_count=n_rev[H - R :].sum(0),
        window_sum=stars[H - R :].sum(0),
        old_count=n_rev[: H - R].sum(0),
        old_sum=stars[: H - R].sum(0),
        rating0=params.anchor_rating.astype(f),
    )
    # no review at all before opening: the reference would refuse to start; rbjax uses the anchor rating
    opening_reviews = opening_reviews.replace(rating0=reviews.window_rating(opening_reviews).astype(f))
    opening = Opening(
        reviews=opening_reviews,
        sales=sales.from_days(price[H - W :].astype(f), units[H - W :], params.open_day - W),
        profit=profit.astype(f),
        quality_tier=q_tier,
        price_tier=p_tier,
        supplier_share=jax.nn.one_hot(chosen[H - SHARE_DAYS :], config.num_suppliers, dtype=f).mean(0),
    )
    if not records:
        return opening
    (quotes,) = extra
    return opening, OpeningRecords(
        price=price.astype(f), units=units, reviews=n_rev, stars=stars, quote_price=quotes, supplier=chosen
    )

"""Generated news (SIMULATOR.md §3.12, decision 3).

Today's list has N = 20 slots. Each day business items (non-neutral) age by one day and stay while
their remaining days are >= 0; every other slot gets a fresh draw: mode ~ ratios, a uniform target
(product for sku_level, category for single_category), strength eta ~ U(0, 1), factor need/supply and
direction +/- with probability 1/2 each; business items get UniformInt{3, 4, 5} remaining days, so
they are shown 4-6 days.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from rbjax.kernels import rng
from rbjax.params import EnvParams

NEUTRAL, SINGLE_CATEGORY, MACRO_ALL, SKU_LEVEL = 0, 1, 2, 3


def sample_items(key: jax.Array, params: EnvParams, n: int, num_categories: int):
    """Fresh news items: (mode int32, target int32, need bool, signed strength, remain int32), each [n]."""
    J = params.anchor_rating.shape[0]
    u = rng.uniform(key, (n, 6), params.news_scale.dtype)
    cdf = jnp.cumsum(params.news_ratios) / jnp.sum(params.news_ratios)
    mode = jnp.sum(u[:, :1] > cdf[None, :-1], -1).astype(jnp.int32)
    target = jnp.where(mode == SKU_LEVEL, jnp.floor(u[:, 1] * J), jnp.floor(u[:, 1] * num_categories))
    business = mode != NEUTRAL
    sign = jnp.where(u[:, 3] < 0.5, 1.0, -1.0)
    signed = jnp.where(business, sign * u[:, 2], 0.0)
    remain = jnp.where(business, 3 + jnp.floor(u[:, 5] * 3), -1)
    return mode, target.astype(jnp.int32), u[:, 4] < 0.5, signed.astype(params.news_scale.dtype), remain.astype(jnp.int32)


def advance(key, params, num_categories, mode, target, need, signed, remain):
    """Tomorrow's list: age business items, replace the rest."""
    remain = remain - 1
    stay = remain >= 0
    fresh = sample_items(key, params, mode.shape[0], num_categories)
    pick = lambda old, new: jnp.where(stay, old, new)
    return (pick(mode, fresh[0]), pick(target, fresh[1]), pick(need, fresh[2]), pick(signed, fresh[3]),
            pick(remain, fresh[4]))


def effect(params: EnvParams, category_of, mode, target, need_flag, signed, factor_need: bool) -> jax.Array:
    """[J] E^f = clip(lambda * sum_matching w_mode * signed strength, -cap, cap) for factor f."""
    J = params.anchor_rating.shape[0]
    cat = jnp.asarray(category_of)
    t = target.astype(jnp.int32)[:, None]
    m = mode[:, None]
    match = (m == MACRO_ALL) | ((m == SKU_LEVEL) & (t == jnp.arange(J))) | ((m == SINGLE_CATEGORY) & (t == cat))
    factor = need_flag if factor_need else ~need_flag
    weight = params.news_weights[mode.astype(jnp.int32)] * signed * factor
    total = params.news_scale * (weight @ match.astype(weight.dtype))
    return jnp.clip(total, -params.news_cap, params.news_cap)


def mentions(category_of, mode, target, J: int) -> jax.Array:
    """[J] number of non-neutral items naming the product or its category (what a headline reveals)."""
    t = target.astype(jnp.int32)[:, None]
    m = mode[:, None]
    named = ((m == SKU_LEVEL) & (t == jnp.arange(J))) | ((m == SINGLE_CATEGORY) & (t == jnp.asarray(category_of)))
    return named.sum(0).astype(jnp.int32)


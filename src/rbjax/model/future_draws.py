"""The draws a store has already made for days after today, and how a simulated future redraws them.

A store draws some of its randomness ahead of time: at reset the supplier world fixes the tier pair of every
cycle to come and each supplier's cycle length (so the day its tiers change), and the world's key fixes the
daily quotes, tier-rule draws and news of every later day; each business news item holds the days it has left.
None of these is shown to an agent. A policy that simulates the store (``rbjax.policies.planner``) must not
read them, or its futures would be the store's own future: ``redraw`` replaces each with a fresh draw from the
future's key, from the law it was drawn from.

``FUTURE_DRAWS`` names them, one redraw per state field; what a simulated future keeps as it is (today's
state, the hidden quality of today's quotes and lots, today's news items' targets and strengths, the true
parameters, the transport ranges an agent sees) is listed in ``KEPT``. ``tests/policies/test_planner.py``
changes each redrawn field in turn, the observation and the oracle's view unchanged, and checks the planner's
values do not move, and that they do with any one redraw removed.

Two laws are approximations, as a planner without an agent's memory must make them:
  - a cycle's length is redrawn whole, UniformInt[cycle_range], with the cycle's phase from the calendar:
    the day of the next tier change is uniform-ish over the coming months, as it is for a supplier whose last
    change was not seen; the new cycle's tier pair is a fresh Gaussian-copula pair (the reference's selection
    among attempts, which conditions the whole window on a rule, is not replayed);
  - a business item's days left are drawn from their law for an item of unknown age: an item shows its
    remaining days r0, r0 - 1, ..., 0 with r0 ~ UniformInt{3, 4, 5}, so a live item has r left with
    probability 1/5 for r = 0..3, 2/15 for r = 4 and 1/15 for r = 5 (``REMAIN_LAW``).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.kernels import rng
from rbjax.model import news as N
from rbjax.model import suppliers as S
from rbjax.params import EnvParams
from rbjax.state import EnvState

REMAIN_LAW = np.array([3, 3, 3, 3, 2, 1], np.float64) / 15.0  # P(r days left), r = 0..5, of a live item

# the fields a simulated future keeps as they are, and why it may read them
KEPT = {
    "day, funds, net_worth, prices, shelf, neg_days, done": "today's state, as an agent sees it",
    "lots, pending": "what is in the store and on its way (an agent sees units, costs and arrival dates); the "
    "hidden quality of those units is privileged, as the oracle's quote quality is",
    "reviews, sales, history_profit": "the store's past, shown by the tools",
    "suppliers": "today's tiers and quotes: the hidden quality is privileged (the oracle reads it)",
    "news.mode, news.target, news.need, news.signed": "today's items; their summed effects are what the oracle "
    "reads (privileged: an agent reads the items' text)",
    "world.transport_min, world.transport_max": "the transport ranges the quotes show",
    "params": "the store's true parameters (privileged): demand, prices, the data window's traffic and costs",
}


def _world_key(state: EnvState, params: EnvParams, key, cal) -> EnvState:
    """A fresh world key: the future's own daily quotes, tier-rule draws and news stream."""
    data = jax.random.key_data(jax.random.fold_in(key, 1)).astype(state.world.key.dtype)
    return state.replace(world=state.world.replace(key=data.reshape(state.world.key.shape)))


def _cycle_len(state: EnvState, params: EnvParams, key, cal) -> EnvState:
    """Fresh cycle lengths UniformInt[cycle_range]: the future's own days of tier change."""
    shape = state.world.cycle_len.shape
    lo, hi = (jnp.full(shape, params.cycle_range[i]) for i in (0, 1))
    length = rng.randint(jax.random.fold_in(key, 2), lo, hi).astype(state.world.cycle_len.dtype)
    return state.replace(world=state.world.replace(cycle_len=length))


def _first_cycle(state: EnvState, params: EnvParams, key, cal) -> EnvState:
    """The tables' first row is today's cycle (of the lengths in the state: redrawn first)."""
    first = S.cycle_index(state.world.cycle_len, params.cost_series_start, cal)
    return state.replace(world=state.world.replace(first_cycle=first.astype(state.world.first_cycle.dtype)))


def _tier_pairs(key, params: EnvParams, shape):
    """[TIER_CYCLES, J, K] fresh Gaussian-copula tier pairs (quality, price), the same for both tables."""
    return S.draw_tier_pairs(jax.random.fold_in(key, 3), params, (S.TIER_CYCLES, *shape))


def _cycle_quality(state: EnvState, params: EnvParams, key, cal) -> EnvState:
    """Fresh quality tiers for every cycle to come (the current cycle's tiers stay in ``suppliers``)."""
    q, _ = _tier_pairs(key, params, state.world.cycle_len.shape)
    return state.replace(world=state.world.replace(cycle_quality=q.astype(state.world.cycle_quality.dtype)))


def _cycle_price(state: EnvState, params: EnvParams, key, cal) -> EnvState:
    """Fresh price tiers for every cycle to come, paired with ``_cycle_quality``'s by the copula."""
    _, p = _tier_pairs(key, params, state.world.cycle_len.shape)
    return state.replace(world=state.world.replace(cycle_price=p.astype(state.world.cycle_price.dtype)))


def _news_remain(state: EnvState, params: EnvParams, key, cal) -> EnvState:
    """Business items' days left from ``REMAIN_LAW``; neutral items (-1: shown today only) stay."""
    u = rng.uniform(jax.random.fold_in(key, 4), state.news.remain.shape)
    cdf = jnp.asarray(np.cumsum(REMAIN_LAW)[:-1], u.dtype)
    days = jnp.sum(u[:, None] >= cdf[None, :], -1).astype(state.news.remain.dtype)
    business = state.news.mode != N.NEUTRAL
    return state.replace(news=state.news.replace(remain=jnp.where(business, days, state.news.remain)))


# state field -> its redraw, applied in this order (``first_cycle`` reads the redrawn ``cycle_len``)
FUTURE_DRAWS: dict[str, Callable] = {
    "world.key": _world_key,
    "world.cycle_len": _cycle_len,
    "world.first_cycle": _first_cycle,
    "world.cycle_quality": _cycle_quality,
    "world.cycle_price": _cycle_price,
    "news.remain": _news_remain,
}


def redraw(state: EnvState, params: EnvParams, key: jax.Array) -> EnvState:
    """``state`` (one store, this morning) with every draw of ``FUTURE_DRAWS`` made afresh from ``key`` (a
    typed key: the future's own); the rest of the state is unchanged. The result depends on ``key``, the
    params and the fields of ``KEPT`` alone."""
    cal = params.open_day + state.day
    for fn in FUTURE_DRAWS.values():
        state = fn(state, params, key, cal)
    return state

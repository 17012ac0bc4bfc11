"""Where a day's time goes: each module of the step timed alone on the same batch, and a floor kernel.

``module_costs`` feeds every module the inputs it sees inside ``Env.step`` (built from a real batch of
states), so the times add up to roughly one step. ``floor_kernel`` reads and writes every state byte and
draws as many random words as one day does, and nothing else: the step's time over the floor's is the
engine's distance to the hardware limit.
"""
from __future__ import annotations

import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.kernels import rng

from rbjax.model import demand, inventory, news, orders, reviews, suppliers
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.state import Action, EnvState

# random words one day draws per store (attraction J, demand G + G*S, returns/reviews 2J + 8J + J,
# lead times J*K, news N*6, tiers 3J, quotes 2*J*K): counted from the samplers' shapes
def words_per_day(env: Env) -> int:
    cfg = env.config
    J, K, N = cfg.num_products, cfg.num_suppliers, cfg.news_slots
    G, S = cfg.category_grid.shape
    return J + G + G * S + 11 * J + J * K + 6 * N + 3 * J + 2 * J * K


def time_call(fn: Callable, *args, repeats: int = 5) -> float:
    """Seconds per call of a jitted ``fn`` (compiled and warmed up first), best of ``repeats``."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best


def floor_kernel(env: Env):
    """A jittable (key [B], state [B]) -> state [B] that touches every state byte and draws one day's words."""
    n_words = words_per_day(env)

    def one(key, state: EnvState) -> EnvState:
        u = rng.uniform(key, (n_words,))
        bump = u.sum() * 0.0    # data-dependent but zero: XLA cannot drop the draws
        return jax.tree.map(lambda x: (x + bump.astype(x.dtype)) if jnp.issubdtype(x.dtype, jnp.number)
                            else ~x if x.dtype == jnp.bool_ else x, state)
    return jax.jit(jax.vmap(one), donate_argnums=(1,))


def module_costs(env: Env, params: EnvParams, state: EnvState, action: Action, keys: jax.Array,
                 repeats: int = 5, only: tuple[str, ...] | None = None) -> dict[str, float]:
    """Seconds per call of each part of ``Env.step`` on the batch ``state`` [B] (action [B], keys [B]);
    ``only``: a subset of the part names."""
    cfg, f = env.config, env.config.float_dtype
    cat = np.asarray(cfg.category_of)
    cal = params.open_day + state.day                                     # [B]

    def vm(fn, *axes):
        return jax.jit(jax.vmap(fn, in_axes=axes))

    on_hand = state.lot_store.sum(-1)
    visible = (on_hand > 0) & state.shelf
    a = jax.vmap(demand.attraction, in_axes=(0, None, 0, 0, 0))(keys, params, state.prices,
                                                               jnp.zeros_like(state.prices), cal)
    wanted, _ = jax.vmap(demand.category_demand, in_axes=(0, None, None, 0, 0, None))(
        keys, cfg, params, a * visible, visible, params.traffic[cal[0]])
    sold = jnp.minimum(wanted.astype(jnp.int32), on_hand)
    taken = jax.vmap(inventory.take_fifo)(state.lot_store, state.lot_arrival, sold)
    delivered = state.pend_qty.sum(1)
    parts = {
        "observe": (vm(env.observe, 0, None), state, params),
        "privileged (oracle only)": (vm(env.privileged, 0, None), state, params),
        "rating + review gain": (vm(lambda s: reviews.review_gain(params.review_poly, cat, reviews.window_rating(
            s.rev_window_count, s.rev_window_sum, s.rev_old_count, s.rev_old_sum, s.rating0)), 0), state),
        "news effect (need)": (vm(lambda s: news.effect(params, cat, s.news_mode, s.news_target, s.news_need,
                                                        s.news_signed, True), 0), state),
        "attraction": (vm(demand.attraction, 0, None, 0, 0, 0), keys, params, state.prices, state.prices * 0, cal),
        "category demand": (vm(lambda k, a, v: demand.category_demand(k, cfg, params, a, v, params.traffic[100]),
                               0, 0, 0), keys, a * visible, visible),
        "fifo take": (vm(inventory.take_fifo, 0, 0, 0), state.lot_store, state.lot_arrival, sold),
        "returns + reviews": (vm(reviews.returns_and_reviews, 0, 0, 0, None), keys, taken.astype(f),
                              state.lot_quality, params.review_ratio),
        "push reviews": (vm(lambda s, n: reviews.push_reviews(s.rev_count, s.rev_sum, s.rev_window_count,
                                                              s.rev_window_sum, s.rev_old_count, s.rev_old_sum,
                                                              s.day % cfg.review_window, n, 4.0 * n), 0, 0),
                         state, sold.astype(f) * 0.05),
        "expire": (vm(inventory.expire, 0, 0, 0, None, 0), state.lot_store, state.lot_wait, state.lot_arrival,
                   params.shelf_life, cal),
        "admit waiting": (vm(inventory.admit_waiting, 0, 0, 0, None), state.lot_store, state.lot_wait,
                          state.lot_arrival, params.capacity),
        "orders (sanitize, funds, place)": (vm(lambda k, s, a: orders.place(
            k, orders.sanitize(a.order, params.max_units_per_order)[0] * orders.accept_by_funds(
                a.order * s.quote_price, s.funds, a.order_rank)[0], s.quote_price, s.quote_quality,
            s.world.transport_min, s.world.transport_max, params.open_day + s.day, s.pend_qty, s.pend_cost,
            s.pend_quality), 0, 0, 0), keys, state, action),
        "news advance": (vm(lambda k, s: news.advance(k, params, cfg.num_categories, s.news_mode, s.news_target,
                                                      s.news_need, s.news_signed, s.news_remain), 0, 0), keys, state),
        "deliver": (vm(lambda s, q: inventory.deliver(s.lot_store, s.lot_wait, s.lot_arrival, s.lot_cost,
                                                      s.lot_quality, q, q * 1.0, q * 4.0, params.open_day + s.day,
                                                      params.capacity), 0, 0), state, delivered),
        "supplier tiers": (vm(lambda s: suppliers.update_tiers(s.world, params, s.quality_tier, s.price_tier,
                                                               params.open_day + s.day + 1), 0), state),
        "quotes": (vm(lambda s: suppliers.daily_quotes(s.world, params, s.quality_tier, s.price_tier,
                                                       params.open_day + s.day + 1, jnp.zeros(cfg.num_products, f)),
                      0), state),
        "book value": (vm(lambda s: inventory.book_value(s.lot_store, s.lot_wait, s.lot_arrival, s.lot_cost,
                                                         params.shelf_life, params.open_day + s.day), 0), state),
        "supplier ranks (info)": (vm(lambda s, o: env._supplier_ranks(o > 0, s, lambda x: x), 0, 0), state,
                                  action.order),
    }
    return {name: time_call(fn, *args, repeats=repeats) for name, (fn, *args) in parts.items()
            if only is None or name in only}

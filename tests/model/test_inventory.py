"""rbjax.model.inventory: the capacity queue, expiry timing and book value, FIFO overflow."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import J, K, act, fixed_world, order_of


@pytest.mark.slow
def test_capacity_queue_invariant_holds_every_evening(params, reset, step):
    """After each day, the waiting queue is empty or the store is full (why the morning admission is skipped)."""
    p = params.replace(capacity=jnp.int32(400))
    obs, s = reset(jax.random.key(3), p)
    waited = False
    for d in range(25):
        a = act(s, shelf=range(10), order=jnp.zeros((J, K)).at[:10, 0].set(jnp.where(d % 3 == 0, 60.0, 0.0)))
        obs, s, *_ = step(jax.random.key(100 + d), s, a, p)
        store, wait = int(s.lots.store.sum()), int(s.lots.wait.sum())
        waited |= wait > 0
        assert store <= 400 and (wait == 0 or store == 400)
    assert waited


def test_expiry_day_and_book_value(env, params, reset, step):
    life = 4
    p = params.replace(world=fixed_world(env, params, 2, 2), shelf_life=params.shelf_life.at[5].set(life))
    obs, s = reset(jax.random.key(1), p)
    nw, expired = [], []
    for d in range(10):
        a = act(s, order=order_of(5, 100) if d == 0 else None)  # shelf empty: nothing sells
        obs, s, r, term, trunc, info = step(jax.random.key(d), s, a, p)
        nw.append(float(s.net_worth - s.funds)), expired.append(int(info.expired[5]))
    # arrival A = day 2; sellable days 2 .. A+L+1 = 7; removed after the sales of day 7
    assert expired == [0] * 7 + [100, 0, 0]
    cost = nw[0]  # undelivered order at full cost
    # net worth after day t is valued at date t+1: (A + L - (t+1)) / L of the cost, 0 from date A+L = 6 on
    np.testing.assert_allclose(
        nw[1:8], [cost * max(0.0, (2 + life - (t + 1)) / life) for t in range(1, 8)], rtol=1e-5
    )


def test_overflow_goes_to_queue_in_order_and_comes_back(env, params, reset, step):
    p = params.replace(world=fixed_world(env, params, 2, 2), capacity=jnp.int32(50))
    obs, s = reset(jax.random.key(2), p)
    order = jnp.zeros((J, K)).at[0, 0].set(30.0).at[1, 0].set(40.0)
    obs, s, *_ = step(jax.random.key(0), s, act(s, order=order), p)
    obs, s, *_ = step(jax.random.key(1), s, act(s), p)
    # delivered together: product 0 first (30 in), product 1 fills the rest (20 in, 20 waiting)
    assert [int(obs.on_hand[0]), int(obs.on_hand[1]), int(obs.waiting[1])] == [30, 20, 20]
    cheap = s.prices.at[0].set(0.01)
    for d in range(6):
        obs, s, r, term, trunc, info = step(jax.random.key(10 + d), s, act(s, shelf=[0], price=cheap), p)
    assert int(obs.on_hand[0]) < 30 and int(obs.waiting[1]) < 20
    assert int(obs.on_hand.sum()) <= 50 and int(obs.on_hand[1] + obs.waiting[1]) == 40

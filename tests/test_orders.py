"""rbjax.model.orders: lead times and arrival, invalid lines masked and counted, funds acceptance in call order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import J, K, act, fixed_world, order_of

from rbjax.model import orders
from rbjax.state import Action


def test_order_arrival_and_first_sale_day(env, params, reset, step):
    p = params.replace(world=fixed_world(env, params, 3, 3))
    obs, s = reset(jax.random.key(0), p)
    on_hand, delivered, sold = [], [], []
    for d in range(5):
        a = act(s, shelf=[2], order=order_of(2, 500) if d == 0 else None, price=s.prices.at[2].set(0.01))
        obs, s, r, term, trunc, info = step(jax.random.key(d), s, a, p)
        (
            on_hand.append(int(obs.on_hand[2])),
            delivered.append(int(info.delivered[2])),
            sold.append(int(info.sold[2])),
        )
    # lead 3: arrival date = day 3, delivered at the end of day 2, first sales on day 3
    assert delivered == [0, 0, 500, 0, 0] and sold[:3] == [0, 0, 0] and sold[3] > 0
    assert on_hand[2] == 500


def test_invalid_actions_are_masked_and_counted(env, params, reset, step):
    p = params.replace(world=fixed_world(env, params))
    obs, s = reset(jax.random.key(6), p)
    price = s.prices.at[0].set(-1.0).at[1].set(jnp.nan)
    order = (
        jnp.zeros((J, K)).at[0, 0].set(-5.0).at[1, 1].set(jnp.inf).at[2, 2].set(20000.0).at[3, 0].set(10.7)
    )
    a = Action(price=price, shelf=jnp.ones(J, bool), order=order)
    obs, s2, r, term, trunc, info = step(jax.random.key(0), s, a, p)
    assert int(info.invalid_prices) == 2 and float(s2.prices[0]) == float(s.prices[0])
    assert bool(info.shelf_refused) and not bool(s2.shelf.any())
    assert int(info.invalid_orders) == 3 and int(info.ordered[3]) == 10
    poor = p.replace(initial_funds=jnp.float32(50.0))
    obs, s = reset(jax.random.key(6), poor)
    order = jnp.zeros((J, K)).at[0, 0].set(10000.0).at[1, 0].set(1.0)
    obs, s2, r, term, trunc, info = step(jax.random.key(0), s, act(s, order=order), poor)
    assert int(info.refused_orders) == 1 and int(info.ordered[0]) == 0 and int(info.ordered[1]) == 1


def test_funds_refuse_orders_in_call_order_and_a_refusal_does_not_block():
    cost = jnp.zeros((4, 2)).at[0, 0].set(60.0).at[1, 1].set(50.0).at[2, 0].set(30.0)
    by_index, spent = orders.accept_by_funds(cost, jnp.float32(100.0))
    assert np.flatnonzero(np.asarray(by_index).any(1)).tolist() == [0, 2] and float(spent) == 90.0
    ranked, spent = orders.accept_by_funds(cost, jnp.float32(100.0), jnp.array([1, 0, 2, 3]))
    assert np.flatnonzero(np.asarray(ranked).any(1)).tolist() == [1, 2] and float(spent) == 80.0


def test_supplier_ranks_count_lines_by_quality_then_price():
    quality = jnp.array([[4.0, 4.5, 4.5], [3.0, 2.0, 1.0]])
    price = jnp.array([[1.0, 3.0, 2.0], [5.0, 4.0, 1.0]])
    lines = jnp.array([[True, False, True], [False, False, True]])
    ranks = {k: int(v) for k, v in orders.supplier_ranks(lines, quality, price).items()}
    # product 0: supplier 2 is rank 1 (quality 4.5, cheaper than 1), supplier 0 rank 3; product 1: supplier 2 rank 3
    assert ranks == dict(order_lines=3, quality_rank_sum=1 + 3 + 3, quality_first=1, price_first=2)


def test_a_nan_order_rank_is_placed_last_charged_in_full_and_counted(params, reset, step):
    """Every accepted line is charged its own cost, whatever the ranks (NaN ranks go last, by product)."""
    obs, s = reset(jax.random.key(9), params)
    order = jnp.zeros((J, K), jnp.float32).at[:, 0].set(20.0)
    for rank in (
        np.full(J, np.nan, np.float32),
        np.where(np.arange(J) % 3 == 0, np.nan, np.arange(J, 0, -1.0)),
    ):
        # no price call (as set_price=None would decide here): the oracle's action layout, whose step is compiled
        no_call = jnp.zeros(J, bool)
        a = Action(s.prices, s.shelf, order, set_price=no_call, order_rank=jnp.asarray(rank, jnp.float32))
        _, s2, _, _, _, info = step(jax.random.key(1), s, a, params)
        cost_of_lines = float(jnp.sum(info.ordered.astype(jnp.float32) * s.suppliers.quote_price[:, 0]))
        assert float(s.funds - s2.funds) == pytest.approx(
            cost_of_lines + float(params.rent) - float(info.revenue - info.refunds), rel=1e-5
        )
        assert float(info.order_cost) == pytest.approx(cost_of_lines, rel=1e-5)
        assert int(info.invalid_ranks) == int(np.isnan(rank).sum())


def _lines(rows, L=6):
    """OrderLines from (product, supplier, units, lead, order) rows, padded to L."""
    from rbjax.state import OrderLines

    cols = np.zeros((5, L), np.int32)
    cols[:, : len(rows)] = np.asarray(rows, np.int32).T if rows else 0
    live = np.arange(L) < len(rows)
    return OrderLines(*(jnp.asarray(c) for c in cols), live=jnp.asarray(live))


def test_order_lines_are_paid_whole_per_order_and_invalid_lines_are_counted():
    price = jnp.ones((4, 2), jnp.float32)
    check = lambda rows, funds: orders.check_lines(_lines(rows), price, jnp.float32(funds), jnp.int32(100), 8)
    # a two-line order that does not fit is refused whole; a later single line that fits is paid
    accepted, spent, invalid, refused = check([(0, 0, 30, 3, 0), (1, 1, 30, 3, 0), (2, 0, 20, 2, 1)], 50.0)
    assert accepted.tolist()[:3] == [False, False, True] and float(spent) == 20.0 and int(refused) == 2
    # bad product, supplier, units or lead: dropped and counted; an order over the unit cap is invalid whole
    bad = [
        (9, 0, 5, 3, 0),
        (0, 7, 5, 3, 1),
        (0, 0, 0, 3, 2),
        (0, 0, 5, 0, 3),
        (1, 0, 60, 2, 4),
        (2, 0, 60, 2, 4),
    ]
    accepted, spent, invalid, refused = check(bad, 1000.0)
    assert not bool(accepted.any()) and int(invalid) == 6 and float(spent) == 0.0


def test_single_line_orders_are_charged_as_the_order_matrix_charges_them():
    rng = np.random.default_rng(0)
    price = jnp.asarray(rng.uniform(0.3, 3.0, (96, 5)), jnp.float32)
    for _ in range(5):
        order = np.where(rng.random((96, 5)) < 0.2, rng.integers(1, 500, (96, 5)), 0)
        rank = jnp.asarray(rng.permutation(96), jnp.float32)
        funds = jnp.float32(rng.uniform(1000, 20000))
        accepted, spent = orders.accept_by_funds(jnp.asarray(order * price), funds, rank)
        seq = [
            (j, k, order[j, k], 3, n)
            for n, (j, k) in enumerate((j, k) for j in np.argsort(rank) for k in range(5) if order[j, k])
        ]
        got, spent_lines, _, _ = orders.check_lines(_lines(seq, 480), price, funds, jnp.int32(15000), 8)
        assert float(spent_lines) == float(spent)  # to the bit
        assert [bool(accepted[j, k]) for j, k, *_ in seq] == np.asarray(got)[: len(seq)].tolist()


def test_a_dense_order_and_the_same_single_line_orders_give_the_same_day(env, params, reset, step):
    """``orders.as_lines``: an order matrix with invalid entries, a call order and refusals for want of funds
    gives the same observation, state, reward and records through ``Action.lines``, bit for bit."""
    rng = np.random.default_rng(3)
    _, s = reset(jax.random.key(5), params)
    order = np.where(rng.random((J, K)) < 0.3, rng.integers(1, 5000, (J, K)), 0).astype(np.float32)
    order[0, :4] = [np.nan, -3.0, 0.5, 20_000.0]  # invalid, invalid, floors to no line, above the cap
    dense = Action(
        price=s.prices, shelf=s.shelf, order=jnp.asarray(order), order_rank=jnp.asarray(rng.permutation(J))
    )
    key = jax.random.key(9)
    lines = dense.replace(
        order=jnp.zeros_like(dense.order),
        lines=orders.as_lines(dense.order, env.lead_days(key, s), dense.order_rank),
    )
    a, b = step(key, s, dense, params), step(key, s, lines, params)
    info = a[-1]
    assert int(info.invalid_orders) == 3 and int(info.refused_orders) > 0 and int(info.order_lines) > 10
    same = jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y, equal_nan=True)), a, b)
    assert all(jax.tree.leaves(same)), same

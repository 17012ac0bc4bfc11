"""rbjax.model.orders: lead times and arrival, invalid lines masked and counted, funds acceptance in call order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import J, K, act, fixed_world, order_lines, order_of

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


def _book_order(cost, funds, rank=None):
    """Pays a [J, K] order of lines costing ``cost`` (unit prices, units 1) through ``orders.from_order``."""
    slots = orders.from_order((cost > 0).astype(jnp.float32), jnp.full(cost.shape, 3), rank)
    accepted, spent, _, _ = orders.book(slots, cost, funds, jnp.int32(100), 8)
    return accepted, spent


def test_funds_refuse_orders_in_call_order_and_a_refusal_does_not_block():
    cost = jnp.zeros((4, 2)).at[0, 0].set(60.0).at[1, 1].set(50.0).at[2, 0].set(30.0)
    by_index, spent = _book_order(cost, jnp.float32(100.0))
    assert np.flatnonzero(np.asarray(by_index).any(1)).tolist() == [0, 2] and float(spent) == 90.0
    ranked, spent = _book_order(cost, jnp.float32(100.0), jnp.array([1, 0, 2, 3]))
    assert np.flatnonzero(np.asarray(ranked).any(1)).tolist() == [1, 2] and float(spent) == 80.0


def test_supplier_ranks_count_lines_by_quality_then_price():
    quality = jnp.array([[4.0, 4.5, 4.5], [3.0, 2.0, 1.0]])
    price = jnp.array([[1.0, 3.0, 2.0], [5.0, 4.0, 1.0]])
    lines = jnp.array([[True, False, True], [False, False, True]])
    slots = orders.from_order(lines.astype(jnp.float32), jnp.full((2, 3), 3))
    ranks = {k: int(v) for k, v in orders.ranks(slots, lines, quality, price).items()}
    # product 0: supplier 2 is rank 1 (quality 4.5, cheaper than 1), supplier 0 rank 3; product 1: supplier 2 rank 3
    assert ranks == dict(order_lines=3, quality_rank_sum=1 + 3 + 3, quality_first=1, price_first=2)


@pytest.mark.slow
def test_a_nan_order_rank_is_placed_last_charged_in_full_and_counted(params, reset, step):
    """Every accepted line is charged its own cost, whatever the ranks, and NaN ranks go last, by product: the
    funds cover the lines placed before a given point and, of what is left, less than any later line, so the
    lines refused are exactly those placed after that point."""
    obs, s = reset(jax.random.key(9), params)
    order = jnp.zeros((J, K), jnp.float32).at[:, 0].set(20.0)
    cost = 20.0 * np.asarray(s.suppliers.quote_price[:, 0], np.float64)
    assert (cost > 0).all()
    nan_every_third = np.where(np.arange(J) % 3 == 0, np.nan, np.arange(J, 0, -1.0)).astype(np.float32)
    ranked_first = [j for j in range(J - 1, -1, -1) if j % 3] + list(range(0, J, 3))  # rank J - j, then NaN
    for rank, placed in (
        (np.full(J, np.nan, np.float32), np.arange(J)),  # all NaN: product order
        (nan_every_third, np.asarray(ranked_first)),
    ):
        first = placed[:69]  # the lines the funds cover: in the second case the 64 ranked ones and 5 NaN ones
        funds = cost[first].sum() + 0.5 * cost[placed[69:]].min()  # nothing after them fits
        # no price call (as set_price=None would decide here): the oracle's action layout, whose step is compiled
        no_call = jnp.zeros(J, bool)
        a = Action(s.prices, s.shelf, order, set_price=no_call, order_rank=jnp.asarray(rank, jnp.float32))
        poor = s.replace(funds=jnp.float32(funds))
        _, s2, _, _, _, info = step(jax.random.key(1), poor, a, params)
        assert np.flatnonzero(np.asarray(info.ordered) > 0).tolist() == sorted(first.tolist())
        assert int(info.refused_orders) == J - len(first)
        cost_of_lines = float(jnp.sum(info.ordered.astype(jnp.float32) * s.suppliers.quote_price[:, 0]))
        assert cost_of_lines == pytest.approx(cost[first].sum(), rel=1e-5)
        assert float(poor.funds - s2.funds) == pytest.approx(
            cost_of_lines + float(params.rent) - float(info.revenue - info.refunds), rel=1e-5, abs=0.05
        )
        assert float(info.order_cost) == pytest.approx(cost_of_lines, rel=1e-5)
        assert int(info.invalid_ranks) == int(np.isnan(rank).sum())


def test_order_lines_are_paid_whole_per_order_and_invalid_lines_are_counted():
    price = jnp.ones((4, 2), jnp.float32)
    check = lambda rows, funds: orders.check_lines(
        order_lines(rows), price, jnp.float32(funds), jnp.int32(100), 8
    )
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
        slots = orders.from_order(jnp.asarray(order, jnp.float32), jnp.full((96, 5), 3), rank)
        accepted, spent, _, _ = orders.book(slots, price, funds, jnp.int32(15000), 8)
        seq = [
            (j, k, order[j, k], 3, n)
            for n, (j, k) in enumerate((j, k) for j in np.argsort(rank) for k in range(5) if order[j, k])
        ]
        got, spent_lines, _, _ = orders.check_lines(order_lines(seq, 480), price, funds, jnp.int32(15000), 8)
        assert float(spent_lines) == float(spent)  # to the bit
        assert [bool(accepted[j, k]) for j, k, *_ in seq] == np.asarray(got)[: len(seq)].tolist()


@pytest.mark.slow
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


@pytest.mark.parametrize("L", [6, 12])  # slots a product: passes unrolled, and a loop (more than 8)
def test_lines_of_one_product_share_its_ring_cell_and_the_last_placed_supplier_stays(L):
    """``from_lines`` + ``place``: interleaved lines of one product sum into its (arrival day, product) cell,
    whose supplier is the last line placed there; a multi-line order lands on every product it names."""
    from rbjax.state import Pending

    J, D = 3, 8
    price = jnp.asarray([[1.0, 2.0], [3.0, 5.0], [7.0, 11.0]], jnp.float32)
    quality = jnp.asarray([[4.0, 2.0], [1.0, 3.0], [5.0, 5.0]], jnp.float32)
    # (product, supplier, units, lead, order): product 0 three times (suppliers 1, 0, then 1 on another day),
    # between them a two-line order over products 1 and 2
    rows = [(0, 1, 10, 3, 0), (1, 0, 4, 2, 1), (2, 1, 1, 2, 1), (0, 0, 5, 3, 2), (0, 1, 2, 4, 3)]
    lines = order_lines(rows, L)
    slots, line_slot, unplaced = orders.from_lines(lines, J)
    accepted, spent, invalid, refused = orders.book(slots, price, jnp.float32(1e6), jnp.int32(100), D)
    assert int(unplaced) == int(invalid) == int(refused) == 0
    assert orders.per_line(accepted, line_slot).tolist()[:5] == [True] * 5
    assert float(spent) == 10 * 2.0 + 4 * 3.0 + 1 * 11.0 + 5 * 1.0 + 2 * 2.0
    empty = Pending(
        qty=jnp.zeros((D, J), jnp.int32),
        cost=jnp.zeros((D, J), jnp.float32),
        quality=jnp.zeros((D, J), jnp.float32),
        supplier=jnp.full((D, J), -1, jnp.int8),
    )
    ring = orders.place(empty, slots, jnp.where(accepted, slots.units, 0), price, quality, jnp.int32(0))
    assert int(ring.qty[3, 0]) == 15 and float(ring.cost[3, 0]) == 10 * 2.0 + 5 * 1.0
    assert float(ring.quality[3, 0]) == 10 * 2.0 + 5 * 4.0 and int(ring.supplier[3, 0]) == 0  # the later line
    assert int(ring.qty[4, 0]) == 2 and int(ring.supplier[4, 0]) == 1
    assert ring.qty[2, 1:].tolist() == [4, 1] and ring.supplier[2, 1:].tolist() == [0, 1]
    assert int(ring.qty.sum()) == 10 + 4 + 1 + 5 + 2


def test_sized_lines_hold_their_lines_and_lines_past_a_bound_are_counted_invalid():
    """``OrderLines.sized`` bounds (lines of one product, of one order) hold every live line, so the day is
    the one with no bounds; a line past a bound set by hand is invalid, counted, and not charged."""
    from rbjax.state import OrderLines

    price = jnp.ones((4, 2), jnp.float32)
    rows = [(1, 0, 1, 3, n) for n in range(9)] + [(2, 1, 1, 3, 9)] * 3  # 9 lines of product 1, a 3-line order
    full = order_lines(rows, 16)
    cols = {
        k: np.asarray(getattr(full, k)) for k in ("product", "supplier", "units", "lead", "order", "live")
    }
    sized = OrderLines.sized(**cols)
    assert (sized.per_product, sized.per_order) == (16, 8)  # 9 -> 16; 3 -> 8 (powers of two from 8)
    pay = lambda lines: orders.check_lines(lines, price, jnp.float32(1e6), jnp.int32(100), 8)
    for a, b in zip(pay(full), pay(sized)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    tight = OrderLines(**cols, per_product=8, per_order=2)
    accepted, spent, invalid, refused = pay(tight)
    # product 1's 9th line passes 8; the 3-line order's third line passes 2 (its first two are paid)
    assert int(invalid) == 2 and float(spent) == 8 + 2 and int(refused) == 0
    assert np.asarray(accepted)[:12].tolist() == [True] * 8 + [False, True, True, False]


def test_bad_line_bounds_are_refused_at_the_boundary(env, params, reset):
    from rbjax.state import OrderLines

    _, state = reset(jax.random.key(0), params)
    lines = order_lines([(0, 0, 5, 3, 0)])
    bad = OrderLines(**{**vars(lines), "per_product": -1})
    with pytest.raises(ValueError, match="per_product"):
        env.step(
            jax.random.key(1), state, Action(state.prices, state.shelf, jnp.zeros((J, K)), lines=bad), params
        )

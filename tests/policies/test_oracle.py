"""rbjax.policies.oracle: every rule on hand-built inputs, and a whole oracle episode."""

import golden
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.policies import OracleParams, oracle
from rbjax.policies.estimates import price_and_demand
from rbjax.policies.oracle import best_supplier, order_quantity, shelf_plan
from rbjax.results import metrics
from rbjax.runners.rollout import rollout

P = OracleParams.default()
# jitted: op-by-op dispatch of the unrolled ranks would compile hundreds of small kernels
plan = jax.jit(shelf_plan)


def test_supplier_ties_go_to_the_cheaper_then_the_lower_index():
    quality = jnp.array([[4.0, 4.5, 4.5, 3.0, 4.5], [2.0, 2.0, 2.0, 2.0, 2.0]])
    price = jnp.array([[1.0, 3.0, 2.0, 0.5, 2.0], [5.0, 4.0, 4.0, 6.0, 4.0]])
    k, cost = best_supplier(quality, price)
    assert k.tolist() == [2, 1] and cost.tolist() == [2.0, 4.0]


def test_price_argmax_groups_exact_prices_and_keeps_the_first_seen():
    f = np.float32
    a, b = f(2.0), np.nextafter(f(2.0), f(3.0))  # one ulp apart: two different prices
    price = jnp.array([[a], [b], [a], [f(3.0)], [f(9.0)]], jnp.float32)  # W = 5, oldest first
    units = jnp.array([[10], [13], [4], [5], [0]], jnp.int32)  # 9.0 has no record (0 units)
    cost = jnp.array([1.0], jnp.float32)
    p_star, d, has = price_and_demand(price, units, cost, jnp.int32(5))
    # profits: a -> (2-1)*mean(10, 4) = 7, b -> (2-1)*13 = 13, 3.0 -> 2*5 = 10
    assert p_star[0] == b and float(d[0]) == 13.0 and bool(has[0])
    # an exact profit tie: the price seen first wins
    price2 = jnp.array([[f(2.0)], [f(4.0)], [f(2.0)]], jnp.float32)
    units2 = jnp.array([[6], [3], [6]], jnp.int32)  # 2*6 = 12 = 4*3 at cost 0
    p2, d2, _ = price_and_demand(price2, units2, jnp.zeros(1, jnp.float32), jnp.int32(3))
    assert float(p2[0]) == 2.0 and float(d2[0]) == 6.0  # first seen wins the tie
    # a window of 3 keeps the rows a(4), 3.0(5), 9.0(no record): a -> 4, 3.0 -> 10
    p3, d3, _ = price_and_demand(price, units, cost, jnp.int32(3))
    assert float(p3[0]) == 3.0 and float(d3[0]) == 5.0
    # no record at all: no price, demand 0
    _, d4, has4 = price_and_demand(price, jnp.zeros_like(units), cost, jnp.int32(5))
    assert not bool(has4[0]) and float(d4[0]) == 0.0


def test_reorder_trigger_quantity_and_capacity_clamp():
    target = jnp.array([10.0, 10.0, 10.0, 10.0, 0.05, 10.0])
    stock = jnp.array([61.0, 60.0, 0.0, 0.0, 0.0, 0.0])
    pipeline = jnp.array([0.0, 0.0, 25.0, 70.0, 0.0, 0.0])
    qty = order_quantity(P, target, stock, pipeline, jnp.float32(1_000.0))
    # 61 > 6*10: no trigger; 60 <= 60: up to 60; pipeline 25: 35; pipeline 70 >= 60: none; max(1, floor(.3)) = 1
    assert qty[:5].tolist() == [0.0, 60.0, 35.0, 0.0, 1.0]
    clamped = order_quantity(P, target, stock, pipeline, jnp.float32(130.0))  # room 30 after the 100 buffer
    assert clamped.tolist() == [0.0, 30.0, 30.0, 0.0, 1.0, 30.0]
    assert order_quantity(P, target, stock, pipeline, jnp.float32(90.0)).sum() == 0.0


def test_shelf_plan_is_a_round_robin_over_category_ranks(env, params, reset):
    obs, _ = reset(jax.random.key(0), params)
    cat = np.asarray(obs.category)
    rng = np.random.default_rng(0)
    profit = rng.normal(size=cat.shape).astype(np.float32)
    profit[5] = profit[6]  # a tie inside a category keeps index order
    obs = obs.replace(history_profit=jnp.asarray(profit))
    for n_cat, capacity in ((2, 40), (3, 40), (1, 12)):
        managed, position = plan(
            P.replace(products_per_category=jnp.int32(n_cat)), obs.replace(shelf_capacity=jnp.int32(capacity))
        )
        # reference construction in plain Python
        ranked = {
            g: sorted(np.flatnonzero(cat == g), key=lambda j: (-profit[j], j)) for g in range(cat.max() + 1)
        }
        order = [ranked[g][r] for r in range(n_cat) for g in sorted(ranked) if r < len(ranked[g])][:capacity]
        assert np.flatnonzero(managed).tolist() == sorted(order)
        assert [int(position[j]) for j in order] == list(range(len(order)))


def test_oracle_action_copies_prices_bit_for_bit_and_orders_in_shelf_order(env, params, reset, step):
    obs, state = reset(jax.random.key(3), params)
    priv = jax.jit(env.privileged)(state, params)
    action = jax.jit(oracle)(P, obs, priv, None)
    managed, position = plan(P, obs)
    assert np.array_equal(action.shelf, managed) and int(managed.sum()) == 40
    assert np.array_equal(action.order_rank, position)
    assert not np.asarray(action.set_price & ~managed).any() and np.asarray(action.set_price).sum() == 40
    ordered = np.asarray(action.order).sum(1) > 0
    assert (
        ordered[np.asarray(managed)].all() and not ordered[~np.asarray(managed)].any()
    )  # empty store: all reorder
    k = np.asarray(action.order).argmax(1)
    best = np.asarray(jax.jit(best_supplier)(priv.quote_quality, obs.quote_price)[0])
    assert (k[ordered] == best[ordered]).all()
    # the chosen prices are history prices, stored exactly
    hist = np.asarray(obs.sales_price)
    for j in np.flatnonzero(np.asarray(action.set_price)):
        assert np.asarray(action.price)[j] in hist[:, j]
    _, state2, _, _, _, info = step(jax.random.key(4), state, action, params)
    assert np.array_equal(np.asarray(state2.prices)[managed], np.asarray(action.price)[managed])
    assert int(info.price_changed.sum()) == 40


def test_news_multiplier_is_clipped(env, params, reset):
    obs, state = reset(jax.random.key(5), params)
    priv = jax.jit(env.privileged)(state, params)
    empty = obs.replace(
        on_hand=jnp.zeros_like(obs.on_hand),
        incoming=jnp.zeros_like(obs.incoming),
        sales_units=jnp.zeros_like(obs.sales_units),
    )  # target = 10 * multiplier
    qty = lambda need, supply: np.asarray(
        jax.jit(oracle)(
            P, empty, priv.replace(news_need=jnp.full(96, need), news_supply=jnp.full(96, supply)), None
        ).order.sum(1)
    )
    managed = np.asarray(plan(P, obs)[0])
    assert (qty(0.0, 0.0)[managed] == 60).all()
    assert (qty(0.5, 0.5)[managed] == 120).all()  # 2.25 clipped to 2
    assert (qty(-0.5, -0.5)[managed] == 30).all()  # 0.25 clipped to 0.5
    assert (qty(0.2, 0.0)[managed] == 72).all()


def test_without_the_opening_history_the_oracle_starts_from_its_fallback_and_then_reads_its_own_sales(
    env, params, reset
):
    obs, state = reset(jax.random.key(3), params)
    priv = jax.jit(env.privileged)(state, params)
    act = jax.jit(oracle)
    managed = np.asarray(plan(P, obs)[0])
    blind = act(P.replace(opening_history=jnp.bool_(False)), obs, priv, None)
    seen = act(P, obs, priv, None)
    # opening morning: every window row predates the opening -> no price set, orders of B x fallback (6 x 10)
    assert not np.asarray(blind.set_price).any() and np.asarray(seen.set_price)[managed].all()
    qty = lambda a: np.asarray(a.order).sum(1)
    news = np.clip((1 + np.asarray(priv.news_need)) * (1 + np.asarray(priv.news_supply)), 0.5, 2.0)
    target = np.float32(10.0) * news.astype(np.float32)
    np.testing.assert_array_equal(qty(blind)[managed], np.floor(np.float32(6.0) * target)[managed])
    assert not np.array_equal(qty(blind)[managed], qty(seen)[managed])
    # two days later a record of day 1 (row W - 1) counts, the pre-opening rows still do not
    W = obs.sales_units.shape[0]
    units = np.zeros(obs.sales_units.shape, np.int32)
    units[-1], units[-3] = 7, 50  # day 1 and the last pre-opening day
    later = obs.replace(day=jnp.int32(2), sales_units=jnp.asarray(units))
    blind = act(P.replace(opening_history=jnp.bool_(False)), later, priv, None)
    assert np.asarray(blind.set_price)[managed].all()
    np.testing.assert_array_equal(
        np.asarray(blind.price)[managed], np.asarray(later.sales_price)[W - 1][managed]
    )
    assert W >= 3


@pytest.fixture(scope="module")
def oracle_episodes(env, params):
    # 4 stores x 180 days, 30 per call: the golden test's compiled program (the persistent cache serves it)
    keys = jax.random.split(jax.random.key(11), golden.STORES)
    return rollout(env, oracle, P, params, keys, days=180, records="full", progress=golden.DAYS)


@pytest.mark.slow
def test_oracle_survives_180_days_with_finite_metrics(oracle_episodes):
    rec, final = oracle_episodes
    table = metrics.store_metrics(rec)
    assert (table.survival_days == 180).all()
    assert np.isfinite(table[list(metrics.MAIN_TABLE) + ["acted_per_day", "quality_first"]].to_numpy()).all()
    assert (table.quality_first == 1.0).all() and (table.supplier_quality_score == 1.0).all()
    assert (table.acted_per_day >= 39.0).all() and (table.final_net_worth > 30_000).all()
    assert (table.total_sales > 100_000).all() and (table.return_ratio < 0.05).all()

"""rbjax.runners.metrics and sweep: metrics against hand-computed records, sweep rows against their points."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rbjax
from rbjax.policies import BaseStockParams, base_stock, null_policy
from rbjax.runners import metrics
from rbjax.runners.records import DaySummary


def _records():
    """Two stores x 4 days; store 1 ends after day 2."""
    a = lambda rows, dt=np.int32: jnp.asarray(np.array(rows, dt))
    return DaySummary(
        sold=a([[10, 20, 0, 30], [5, 5, 99, 99]]),
        returned=a([[1, 0, 0, 2], [1, 0, 99, 99]]),
        expired=a([[0, 4, 0, 0], [0, 0, 99, 99]]),
        products_sold=a([[2, 3, 0, 4], [1, 1, 99, 99]]),
        stockouts=a([[0, 2, 0, 1], [1, 0, 99, 99]]),
        acted=a([[5, 1, 0, 2], [3, 3, 99, 99]]),
        revenue=a([[0] * 4] * 2, np.float32),
        refunds=a([[0] * 4] * 2, np.float32),
        order_cost=a([[0] * 4] * 2, np.float32),
        funds=a([[0] * 4] * 2, np.float32),
        net_worth=a([[100, 200, 300, 400], [50, -10, -10, -10]], np.float32),
        order_lines=a([[2, 0, 0, 2], [0, 0, 9, 9]]),
        quality_rank_sum=a([[2, 0, 0, 5], [0, 0, 9, 9]]),
        quality_first=a([[2, 0, 0, 1], [0, 0, 9, 9]]),
        price_first=a([[0, 0, 0, 1], [0, 0, 9, 9]]),
        refused_orders=a([[0, 1, 0, 0], [0, 0, 9, 9]]),
        merged_lots=a([[0] * 4] * 2),
        alive=a([[1, 1, 1, 1], [1, 1, 0, 0]], bool),
    )


def test_metrics_match_hand_computed_values():
    t = metrics.store_metrics(_records())
    s0, s1 = t.iloc[0], t.iloc[1]
    assert s0.survival_days == 4 and s1.survival_days == 2
    assert s0.final_net_worth == 400 and s1.final_net_worth == -10
    assert s0.total_sales == 60 and s1.total_sales == 10  # days after the end are ignored
    assert s0.daily_sold_products == pytest.approx(9 / 4) and s1.daily_sold_products == pytest.approx(1.0)
    assert s0.return_ratio == pytest.approx(3 / 60) and s1.return_ratio == pytest.approx(0.1)
    assert s0.expired_ratio == pytest.approx(4 / 64) and s1.expired_ratio == 0.0
    assert s0.stockout_days == 2 and s1.stockout_days == 1 and s0.stockout_ratio == 0.5
    assert s0.acted_per_day == pytest.approx(2.0) and s1.acted_per_day == pytest.approx(3.0)
    assert s0.supplier_quality_score == pytest.approx((5 - 7 / 4) / 4)
    assert s0.quality_first == pytest.approx(3 / 4) and s0.price_first == pytest.approx(1 / 4)
    assert np.isnan(s1.supplier_quality_score) and np.isnan(s1.quality_first)  # no order line at all
    assert s0.refused_orders == 1


def test_summary_and_compare():
    t = metrics.store_metrics(_records())
    s = metrics.summary(t)
    assert s[("total_sales", "mean")].iloc[0] == 35 and s[("total_sales", "n")].iloc[0] == 2
    assert s[("total_sales", "sd")].iloc[0] == pytest.approx(np.std([60, 10], ddof=1))
    cmp = metrics.compare(t, {"total_sales": 35.0 + np.std([60, 10], ddof=1)})
    assert cmp.loc["total_sales", "gap_sd"] == pytest.approx(-1.0)
    assert "total_sales" in metrics.format_compare(cmp)
    with pytest.raises(ValueError, match="leading axes"):
        metrics.store_metrics(jax.tree.map(lambda x: x[0], _records()))


SWEEP_DAYS = 6


def sweep_base_stock(env, params, points):
    """Both sweep tests sweep the same leaves with the same sizes: one compiled program."""
    return rbjax.sweep(
        env, base_stock, BaseStockParams.default(), params, points, seeds=2, days=SWEEP_DAYS, batch_size=4
    )


def test_sweep_rows_map_to_their_points_and_seeds_are_shared(env, params):
    points = rbjax.grid(rent=[0.0, 250.0, 250.0], initial_funds=[30_000.0, 1_000.0], cover_days=[0.0])
    result = sweep_base_stock(env, params, points)  # 12 stores: 3 chunks of 4
    t = result.table
    assert len(t) == 12 and list(t.point) == [i // 2 for i in range(12)] and list(t.seed) == [0, 1] * 6
    # a cover of 0 days stocks nothing: net worth = funds - days * rent exactly
    np.testing.assert_allclose(t.final_net_worth, t.initial_funds - SWEEP_DAYS * t.rent)
    assert result.summary.shape[0] == 4  # grouped by (rent, initial_funds, cover_days): 250 twice
    with pytest.raises(ValueError, match="not a field"):
        rbjax.sweep(env, null_policy, None, params, [{"nonsense": 1}])
    with pytest.raises(ValueError, match="sweep point 0"):
        rbjax.sweep(env, null_policy, None, params, [{"rent": -5.0}])


def test_sweep_policy_params_and_common_random_numbers(env, params):
    points = [{"rent": 600.0, "initial_funds": 30_000.0, "cover_days": c} for c in (0.0, 8.0, 8.0)]
    t = sweep_base_stock(env, params, points).table
    assert t[t.cover_days == 0].quality_first.isna().all()  # cover 0: never orders
    assert t[t.cover_days == 8].quality_first.notna().all()
    same = t[t.point == 1].drop(columns="point").reset_index(drop=True)
    assert same.equals(t[t.point == 2].drop(columns="point").reset_index(drop=True))  # seed s: same key
    assert not t[t.point == 1].final_net_worth.equals(t[t.point == 0].final_net_worth)


def test_compare_counts_the_stores_without_a_value_and_flags_corrupted_ones():
    import pandas as pd

    table = pd.DataFrame({m: [1.0, 2.0, 3.0] for m in metrics.MAIN_TABLE})
    table.loc[1, "return_ratio"] = np.nan  # no sales: an empty ratio
    table.loc[2, "final_net_worth"] = np.inf  # a corrupted run
    cmp = metrics.compare(table)
    assert cmp.loc["return_ratio", "missing"] == 1 and cmp.loc["return_ratio", "n"] == 2
    assert cmp.loc["final_net_worth", "missing"] == 1 and cmp.loc["final_net_worth", "mean"] == 1.5
    assert "1 stores without a value" in metrics.format_compare(cmp)
    assert metrics.non_finite_stores(table).tolist() == [2]

"""rbjax.results.metrics and sweep: metrics against hand-computed records, sweep rows against their points."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rbjax
from rbjax.policies import OracleParams, null_policy, oracle
from rbjax.results import metrics, paper
from rbjax.results.records import DaySummary


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


@pytest.mark.slow
def test_sweep_rows_map_to_their_points_and_seeds_are_shared(env, params):
    """The oracle sweep of ``rbjax sweep`` and notebooks/oracle_sweep.ipynb (multiplier x shelf capacity, 16
    stores per call, 60 days): the compiled program comes from the cache. 8 points x 4 seeds: 2 chunks."""
    points = rbjax.grid(multiplier=[3.0, 6.0, 6.0, 3.0], shelf_capacity=[0, 40])
    result = rbjax.sweep(env, oracle, OracleParams.default(), params, points, seeds=4, days=60, batch_size=16)
    t = result.table
    assert len(t) == 32 and list(t.point) == [i // 4 for i in range(32)] and list(t.seed) == [0, 1, 2, 3] * 8
    empty, full = t[t.shelf_capacity == 0], t[t.shelf_capacity == 40]
    # no shelf: nothing is ordered or sold; the rent alone makes funds negative from day 51, and the fifth
    # negative evening (day 55) ends the store with net worth = funds - days * rent exactly
    assert (empty.survival_days == 55).all() and (full.survival_days == 60).all()
    np.testing.assert_array_equal(
        empty.final_net_worth, float(params.initial_funds) - 55 * float(params.rent)
    )
    assert empty.quality_first.isna().all() and full.quality_first.notna().all()
    assert result.summary.shape[0] == 4  # grouped by (multiplier, shelf capacity): each pair twice
    # seed s uses the same key at every point: a repeated point repeats its rows (chunk 1 and chunk 2)
    same = lambda i: t[t.point == i].drop(columns="point").reset_index(drop=True)
    assert same(3).equals(same(5)) and same(1).equals(same(7))
    assert not same(1).final_net_worth.equals(same(3).final_net_worth)  # the multiplier does matter
    with pytest.raises(ValueError, match="not a field"):
        rbjax.sweep(env, null_policy, None, params, [{"nonsense": 1}])
    with pytest.raises(ValueError, match="sweep point 0"):
        rbjax.sweep(env, null_policy, None, params, [{"rent": -5.0}])
    with pytest.raises(ValueError, match="opening_history.*0 or 1"):  # a True / False leaf takes no 2
        rbjax.sweep(
            env, oracle, OracleParams.default(), params, [{"opening_history": 0}, {"opening_history": 2}]
        )


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


def _constant_table(**columns):
    """Three stores with every main-table metric 1.0, except ``columns``."""
    import pandas as pd

    return pd.DataFrame({m: [1.0, 1.0, 1.0] for m in metrics.MAIN_TABLE} | columns)


def test_format_compare_names_the_row_warns_off_180_days_explains_the_gap_and_says_na():
    text = metrics.format_compare(metrics.compare(_constant_table(total_sales=[1.0, 2.0, 6.0]), days=30))
    lines = text.splitlines()
    assert lines[0].startswith("paper row: oracle (one run") and "180 days" in lines[0]
    assert "30 days" in lines[1] and "not meaningful" in lines[1]
    assert lines[-1].startswith("gap (sd) = (rbjax mean - paper) / rbjax sd")
    # a spread of 0 (every store the same) leaves the gap undefined: n/a, never "+nan"
    row = next(line for line in lines if line.startswith("final_net_worth"))
    assert row.split()[-1] == "n/a" and "nan" not in text
    assert next(line for line in lines if line.startswith("total_sales")).split()[-1] != "n/a"
    llm = metrics.compare(_constant_table(), paper.LLM_ROWS["GPT-5.5 (ReAct)"], label="GPT-5.5 (ReAct)")
    text = metrics.format_compare(llm.assign(sd=np.nan))
    assert text.startswith("paper row: GPT-5.5 (ReAct)") and "not meaningful" not in text
    assert "± n/a" in text and "nan" not in text


def test_format_compare_keeps_one_format_per_metric_whatever_its_magnitude():
    def row(metric, values):
        text = metrics.format_compare(metrics.compare(_constant_table(**{metric: values}), {}))
        return next(line for line in text.splitlines() if line.startswith(metric)).split()

    # money: whole numbers, small or large; a ratio: 4 decimals, small or large
    assert row("final_net_worth", [1.0, 2.0, 4.0])[1:4] == ["2", "±", "2"]
    assert row("final_net_worth", [100_000.0, 200_000.0, 400_000.0])[1:4] == ["233,333", "±", "152,753"]
    assert row("return_ratio", [0.01, 0.02, 0.04])[1] == "0.0233"
    assert row("return_ratio", [100.0, 200.0, 400.0])[1] == "233.3333"


def test_sweep_result_plot_saves_the_figure_at_path(tmp_path):
    import pandas as pd

    table = pd.DataFrame({"rent": [500, 500, 600, 600], "final_net_worth": [1.0, 2.0, 3.0, 5.0]})
    result = rbjax.SweepResult(table, metrics.summary(table, by=["rent"]), ["rent"], 1.0, 4)
    fig = result.plot("final_net_worth", path=tmp_path / "worth.png")
    assert (tmp_path / "worth.png").stat().st_size > 0 and fig.axes


def test_compare_and_format_compare_give_the_bootstrap_interval_the_min_and_the_stores():
    from rbjax.results import stats

    values = [100_000.0, 200_000.0, 400_000.0]
    table = _constant_table(final_net_worth=values, return_ratio=[0.01, np.nan, 0.03])
    cmp = metrics.compare(table, days=180)
    d = stats.describe(values)
    row = cmp.loc["final_net_worth"]
    assert (row["ci_low"], row["ci_high"], row["min"], row["n"]) == (d["ci_low"], d["ci_high"], 100_000.0, 3)
    assert 100_000 <= row["ci_low"] < row["mean"] < row["ci_high"] <= 400_000
    assert cmp.loc["return_ratio", "min"] == 0.01 and cmp.loc["return_ratio", "n"] == 2
    lines = metrics.format_compare(cmp).splitlines()
    header = lines[1]
    assert "95 % CI of the mean" in header and header.split()[-5:] == ["mean", "min", "paper", "gap", "(sd)"]
    words = next(line for line in lines if line.startswith("final_net_worth")).split()
    ci = [format(v, ",.0f") for v in (d["ci_low"], d["ci_high"])]
    assert words[1:8] == ["233,333", "±", "152,753", ci[0], "–", ci[1], "100,000"]  # one format per metric
    ratio = next(line for line in lines if line.startswith("return_ratio"))
    assert ratio.split()[7] == "0.0100" and ratio.endswith("(1 stores without a value)")
    # every value the same: an interval of width 0; the footer says what it is and over how many stores
    assert next(line for line in lines if line.startswith("total_sales")).split()[4:8] == ["1", "–", "1", "1"]
    assert lines[-2] == (
        "over 3 stores (fewer where a row says so); 95 % CI: percentile bootstrap of the mean, 2,000 resamples"
    )
    assert lines[-1].startswith("gap (sd) = ")
    one = metrics.format_compare(metrics.compare(_constant_table().iloc[:1], {}))  # one store: no interval
    total_sales = next(line for line in one.splitlines() if line.startswith("total_sales"))
    assert total_sales.split()[1:6] == ["1", "±", "n/a", "n/a", "1"]


def test_survival_from_the_table_the_line_and_the_figure(tmp_path):
    from rbjax.results.plots import plot_survival

    records = _records()
    alive = metrics.alive_by_day(metrics.store_metrics(records).survival_days, 4)
    np.testing.assert_array_equal(alive, np.asarray(records.alive))  # store 1 stops after day 2
    assert metrics.format_survival(alive) == "survival: 1/2 stores alive after 4 days (50.0 %)"
    assert metrics.format_survival(np.ones((1000, 180), bool)).endswith(
        "1,000/1,000 stores alive after 180 days (100.0 %)"
    )
    with pytest.raises(ValueError, match="survival_days"):
        metrics.alive_by_day([5, 2], 4)  # more days than the run has
    fig = plot_survival({"oracle": alive, "null": np.array([1.0, 0.5, 0.5, 0.0, 0.0])}, stores={"null": 2})
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["oracle (2 stores)", "null (2 stores)"]
    assert ax.get_ylim() == (0, 1.02) and ax.get_lines()[0].get_ydata().tolist() == [1.0, 1.0, 1.0, 0.5, 0.5]
    fig.savefig(tmp_path / "survival.png")
    assert (tmp_path / "survival.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="at least one"):
        plot_survival({})

"""rbjax.results.stats: the bootstrap interval covers the mean as often as it says and narrows like 1/sqrt(n);
iqm, describe and survival_curve against hand-computed values; bad input is refused."""

import numpy as np
import pytest

from rbjax.results import stats


def test_bootstrap_ci_covers_the_true_mean_about_as_often_as_its_level():
    """400 normal samples of 100 stores (mean 3, sd 2): the 95 % interval holds the true mean in 0.92..0.98 of
    them (the estimate's sd is 0.011; a percentile interval at n = 100 covers about 94 %), the 80 % one in
    0.74..0.86. Deterministic: fixed seeds. An interval of sd instead of sd / sqrt(n) would cover ~100 %."""
    rng = np.random.default_rng(2024)
    samples = rng.normal(3.0, 2.0, size=(400, 100))
    for level, (lo, hi) in ((0.95, (0.92, 0.98)), (0.80, (0.74, 0.86))):
        cis = np.array(
            [stats.bootstrap_ci(x, level=level, resamples=1000, seed=i) for i, x in enumerate(samples)]
        )
        covered = np.mean((cis[:, 0] <= 3.0) & (cis[:, 1] >= 3.0))
        assert lo <= covered <= hi, (level, covered)
        assert (cis[:, 0] < samples.mean(1)).all() and (samples.mean(1) < cis[:, 1]).all()


def test_bootstrap_ci_width_shrinks_like_one_over_sqrt_n():
    """width ~ 2 * 1.96 * sd / sqrt(n): width * sqrt(n) / sd stays within 10 % of 3.92 from 100 to 6,400."""
    rng = np.random.default_rng(7)
    scaled = []
    for n in (100, 400, 1600, 6400):
        x = rng.normal(0.0, 5.0, size=n)
        low, high = stats.bootstrap_ci(x)
        scaled.append((high - low) * np.sqrt(n) / x.std(ddof=1))
    assert np.allclose(scaled, 2 * 1.959964, rtol=0.1), scaled


def test_bootstrap_ci_is_reproducible_ignores_non_finite_values_and_handles_tiny_samples():
    x = np.random.default_rng(1).normal(size=50)
    assert stats.bootstrap_ci(x) == stats.bootstrap_ci(x)  # a fixed seed: the same data, the same interval
    assert stats.bootstrap_ci(x, seed=1) != stats.bootstrap_ci(x)
    assert stats.bootstrap_ci(np.r_[x, np.nan, np.inf, -np.inf]) == stats.bootstrap_ci(x)
    assert stats.bootstrap_ci([4.0, 4.0, 4.0]) == (4.0, 4.0)
    assert np.isnan(stats.bootstrap_ci([1.0, np.nan])).all() and np.isnan(stats.bootstrap_ci([])).all()


def test_iqm_is_the_mean_of_the_middle_half():
    assert stats.iqm(np.arange(1.0, 9.0)) == 4.5  # 8 values: the mean of 3, 4, 5, 6
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 1000]) == 4.5  # an outlier does not move it
    assert stats.iqm([10, 1, 9, 2, 8, 3, 7, 4, 6, 5]) == 5.5  # 10 values, unsorted: the mean of 3..8
    assert stats.iqm([2.0, np.nan, 6.0]) == 4.0  # fewer than 4 values: nothing is cut
    assert np.isnan(stats.iqm([np.nan]))


def test_describe_counts_the_values_it_rests_on():
    d = stats.describe([1.0, np.nan, 3.0, np.inf, 5.0])
    assert (d["n"], d["missing"]) == (3, 2)
    assert (d["mean"], d["sd"], d["median"], d["iqm"], d["min"], d["max"]) == (3.0, 2.0, 3.0, 3.0, 1.0, 5.0)
    assert 1.0 <= d["ci_low"] < 3.0 < d["ci_high"] <= 5.0
    one = stats.describe([7.0, np.nan])
    assert (one["n"], one["missing"], one["mean"], one["min"]) == (1, 1, 7.0, 7.0)
    assert np.isnan(one["sd"]) and np.isnan(one["ci_low"]) and np.isnan(one["ci_high"])
    none = stats.describe([np.nan, np.nan])
    assert (none["n"], none["missing"]) == (0, 2) and all(np.isnan(none[k]) for k in ("mean", "min", "iqm"))


def test_survival_curve_on_a_hand_made_batch():
    alive = np.array(
        [
            [1, 1, 1, 1],  # open every day
            [1, 1, 0, 0],  # stops after day 2
            [1, 0, 0, 0],  # stops after day 1
            [1, 0, 1, 1],  # a stopped store stays stopped: its later days do not count
        ],
        bool,
    )
    np.testing.assert_allclose(stats.survival_curve(alive), [1.0, 1.0, 0.5, 0.25, 0.25])
    np.testing.assert_array_equal(stats.survival_curve(np.ones((3, 2), bool)), [1.0, 1.0, 1.0])
    assert stats.survival_curve(np.ones((2, 0), bool)).tolist() == [1.0]


def test_bad_input_is_refused():
    for level in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="level"):
            stats.bootstrap_ci([1.0, 2.0], level=level)
    with pytest.raises(ValueError, match="resamples"):
        stats.bootstrap_ci([1.0, 2.0], resamples=0)
    for alive in (np.ones(5, bool), np.ones((0, 3), bool), np.ones((2, 3, 4), bool)):
        with pytest.raises(ValueError, match="stores, days"):
            stats.survival_curve(alive)

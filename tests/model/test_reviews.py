"""rbjax.model.reviews: return and rating frequencies against their closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.model import reviews


def test_return_and_rating_frequencies(params):
    n = 20_000
    for q in (1.5, 3.0, 4.8):
        taken = jnp.zeros((n, 2)).at[:, 0].set(40.0)
        quality = jnp.full((n, 2), q)
        ret, nrev, stars = jax.jit(reviews.returns_and_reviews)(
            jax.random.key(int(q * 10)), taken, quality, jnp.float32(0.05)
        )
        ret, nrev, stars = (np.asarray(x, np.float64) for x in (ret, nrev, stars))
        p_ret = float(reviews.return_prob(jnp.float32(q)))
        assert abs(ret.mean() / 40 - p_ret) <= 5 * np.sqrt(p_ret * (1 - p_ret) / (40 * n))
        assert abs(nrev.mean() / 40 - 0.05) <= 5 * np.sqrt(0.05 * 0.95 / (40 * n))
        probs = reviews.tilted_probs_exact(q)
        mean_star = probs @ np.arange(1, 6)
        sd_star = np.sqrt(probs @ np.arange(1, 6) ** 2 - mean_star**2)
        assert abs(mean_star - q) < 1e-6
        assert abs(stars.sum() / nrev.sum() - mean_star) <= 5 * sd_star / np.sqrt(nrev.sum())
    np.testing.assert_allclose(
        np.asarray(reviews.return_prob(jnp.arange(1.0, 6.0))), [0.30, 0.15, 0.10, 0.05, 0.02], atol=1e-6
    )


@pytest.mark.parametrize("quality", [4.5, 4.8, 4.9])
def test_star_sum_moments_match_the_exact_distribution(quality):
    """The sum of n ratings: mean and variance against the n-fold convolution of the rating pmf.

    400,000 product-days per n; the mean per review must lie within 5 standard errors (about 0.0007 stars at
    n = 8, enough to see a 0.002 bias) and the variance within 5 standard errors of the sample variance.
    """
    draws = 400_000
    pmf = np.asarray(reviews.rating_probs(jnp.float32(quality)), np.float64)
    probs = jnp.broadcast_to(reviews.rating_probs(jnp.float32(quality)), (draws, 5))
    sample = jax.jit(reviews.sample_stars)
    for i, n in enumerate((8, 9, 10, 12, 16, 24, 64)):
        total = np.asarray(sample(jax.random.key(i), jnp.full((draws,), float(n)), probs), np.float64)
        exact = np.array([1.0])
        for _ in range(n):
            exact = np.convolve(exact, np.concatenate([[0.0], pmf]))
        support = np.arange(len(exact))
        mean = exact @ support
        var = exact @ (support - mean) ** 2
        m4 = exact @ (support - mean) ** 4
        assert abs(total.mean() - mean) / n <= 5 * np.sqrt(var / draws) / n, (n, total.mean() / n, mean / n)
        assert abs(total.var() - var) <= 5 * np.sqrt((m4 - var**2) / draws), (n, total.var(), var)
        assert total.min() >= n and total.max() <= 5 * n

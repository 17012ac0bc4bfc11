"""rbjax.model.reviews: return and rating frequencies against their closed forms."""

import jax
import jax.numpy as jnp
import numpy as np

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

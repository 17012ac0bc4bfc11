"""rbjax.model.demand: category demand against its closed-form moments."""

import jax
import jax.numpy as jnp
import numpy as np
from helpers import J

from rbjax.model import demand


def test_demand_moments_match_closed_form(env, params):
    """d_j ~ Binomial(N, pi_c * share_j) marginally; 20,000 days, tolerance 5 standard errors."""
    n_days, N = 20_000, 30000.0
    a = jnp.asarray(np.where(np.arange(J) % 3 == 0, 0.0, 0.004 + 0.0002 * np.arange(J)), jnp.float32)
    visible = a > 0
    draw = jax.jit(
        jax.vmap(lambda k: demand.category_demand(k, env.config, params, a, visible, jnp.float32(N))[0])
    )
    d = np.asarray(draw(jax.random.split(jax.random.key(0), n_days)), np.float64)
    cats = np.asarray(env.config.category_of)
    an = np.asarray(a, np.float64)
    power = np.bincount(cats, an**3, 20) ** (1 / 3)
    pi = power / (1 + power)
    share = an / np.maximum(np.bincount(cats, an, 20)[cats], 1e-300)
    p = pi[cats] * share
    mean, var = N * p, N * p * (1 - p)
    assert np.all(np.abs(d.mean(0) - mean) <= 5 * np.sqrt(var / n_days) + 1e-9)
    ok = var > 1
    assert np.all(np.abs(d.var(0)[ok] / var[ok] - 1) <= 5 * np.sqrt(2 / n_days) + 1 / 12 / var[ok])
    assert d[:, ~np.asarray(visible)].sum() == 0

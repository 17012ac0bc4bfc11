"""rbjax.model.future_draws: each redraw follows the law its field was drawn from, and touches nothing else.

Statistical checks over 4,000 redraws of one morning (tolerances are about 4 standard errors)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.model import future_draws, news
from rbjax.model import suppliers as S

DRAWS = 4000


@pytest.fixture(scope="module")
def redrawn(reset, params):
    """(the opening morning, [DRAWS] redraws of it from independent keys)."""
    _, state = reset(jax.random.key(3), params)
    keys = jax.random.split(jax.random.key(0), DRAWS)
    return state, jax.jit(jax.vmap(future_draws.redraw, in_axes=(None, None, 0)))(state, params, keys)


def test_redraw_changes_only_the_future_draws(redrawn):
    state, many = redrawn
    drawn = {tuple(f.split(".")) for f in future_draws.FUTURE_DRAWS}
    for part in state.__dataclass_fields__:
        value = getattr(state, part)
        names = value.__dataclass_fields__ if hasattr(value, "__dataclass_fields__") else [None]
        for name in names:
            before = value if name is None else getattr(value, name)
            after = getattr(many, part) if name is None else getattr(getattr(many, part), name)
            if (part, name) in drawn:
                assert len(np.unique(np.asarray(after).reshape(DRAWS, -1), axis=0)) > 1, (part, name)  # drawn
            else:  # kept: every redraw equals the morning
                for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
                    np.testing.assert_array_equal(np.broadcast_to(a, b.shape), b, err_msg=f"{part}.{name}")


def test_cycles_to_come_follow_the_worlds_laws(redrawn, params):
    _, many = redrawn
    w = many.world
    lo, hi = (int(x) for x in np.asarray(params.cycle_range))
    length = np.asarray(w.cycle_len, np.float64)
    assert length.min() == lo and length.max() == hi
    n = length.size  # UniformInt[lo, hi]: mean (lo + hi) / 2, variance ((hi - lo + 1)^2 - 1) / 12
    sd = np.sqrt(((hi - lo + 1) ** 2 - 1) / 12)
    assert abs(length.mean() - (lo + hi) / 2) < 4 * sd / np.sqrt(n)
    # the tables' first row is today's cycle, for the redrawn lengths
    today = params.open_day + 0
    np.testing.assert_array_equal(
        np.asarray(w.first_cycle),
        np.asarray(jax.vmap(lambda c: S.cycle_index(c, params.cost_series_start, today))(w.cycle_len)),
    )
    # quality tiers uniform over Q1..Q7 (floor(7 u)); the copula ties the price tier to the quality tier
    q = np.asarray(w.cycle_quality).ravel()
    share = np.bincount(q, minlength=7) / q.size
    assert np.abs(share - 1 / 7).max() < 4 * np.sqrt((1 / 7) * (6 / 7) / q.size)
    p = np.asarray(w.cycle_price).ravel()
    assert (
        np.corrcoef(q, p)[0, 1] > 0.15
    )  # worse quality (a higher tier index) comes with a cheaper price tier


def test_news_days_left_follow_the_law_of_an_item_of_unknown_age(redrawn, params, env):
    """``REMAIN_LAW`` against (a) the redraws and (b) the news process itself: the days left of the business
    items alive on a day, over 3,000 simulated days of ``news.advance``."""
    state, many = redrawn
    business = np.asarray(state.news.mode) != news.NEUTRAL
    assert business.any()
    drawn = np.asarray(many.news.remain)[:, business].ravel()
    np.testing.assert_array_equal(np.asarray(many.news.remain)[:, ~business], -1)
    se = np.sqrt(future_draws.REMAIN_LAW * (1 - future_draws.REMAIN_LAW) / drawn.size)
    assert np.all(np.abs(np.bincount(drawn, minlength=6) / drawn.size - future_draws.REMAIN_LAW) < 4 * se)

    J, G = env.config.num_products, env.config.num_categories

    def day(items, k):
        items = news.advance(k, params, items, J, G)
        alive = items.mode != news.NEUTRAL
        return items, jnp.stack([jnp.sum(alive & (items.remain == r)) for r in range(6)])

    _, counts = jax.lax.scan(day, state.news, jax.random.split(jax.random.key(1), 3000))
    seen = np.asarray(counts[100:]).sum(0)  # past the opening list's influence
    se = np.sqrt(future_draws.REMAIN_LAW * (1 - future_draws.REMAIN_LAW) / seen.sum())
    assert np.all(np.abs(seen / seen.sum() - future_draws.REMAIN_LAW) < 4 * se * 3)  # items live ~5 days: x3

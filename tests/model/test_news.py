"""rbjax.model.news: effects within the cap, business items shown 4-6 days."""

import jax
import numpy as np
from helpers import J

from rbjax.model import news


def test_news_effects_within_cap_and_business_duration(env, params):
    def day(items, k):
        items = news.advance(k, params, items, J, 20)
        e_need = news.effect(params, env.config.category_of, items, True)
        e_sup = news.effect(params, params.supply_category, items, False)
        return items, (e_need, e_sup, items.mode, items.remain)

    items = news.sample(jax.random.key(0), params, 20, J, 20)
    _, (need, sup, mode, remain) = jax.lax.scan(day, items, jax.random.split(jax.random.key(1), 2000))
    need, sup, mode = np.asarray(need), np.asarray(sup), np.asarray(mode)
    assert np.abs(need).max() <= 0.5 + 1e-6 and np.abs(sup).max() <= 0.5 + 1e-6 and np.abs(need).max() > 0.1
    business = (mode != 0).sum(1).mean()
    assert 5.0 < business < 8.5  # 20 slots x 0.10 business share x 4-6 days shown / (1 - churn): about 6-7
    assert set(np.unique(np.asarray(remain)[mode != 0])) <= {0, 1, 2, 3, 4, 5}

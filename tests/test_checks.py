"""rbjax.checks: every EnvParams leaf's kind, shape and range, enforced at rollout, reset and the CLI."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rbjax
from rbjax.checks import PARAM_SPEC, check_params, check_policy_params
from rbjax.params import EnvParams
from rbjax.policies import BaseStockParams, OracleParams, RandomParams, SSParams

BAD = [
    ("open_day", lambda p: jnp.int32(1600), "open_day"),
    ("horizon", lambda p: jnp.int32(0), "horizon"),
    ("rent", lambda p: jnp.float32(-600.0), "rent"),
    ("initial_funds", lambda p: jnp.float32(jnp.nan), "initial_funds"),
    ("traffic", lambda p: p.traffic.at[100].set(-5.0), "traffic"),
    ("copula_rho", lambda p: p.copula_rho.at[0, 1].set(1.5), "copula_rho"),
    ("supply_category", lambda p: p.supply_category.at[3].set(20), "supply_category"),
    ("cycle_range", lambda p: jnp.asarray([120, 40000], jnp.int32), "cycle_range"),
    ("price_min", lambda p: p.price_max + 1.0, "price_min"),
    ("capacity", lambda p: jnp.float32(15000.0), "capacity is an integer leaf"),
    ("sigma", lambda p: p.sigma.at[2].set(jnp.inf), "sigma"),
    ("news_ratios", lambda p: jnp.zeros(4, jnp.float32), "news_ratios"),
    ("anchor_rating", lambda p: p.anchor_rating[:50], "anchor_rating must have trailing shape"),
]


@pytest.mark.parametrize("field, change, message", BAD, ids=[b[0] for b in BAD])
def test_invalid_params_are_refused_naming_the_leaf(env, params, field, change, message):
    with pytest.raises(ValueError, match=message):
        check_params(params.replace(**{field: change(params)}), env.config)


def test_every_leaf_has_a_spec(params, env):
    leaves = {f for f in EnvParams.__dataclass_fields__ if f != "world"}
    assert leaves == set(PARAM_SPEC)
    check_params(params, env.config)  # the defaults are valid


def test_rollout_and_eager_reset_validate_params(env, params):
    bad = params.replace(open_day=jnp.int32(1600))
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.raises(ValueError, match="open_day"):
        rbjax.rollout(env, rbjax.policies.null_policy, None, bad, keys, days=2)
    with pytest.raises(ValueError, match="rent"):
        env.reset(jax.random.key(0), params.replace(rent=jnp.float32(-1.0)))


def test_policy_params_are_checked():
    with pytest.raises(ValueError, match="multiplier"):
        check_policy_params(OracleParams.default(multiplier=np.nan))
    with pytest.raises(ValueError, match="OracleParams.news_clip"):
        check_policy_params(OracleParams.default(news_clip=[2.0, 0.5]))
    with pytest.raises(ValueError, match="SSParams.S_days"):
        check_policy_params(SSParams.default().replace(S_days=jnp.float32(1.0)))
    with pytest.raises(ValueError, match="BaseStockParams.supplier"):
        check_policy_params(BaseStockParams.default().replace(supplier=jnp.int32(3)))
    with pytest.raises(ValueError, match="RandomParams.order_prob"):
        check_policy_params(RandomParams.default().replace(order_prob=jnp.float32(1.5)))
    for ok in (
        OracleParams.default(),
        SSParams.default(),
        BaseStockParams.default(),
        RandomParams.default(),
        None,
    ):
        check_policy_params(ok)

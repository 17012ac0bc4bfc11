"""rbjax.env: the environment contract on every engine variant, the episode's end, errors at the boundary."""

import jax
import jax.numpy as jnp
import pytest
from contracts import check_env
from helpers import act, run_script

import rbjax
from rbjax.config import EnvConfig
from rbjax.state import Action


@pytest.mark.slow
def test_termination_after_exactly_five_negative_days(params, reset, step):
    p = params.replace(initial_funds=jnp.float32(700.0))
    obs, s = reset(jax.random.key(4), p)
    flags, alive = [], []
    for d in range(8):
        obs, s, r, term, trunc, info = step(jax.random.key(d), s, act(s), p)
        flags.append(bool(term)), alive.append(bool(info.alive))
    # funds 100 after day 0, negative from day 1: negative days 1..5 -> terminated on day 5
    assert flags == [False] * 5 + [True, False, False]
    assert alive == [True] * 6 + [False, False]


def test_truncated_at_horizon(params, reset, step):
    p = params.replace(horizon=jnp.int32(3))
    obs, s = reset(jax.random.key(5), p)
    truncs = []
    for d in range(4):
        obs, s, r, term, trunc, info = step(jax.random.key(d), s, act(s), p)
        truncs.append(bool(trunc))
    assert truncs == [False, False, True, False]


def test_bad_action_shape_is_a_clear_error(env, params, reset):
    obs, s = reset(jax.random.key(0), params)
    with pytest.raises(ValueError, match=r"Action.order must have shape \(96, 5\)"):
        env.step(
            jax.random.key(0), s, Action(price=s.prices, shelf=s.shelf, order=jnp.zeros((96, 4))), params
        )


def test_bad_params_are_a_clear_error(env, params):
    with pytest.raises(ValueError, match="EnvParams.rent"):
        env.check_params(params.replace(rent=jnp.float32(-1.0)))
    with pytest.raises(ValueError, match="open_day"):
        env.check_params(params.replace(open_day=jnp.int32(1660)))


def test_one_supplier_is_refused():
    with pytest.raises(ValueError, match="num_suppliers"):
        EnvConfig.from_catalog(rbjax.load_catalog(), num_suppliers=1)


def test_non_finite_funds_end_the_episode(params, reset, step):
    obs, s = reset(jax.random.key(4), params)
    s = s.replace(funds=jnp.float32(jnp.nan))
    obs, s, r, term, trunc, info = step(jax.random.key(0), s, act(s), params)
    assert bool(term) and bool(s.done)


# the contracts run last: the single-store step above is then in the persistent compilation cache
def test_contract_20_categories(env, params):
    check_env(env, params)


VARIANT = """
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np, rbjax
from rbjax.config import EnvConfig
from rbjax.state import Action
from contracts import check_env
cat = rbjax.load_catalog()
env = rbjax.Env(EnvConfig.from_catalog(cat, grouping="ref19", num_suppliers=4, float64=True), cat)
assert len(set(env.config.category_of)) == 19  # the reference merges two of the 20 folders
params = env.default_params()
assert params.alpha.dtype == np.float64
# shapes only (no compile of its own): 4 suppliers reach the world, the quotes and the actions
def opened(key):
    obs, state = env.reset(key, params)
    return obs, state, Action.noop(state)
obs, state, noop = jax.eval_shape(opened, jax.random.key(0))
assert state.world.transport_min.shape == (96, 4) and obs.quote_price.shape == (96, 4)
assert state.suppliers.log.shape == (4, 96, 4) and noop.order.shape == (96, 4)
check_env(env, params, days=6, one_by_one=False)
print("variant contract ok")
"""


@pytest.mark.slow
def test_contract_of_a_variant_with_every_static_option_changed():
    """The reference's 19 category labels, 4 suppliers and float64 (with x64 on, as the bench's drift run uses
    it), all in one engine: each option is a static change of shapes or dtypes, independent of the others, so
    one variant (one compile) covers the three."""
    import os

    run_script(
        f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})\n" + VARIANT, "variant contract ok"
    )


CLOSURE = """
import subprocess, sys
script = '''
import jax, rbjax
env = rbjax.Env(); params = env.default_params()
def run(key):  # params closed over: compile-time constants
    obs, state = env.reset(key, params)
    return env.step(key, state, rbjax.Action.noop(state), params)[2]
print(float(jax.jit(run)(jax.random.key(0))))
'''
out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
assert out.returncode == 0, out.stderr[-2000:]
assert "Constant folding" not in out.stderr, out.stderr[-2000:]
print("no alarms")
"""


@pytest.mark.slow
def test_closing_over_params_raises_no_constant_folding_alarms():
    run_script(CLOSURE, "no alarms")

"""Bad input at the engine and agent-tool boundary: a clear error naming the field, or masked and counted,
never a corrupted store."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from agent_store import make_store
from helpers import J, act, order_lines

from rbjax.model import orders
from rbjax.state import Action, OrderLines


@pytest.mark.parametrize("price", [float("inf"), float("nan"), 1e308, 3.5e38, 1e-50, -1.0, 0.0])
def test_modify_sku_price_refuses_a_price_float32_cannot_hold(env, price):
    store = make_store(env)
    before = store.draft.prices.copy()
    res = store.call("modify_sku_price", {"sku_id": store.names.skus[0], "new_price": price})
    assert not res.ok and "new_price must" in res.text
    assert np.array_equal(store.draft.prices, before) and not store.draft.set_price.any()


def test_inputs_are_not_echoed_whole_and_ranges_and_notes_are_bounded(env):
    store = make_store(env)
    huge = "x" * 1_000_000
    for name, args in (
        ("view_sku_prices", {"sku_ids": [huge]}),
        ("add_note", {"content": huge}),
        ("view_sales_profit_history", {"sku_ids": [store.names.skus[0]], "start_date": "0001-01-01",
                                       "end_date": "1991-09-06"}),
    ):  # fmt: skip
        res = store.call(name, args)
        assert not res.ok and len(res.text) < 2_000, (name, len(res.text))
    assert "may span at most" in res.text and not store.ledger.notes


def test_a_tool_answer_is_cut_for_the_model(env, monkeypatch):
    from rbjax.agents.tools import store as tools

    monkeypatch.setattr(tools, "MAX_TOOL_TEXT", 300)
    res = make_store(env).call("view_sku_prices", {"sku_ids": list(make_store(env).names.skus)})
    assert res.ok and len(res.text) < 400 and "ask for fewer SKUs" in res.text


def test_a_huge_argument_is_kept_out_of_the_trace(tmp_path):
    from rbjax.agents.tools.trace import TraceWriter, read

    trace = TraceWriter(str(tmp_path / "t.jsonl"))
    trace.write(
        {"tool": "add_note", "args": {"content": "x" * 3_000_000}, "result": {"result": {}, "formatted": "e"}}
    )
    trace.flush()
    (rec,) = read(trace.path)
    assert "rb_cut" in rec["args"] and (tmp_path / "t.jsonl").stat().st_size < 10_000


def test_line_units_cannot_wrap_past_the_order_cap():
    price = jnp.ones((4, 2), jnp.float32)
    big = 2**31 - 1
    wrap = order_lines([(0, 0, big, 3, 0), (1, 0, big, 3, 0), (2, 0, 2, 3, 0)])  # an int32 sum would be 0
    accepted, spent, invalid, _ = orders.check_lines(wrap, price, jnp.float32(1e12), jnp.int32(15_000), 8)
    assert not bool(accepted.any()) and int(invalid) == 3 and float(spent) == 0.0
    pair = order_lines([(0, 0, 10_000, 3, 0), (1, 0, 5_000, 3, 0)])  # exactly the cap: paid
    accepted, *_ = orders.check_lines(pair, price, jnp.float32(1e12), jnp.int32(15_000), 8)
    assert accepted.tolist()[:2] == [True, True]


def test_step_refuses_float_lines_complex_prices_and_bad_params(env, params, reset):
    _, state = reset(jax.random.key(0), params)
    lines = order_lines([(0, 0, 5, 3, 0)])
    floats = OrderLines(**{**vars(lines), "units": lines.units.astype(jnp.float32)})
    with pytest.raises(ValueError, match=r"Action.lines.units must be int32"):
        env.step(jax.random.key(1), state, act(state).replace(lines=floats), params)
    complex_price = act(state, price=state.prices.astype(jnp.complex64))
    with pytest.raises(ValueError, match=r"Action.price must be real"):
        env.step(jax.random.key(1), state, complex_price, params)
    with pytest.raises(ValueError, match=r"EnvParams.rent must be in \[0, 1e\+09\]"):
        env.step(jax.random.key(1), state, act(state), params.replace(rent=jnp.float32(-600.0)))


def test_extreme_demand_params_keep_the_state_finite(env, params, reset, step):
    wild = params.replace(
        alpha=jnp.full(J, 80.0, jnp.float32),
        beta=jnp.full(J, 50.0, jnp.float32),
        sigma=jnp.full(J, 1e30, jnp.float32),
    )
    _, state = reset(jax.random.key(0), wild)
    action = act(state, shelf=range(J), price=jnp.full(J, 1e6, jnp.float32))
    for day in range(3):
        _, state, reward, *_ = step(jax.random.key(day), state, action, wild)
    for leaf in jax.tree.leaves(state):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert bool(jnp.isfinite(leaf).all())
    assert bool(jnp.isfinite(reward))


def test_float_order_lines_are_refused_by_the_dtype_check_alone(env):
    bad = Action(
        price=jnp.ones(J),
        shelf=jnp.zeros(J, bool),
        order=jnp.zeros((J, 5)),
        lines=OrderLines(*(jnp.zeros(4, jnp.int32),) * 4, order=jnp.zeros(4), live=jnp.zeros(4, bool)),
    )
    with pytest.raises(ValueError, match=r"Action.lines.order must be int32"):
        env.check_action(bad)

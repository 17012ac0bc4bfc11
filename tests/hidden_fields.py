"""What the leak tests of the agent-legal policies share: a store's morning with lots in it and orders on their way,
and the same morning with one hidden field (``rbjax.policies.belief_state.HIDDEN``) changed."""

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.policies import OracleParams, oracle


def oracle_morning(env, params, days: int):
    """(obs, state) of one oracle store (key 3) on its day ``days``: lots in the store, orders on their way."""
    obs, state = jax.jit(env.reset)(jax.random.key(3), params)
    step = jax.jit(env.step)
    for d in range(days):
        action = oracle(OracleParams.default(), obs, env.privileged(state, params))
        obs, state, *_ = step(jax.random.key(100 + d), state, action, params)
    assert int(np.asarray(state.pending.qty).sum()) > 0 and int(np.asarray(state.lots.store).sum()) > 0
    return obs, state


def changed(state, field: str):
    """``state`` with another value of hidden ``field``, one the store could hold: the same morning to an agent."""
    s, lots, pend, n, w = state.suppliers, state.lots, state.pending, state.news, state.world
    business = np.asarray(n.mode) != 0
    new = {
        "suppliers.quality_tier": lambda: s.replace(quality_tier=(6 - s.quality_tier).astype(np.int8)),
        "suppliers.quote_quality": lambda: s.replace(quote_quality=jnp.clip(6.0 - s.quote_quality, 1.0, 5.0)),
        "suppliers.price_tier": lambda: s.replace(price_tier=(4 - s.price_tier).astype(np.int8)),
        "lots.quality": lambda: lots.replace(quality=jnp.clip(6.0 - lots.quality, 1.0, 5.0)),
        "pending.quality": lambda: pend.replace(quality=pend.quality * 0.4),
        "news.signed": lambda: n.replace(signed=jnp.sign(n.signed) * (1.0 - jnp.abs(n.signed) * 0.9)),
        "news.remain": lambda: n.replace(remain=jnp.where(business, (n.remain + 3) % 6, n.remain)),
        "world.key": lambda: w.replace(key=w.key ^ np.uint32(0x5A5A5A5A)),
        "world.cycle_len": lambda: w.replace(cycle_len=(300 - w.cycle_len).astype(w.cycle_len.dtype)),
        "world.first_cycle": lambda: w.replace(first_cycle=(w.first_cycle - 1).astype(w.first_cycle.dtype)),
        "world.cycle_quality": lambda: w.replace(cycle_quality=(6 - w.cycle_quality).astype(np.int8)),
        "world.cycle_price": lambda: w.replace(cycle_price=(4 - w.cycle_price).astype(np.int8)),
    }[field]()
    return state.replace(**{field.split(".")[0]: new})

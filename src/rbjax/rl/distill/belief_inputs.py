"""What the belief student reads of a morning: the belief, the honest oracle's action on it, the two supplier
moves, and what the belief says of the suppliers they name.

Everything is computed from the visible state (``rbjax.policies.belief_state.belief_of`` masks every hidden
field), so the student is agent-legal as the observation-only planner (``plan_obs``), its teacher, is. One
belief a morning serves the anchor, the moves and the features.

The supplier moves are deterministic (a student is a function of its morning): the cheapest quote among the
suppliers the belief holds good (Q1-Q3) with probability ``OPTIMISTIC`` or more, which buys evidence of a cheap
supplier where the belief is unsure, and the supplier most likely good (ties to the cheaper quote), which
leaves a supplier the anchor holds good only just. Where either is the anchor's own supplier its candidate
repeats the anchor's action, and the network reads that in its features.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rbjax.policies import belief_state
from rbjax.policies.belief import Belief
from rbjax.policies.oracle import OracleParams, best_supplier, oracle
from rbjax.state import Action, Observation, Privileged

SUPPLIER_MOVES = 2  # the cheapest likely good at OPTIMISTIC, the likeliest good
OPTIMISTIC = 0.5
BELIEF_P = 9  # features a product: of the anchor's supplier 5, of each move's 2


def supplier_moves(belief: Belief, obs: Observation) -> jax.Array:
    """[SUPPLIER_MOVES, J] int32: the cheapest supplier held good with probability ``OPTIMISTIC`` or more (the
    likeliest good where none is), and the likeliest good (ties to the cheaper quote)."""
    good = belief.tier[..., : belief_state.GOOD].sum(-1)  # [J, K]
    likeliest = jnp.argmin(jnp.where(good == good.max(-1, keepdims=True), obs.quote_price, jnp.inf), -1)
    hopeful = good >= OPTIMISTIC
    cheapest = jnp.argmin(jnp.where(hopeful, obs.quote_price, jnp.inf), -1)
    optimistic = jnp.where(hopeful.any(-1), cheapest, likeliest)
    return jnp.stack([optimistic, likeliest]).astype(jnp.int32)


def read(
    params: OracleParams, obs: Observation, privileged: Privileged
) -> tuple[Action, jax.Array, jax.Array]:
    """(the honest oracle's action, the supplier moves [SUPPLIER_MOVES, J], features [J, BELIEF_P]).

    privileged: ``Env.privileged(state, params)``; its state and params are read only through ``belief_of``.
    Features: of the supplier the anchor orders from, the belief's probability it is good, its mean quality / 5,
    its quote against the day's dearest, and today's news effects at their mean strength; of each move's
    supplier, the probability it is good and the log of its quote over the anchor's supplier's."""
    _, public, belief, view = belief_state.honest_of(privileged, obs.category, "the belief student")
    anchor = oracle(params, obs, view)  # the honest oracle, on this one belief
    moves = supplier_moves(belief, obs)
    f = obs.prices.dtype
    of = lambda x, k: jnp.take_along_axis(x, k[:, None], -1)[:, 0]  # noqa: E731
    good = belief.tier[..., : belief_state.GOOD].sum(-1)
    k0, price0 = best_supplier(view.quote_quality, obs.quote_price)  # the oracle's own pick on the view
    cols = [
        of(good, k0),
        of(belief.mean_quality(public), k0) / 5.0,
        price0 / obs.quote_price.max(-1),
        view.news_need,
        view.news_supply,
    ]
    for k in moves:
        cols += [of(good, k), jnp.log(of(obs.quote_price, k) / price0)]
    return anchor, moves, jnp.stack([c.astype(f) for c in cols], -1)

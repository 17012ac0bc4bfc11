"""What an agent cannot see of a store, masked, and a whole hidden state drawn from the belief.

``visible(state)`` keeps what the tools show and sets every field of ``HIDDEN`` to a constant, so that nothing
computed from it can depend on them; ``sample(state, params, belief, key)`` fills them with one draw from the
belief (``rbjax.policies.belief``) and the public laws, the observation and today's visible state exactly as
they are. The observation-only planner (``rbjax.policies.planner``, ``PlanSettings(view="agent")``) plays its
futures from such draws; ``tests/policies/test_plan_obs.py`` changes each hidden field alone and finds its values
unmoved.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rbjax.kernels import rng
from rbjax.model import news as N
from rbjax.params import EnvParams
from rbjax.policies.belief import Belief, posterior, sample_tiers
from rbjax.state import EnvState, Privileged

GOOD, SURE = 3, 0.8  # the good tiers (Q1-Q3), and the belief the honest view takes a supplier as good at

# each hidden field, and how ``sample`` fills it (the world's tables, key and cycle lengths and the news items'
# days left are redrawn by every future as for the privileged planner: ``rbjax.model.future_draws``)
HIDDEN = {
    "suppliers.quality_tier": "a draw of the belief's roles and tiers (``belief.sample_tiers``)",
    "suppliers.quote_quality": "uniform inside the drawn tier's band, as the day's quote draws it",
    "suppliers.price_tier": "the tiers the quotes show (``belief.price_tiers``)",
    "lots.quality": "each lot's supplier's drawn tier, its quality uniform inside the band",
    "pending.quality": "the units on their way x their supplier's drawn quality",
    "news.signed": "the direction the headline tells x a strength U(0, 1), the news law",
    "news.remain": "redrawn by the future (``future_draws``)",
    "world.key": "redrawn by the future",
    "world.cycle_len": "redrawn by the future",
    "world.first_cycle": "redrawn by the future",
    "world.cycle_quality": "redrawn by the future",
    "world.cycle_price": "redrawn by the future",
}


def visible(state: EnvState) -> EnvState:
    """``state`` with every ``HIDDEN`` field set to a constant (the news items' directions kept: the headline
    tells them). One store or a batch."""
    s, w, n = state.suppliers, state.world, state.news
    zero = jnp.zeros_like
    return state.replace(
        suppliers=s.replace(
            quality_tier=zero(s.quality_tier),
            quote_quality=zero(s.quote_quality),
            price_tier=zero(s.price_tier),
        ),
        lots=state.lots.replace(quality=zero(state.lots.quality)),
        pending=state.pending.replace(quality=zero(state.pending.quality)),
        news=n.replace(signed=jnp.sign(n.signed), remain=jnp.where(n.mode == N.NEUTRAL, n.remain, 0)),
        world=w.replace(
            key=zero(w.key),
            cycle_len=jnp.full_like(w.cycle_len, 150),
            first_cycle=zero(w.first_cycle),
            cycle_quality=zero(w.cycle_quality),
            cycle_price=zero(w.cycle_price),
        ),
    )


def public_params(params: EnvParams) -> EnvParams:
    """The params without a fixed supplier world (which would hold the tier tables): the rest is public."""
    return params.replace(world=None)


def _quality(params: EnvParams, tier: jax.Array, u: jax.Array) -> jax.Array:
    """Quality scores of ``tier`` [J, ...] at uniforms ``u`` inside its band (clipped to 1..5, 4 decimals)."""
    band = params.quality_bands[tier]
    anchor = params.anchor_rating.reshape((-1,) + (1,) * (tier.ndim - 1))
    q = anchor + band[..., 0] + (band[..., 1] - band[..., 0]) * u
    return jnp.round(jnp.clip(q, 1.0, 5.0) * 1e4) / 1e4


def sample(state: EnvState, params: EnvParams, belief: Belief, key: jax.Array) -> EnvState:
    """One full store drawn from ``belief``: ``state`` (one store's morning, ``visible`` or not: every
    ``HIDDEN`` field it holds is replaced) with today's tiers, quote qualities, lots' and pending quality and
    the news strengths drawn. The world's draws for later days are left to the future (``future_draws``)."""
    k_tier, k_quote, k_lot, k_news = jax.random.split(key, 4)
    f = state.suppliers.quote_quality.dtype
    tier = sample_tiers(belief, k_tier)  # [J, K]
    quote_quality = _quality(params, tier, rng.uniform(k_quote, tier.shape, f))
    lot_supplier = state.lots.supplier.astype(jnp.int32)  # [J, C]
    lot_tier = jnp.take_along_axis(tier, lot_supplier, -1)
    lot_quality = _quality(params, lot_tier, rng.uniform(k_lot, lot_tier.shape, f))
    pend_supplier = state.pending.supplier.astype(jnp.int32).T  # [J, D]
    pend_quality = jnp.take_along_axis(quote_quality, pend_supplier, -1).T  # [D, J]
    n = state.news
    strength = rng.uniform(k_news, n.signed.shape, n.signed.dtype)
    s = state.suppliers
    return state.replace(
        suppliers=s.replace(
            quality_tier=tier.astype(s.quality_tier.dtype),
            quote_quality=quote_quality.astype(f),
            price_tier=belief.price_tier.astype(s.price_tier.dtype),
        ),
        lots=state.lots.replace(quality=lot_quality.astype(state.lots.quality.dtype)),
        pending=state.pending.replace(
            quality=(state.pending.qty * pend_quality).astype(state.pending.quality.dtype)
        ),
        news=n.replace(signed=jnp.sign(n.signed) * strength),
    )


def honest_view(state: EnvState, params: EnvParams, belief: Belief, category) -> Privileged:
    """What the oracle reads, estimated from the visible state: for the hidden quality, 1 for every supplier the
    belief holds good (Q1-Q3) with probability ``SURE`` or more, so that the oracle's rule (the best quality,
    ties to the cheaper quote) takes the cheapest of them, else half that probability (the likeliest good one
    where none is sure); for the news effects, every item's strength at its mean (1/2). No true state or params
    are carried. category: [J] the demand grouping (``Observation.category``).

    Why the cheapest likely-good supplier and not the best mean quality: above a quality of about 4 returns stay
    under 5 % and the ratings high, so a cheaper quote is margin (``docs/results.md``, "Where the oracle's lead
    comes from"); measured on 32 stores x 180 days, 74 % of the oracle against 72 % for the mean."""
    n = state.news
    expected = n.replace(signed=jnp.sign(n.signed) * 0.5)
    good = belief.tier[..., :GOOD].sum(-1)
    return Privileged(
        quote_quality=jnp.where(good >= SURE, 1.0, 0.5 * good).astype(state.suppliers.quote_quality.dtype),
        news_need=N.effect(params, category, expected, True),
        news_supply=N.effect(params, params.supply_category, expected, False),
    )


def belief_of(state: EnvState, params: EnvParams) -> tuple[EnvState, EnvParams, Belief]:
    """(the visible state, the public params, the belief): what the observation-only policies start from."""
    seen, public = visible(state), public_params(params)
    return seen, public, posterior(seen, public)


def honest_of(
    privileged: Privileged, category, reader: str
) -> tuple[EnvState, EnvParams, Belief, Privileged]:
    """(the visible state, the public params, the belief, ``honest_view``) of ``privileged`` (``Env.privileged``:
    its state and params are read only through ``belief_of``); ValueError naming ``reader`` where they are
    missing. category: [J] (``Observation.category``)."""
    if privileged.state is None or privileged.params is None:
        raise ValueError(f"{reader} reads the visible state: call it with env.privileged(state, params)")
    seen, public, belief = belief_of(privileged.state, privileged.params)
    return seen, public, belief, honest_view(seen, public, belief, category)

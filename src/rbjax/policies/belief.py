"""A belief over a store's hidden supplier quality, computed from what the agent tools show.

The model is public (the params are the same for every store), the state is not: an agent that knows the rules
can compute a posterior over what it cannot see. Per product j and supplier k, ``posterior`` gives the
probability of each quality tier Q1..Q7 of today's quote from three public things:

- the price tier the quotes show (``price_tiers``: each quote over the day's base cost, less the supply news'
  common factor, which the five quotes of a product and the news headlines bound);
- the Gaussian copula that pairs each supplier's price and quality tiers (``copula_prior``: worse quality tends
  to come with a cheaper tier), and the diversity rule, which keeps a Q1 supplier and a (Q7, P5) one for every
  product every day: the posterior is exact over the joint roles (Q1, (Q7, P5), other) of a product's K
  suppliers (``role_marginals``, by inclusion-exclusion), so that a lone P5 supplier is the bad one and someone
  must be Q1;
- the evidence of the supplier's units the tools show: its returns and ratings over about the last 30 days
  (``Suppliers.log``, ``rbjax.model.supplier_log``), through the laws of returns and ratings given quality
  (``rbjax.model.reviews``), each tier's quality integrated over its band;
- the pre-opening history's suppliers (``Suppliers.opening_share``, ``opening_evidence``): each history day's
  units came from the best-quality supplier of the day or the second best, and the tools show which.

Memory, and what it costs: the belief reads only today's view (the 30-day supplier records the tools show), not
a filter carried across days. Evidence older than the records' time constant is forgotten, and evidence from
units bought before a supplier's last tier change is read as if about today's tier (``STALE`` mixes the copula
prior back in for that). A policy that uses it needs no recurrent state, so it runs wherever a policy runs.
Measured (``docs/results.md``, "The agent's ceiling"): records that start afresh where a supplier's quotes
change price tier moved the honest oracle by under one point, so the memory is not what holds it back.
Calibration on simulated stores: ``tests/policies/test_belief.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax.scipy.special import ndtr, ndtri

from rbjax.model import news as N
from rbjax.model import reviews
from rbjax.params import EnvParams
from rbjax.state import EnvState

TIERS, PRICE_TIERS = 7, 5
BEST, WORST, CHEAPEST = 0, 6, 4  # Q1, Q7, P5
STALE = 0.05  # the posterior's share of the copula prior: evidence may be of the tier before a change
QUALITY_NODES = 4  # points a tier's quality band is integrated over (midpoints)
_COPULA_NODES, _RHO_NODES = 16, 4  # quadrature of the copula's rectangle probabilities


@struct.dataclass
class Belief:
    """One store's belief about today's hidden supplier quality.

    tier: [J, K, 7] probability of each quality tier Q1..Q7 (sums to 1 over the last axis).
    price_tier: [J, K] int32 the price tier P1..P5 (0..4) the quotes show (``price_tiers``).
    role_w: [J, K, 3] each supplier's own probability of the roles Q1, (Q7, P5), other, before the diversity
        rule joins them; needs_bad: [J] bool whether the rule also needs a (Q7, P5) supplier (a P5 quote shows).
        The sampler draws the roles jointly from them (``sample_roles``), so every draw keeps the rule.
    other: [J, K, 7] each supplier's tier law given it is neither Q1 nor (Q7, P5).
    """

    tier: jax.Array
    price_tier: jax.Array
    role_w: jax.Array
    needs_bad: jax.Array
    other: jax.Array

    def mean_quality(self, params: EnvParams) -> jax.Array:
        """[J, K] the posterior mean of today's quality score (each tier's band mean, clipped to 1..5 stars)."""
        return jnp.sum(self.tier * tier_quality(params).mean(-1)[:, None, :], -1)


def tier_quality(params: EnvParams) -> jax.Array:
    """[J, 7, QUALITY_NODES] quality scores at the midpoints of each tier's band around the anchor rating."""
    f = params.quality_bands.dtype
    frac = (jnp.arange(QUALITY_NODES, dtype=f) + 0.5) / QUALITY_NODES
    band = params.quality_bands  # [7, 2]
    offset = band[:, :1] + (band[:, 1:] - band[:, :1]) * frac  # [7, nodes]
    return jnp.clip(params.anchor_rating[:, None, None] + offset, 1.0, 5.0)


def copula_prior(params: EnvParams) -> jax.Array:
    """[J, 7, 5] P(quality tier, price tier) of one natural draw: quality = floor(7 u), price = floor(5 Phi(z2))
    with corr(Phi^-1(u), z2) = rho ~ U(copula_rho[j]); rectangle probabilities by midpoint quadrature over u
    and rho (error under 1e-3 per cell, ``tests/policies/test_belief.py``)."""
    f = params.quality_bands.dtype
    u = (jnp.arange(TIERS * _COPULA_NODES, dtype=f) + 0.5) / (TIERS * _COPULA_NODES)  # [7 * n]
    z1 = ndtri(u)
    frac = (jnp.arange(_RHO_NODES, dtype=f) + 0.5) / _RHO_NODES
    lo, hi = params.copula_rho[:, :1], params.copula_rho[:, 1:]
    rho = lo + (hi - lo) * frac  # [J, R]
    edges = ndtri(jnp.clip(jnp.arange(PRICE_TIERS + 1, dtype=f) / PRICE_TIERS, 1e-7, 1 - 1e-7))  # [6]
    s = jnp.sqrt(1.0 - rho**2)[..., None, None]
    cdf = ndtr((edges - rho[..., None, None] * z1[:, None]) / s)  # [J, R, 7n, 6]
    cells = (cdf[..., 1:] - cdf[..., :-1]).mean(1)  # [J, 7n, 5]
    return cells.reshape(-1, TIERS, _COPULA_NODES, PRICE_TIERS).mean(2) / TIERS


def price_tiers(state: EnvState, params: EnvParams) -> jax.Array:
    """[J, K] int32 the price tiers (0 = P1 .. 4 = P5) today's quotes show.

    Each quote is base cost x a multiplier uniform inside its tier's band x (1 - s), s the product's supply news
    effect, common to its K quotes. Without a supply headline on the product s = 0 and the tiers are exact.
    With one, the factor m = 1 - s is taken where the quotes are most likely (each multiplier's density is one
    over its band's width; m on a grid of ``_FACTOR_GRID`` points in the range the headlines' directions allow),
    the likelihood pooled over the products the same headlines name (they share m whenever no cap binds). Reads
    the quotes, the base cost (public) and the headlines only.
    """
    cal = params.open_day + state.day
    ratio = state.suppliers.quote_price / params.base_cost[cal][:, None]  # [J, K] multiplier x m
    up, down, match = _supply_news_bounds(state.news, params)  # s in [-down, up] as the headlines allow
    f = ratio.dtype
    grid = 1.0 - up[:, None] + (up + down)[:, None] * jnp.linspace(0.0, 1.0, _FACTOR_GRID, dtype=f)  # [J, G]
    x = ratio[:, :, None] / grid[:, None, :]  # [J, K, G] multipliers if m were the grid's
    lows, highs = params.price_bands[:, 0], params.price_bands[:, 1]
    inside = (x[..., None] >= lows) & (x[..., None] <= highs)  # [J, K, G, 5]
    density = jnp.sum(jnp.where(inside, 1.0 / (highs - lows), 0.0), -1) / grid[:, None, :]
    ll = jnp.sum(jnp.log(jnp.maximum(density, 1e-6)), 1)  # [J, G]; off every band: a heavy penalty
    named = match.astype(f)  # [J, N]
    both, count = named @ named.T, named.sum(-1)  # items naming both (exact: small whole numbers)
    same = (both == count[:, None]) & (both == count[None, :])  # [J, J] named by the same supply headlines
    pooled = same.astype(f) @ ll  # (a [J, J, N] comparison here cost 4 times the whole belief's rest)
    factor = jnp.take_along_axis(grid, jnp.argmax(pooled, -1)[:, None], -1)[:, 0]
    factor = jnp.where((up == 0) & (down == 0), 1.0, factor)
    x = ratio / factor[:, None]
    return jnp.clip(jnp.sum(x[..., None] < lows, -1), 0, PRICE_TIERS - 1).astype(jnp.int32)


_FACTOR_GRID = 101


def _supply_news_bounds(news, params: EnvParams):
    """([J] the largest supply effect s the headlines allow upwards, [J] downwards, [J, N] which business
    supply items name each product): an item's text tells its target and its direction, not its strength
    (at most 1)."""
    J = params.supply_category.shape[0]
    t = news.target.astype(jnp.int32)[:, None]
    m = news.mode[:, None]
    names = (
        (m == N.MACRO_ALL)
        | ((m == N.SKU_LEVEL) & (t == jnp.arange(J)))
        | ((m == N.SINGLE_CATEGORY) & (t == params.supply_category))
    )  # [N, J]
    sign = jnp.sign(news.signed)
    supply = (~news.need) & (sign != 0)
    weight = params.news_weights[news.mode.astype(jnp.int32)] * supply * params.news_scale
    up = jnp.minimum((weight * (sign > 0)) @ names.astype(weight.dtype), params.news_cap)
    down = jnp.minimum((weight * (sign < 0)) @ names.astype(weight.dtype), params.news_cap)
    return up, down, (names & supply[:, None]).T


def evidence(log: jax.Array, params: EnvParams) -> jax.Array:
    """[J, K, 7] log-likelihood of each supplier's records (``Suppliers.log`` [4, J, K]: sold, returned,
    reviews, stars over about 30 days) under each quality tier, the quality integrated over the tier's band.

    Returns: returned ~ Binomial(sold, ret(q)); ratings: their sum ~ Normal(n mu(q), n var(q)) with mu, var the
    tilted rating law's (``reviews.rating_probs``). Records without sales or reviews add nothing.
    """
    sold, returned, n_rev, stars = (log[i][..., None, None] for i in range(4))  # [J, K, 1, 1]
    q = tier_quality(params)[:, None]  # [J, 1, 7, n]
    ret = reviews.return_prob(q)
    probs = reviews.rating_probs(q)  # [J, 1, 7, n, 5]
    star = jnp.arange(1, 6, dtype=q.dtype)
    mu = probs @ star
    var = jnp.maximum(probs @ star**2 - mu**2, 1e-3)
    # the laws' tables, made once: else XLA:CPU computes them again in every store's and supplier's element
    laws = jax.lax.optimization_barrier((jnp.log(ret), jnp.log1p(-ret), mu, var, jnp.log(var)))
    log_ret, log_kept, mu, var, log_var = laws
    ll = returned * log_ret + jnp.maximum(sold - returned, 0.0) * log_kept
    n = jnp.maximum(n_rev, 1e-3)
    rating = -0.5 * (stars - n * mu) ** 2 / (n * var) - 0.5 * log_var
    ll = ll + jnp.where(n_rev > 1e-3, rating, 0.0)
    return jax.nn.logsumexp(ll, -1) - jnp.log(float(QUALITY_NODES))  # [J, K, 7]


# How the pre-opening history's suppliers bear on a tier: each history day's units came from the best-quality
# supplier of the day (0.6) or the second best (0.4). A supplier used on 45 % or more of the last 30 days was the
# best (Q1: a unique Q1 is used on about 60 %, one of two on about 50 %); one used on some days was the second
# best (most likely Q1-Q3); one never used was neither (a Q1 only where three or more were). Per tier Q1..Q7:
OPENING_LIKELIHOOD = np.array(
    [
        [1.0, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02],  # used on >= 45 % of the days
        [0.5, 1.0, 1.0, 0.4, 0.2, 0.1, 0.05],  # used on some days
        [0.05, 0.6, 0.6, 1.0, 1.0, 1.0, 1.0],  # never used
    ]
)
OPENING_DAYS = 150.0  # the history's word fades over the tier cycles: weight max(0, 1 - day / OPENING_DAYS)


def opening_evidence(state: EnvState) -> jax.Array:
    """[J, K, 7] log-likelihood of each tier given the pre-opening history's suppliers (``OPENING_LIKELIHOOD``,
    ``Suppliers.opening_share``), faded with the days since the opening (tiers change at the start of each
    supplier's 120-180-day cycle)."""
    share = state.suppliers.opening_share
    bucket = jnp.where(share >= 0.45, 0, jnp.where(share > 0.0, 1, 2))
    table = jnp.asarray(OPENING_LIKELIHOOD, share.dtype)[bucket]  # [J, K, 7]
    weight = jnp.clip(1.0 - state.day.astype(share.dtype) / OPENING_DAYS, 0.0, 1.0)
    return jnp.log(weight * table + (1.0 - weight))


def posterior(state: EnvState, params: EnvParams) -> Belief:
    """The belief about today's quality tiers from the quotes, the copula, the diversity rule, the supplier
    records and the pre-opening history's suppliers (module docstring). state: one store's morning (only what
    the tools show is read); [J, K] leaves.

    Per supplier, the copula prior given its price tier times its records' likelihood, with ``STALE`` of the
    prior mixed back in; then, per product, the suppliers' roles (Q1, (Q7, P5), other) jointly, every role
    assignment without a Q1 supplier (or without a (Q7, P5) one where the quotes show a P5 tier) ruled out.

    Cost: about 0.25 ms a store on a 2-core CPU under ``vmap`` (64 stores); 3.2 ms with gathers in place of
    ``select`` and the headlines' products compared element by element.
    """
    p_tier = price_tiers(state, params)
    joint = copula_prior(params)  # [J, 7, 5]
    prior = select(joint[:, None], p_tier[:, :, None])  # [J, K, 7]
    prior = prior / prior.sum(-1, keepdims=True)
    records = evidence(state.suppliers.log, params) + opening_evidence(state)
    alone = jax.nn.softmax(jnp.log(jnp.maximum(prior, 1e-30)) + records, -1)
    log_w = jnp.log(jnp.maximum((1.0 - STALE) * alone + STALE * prior, 1e-30))
    tiers = jnp.arange(TIERS)
    bad = (tiers == WORST) & (p_tier[..., None] == CHEAPEST)  # [J, K, 7] (Q7, P5)
    role = jnp.where(tiers == BEST, 0, jnp.where(bad, 1, 2))  # each tier's role
    role_w = jnp.stack([jax.nn.logsumexp(jnp.where(role == r, log_w, -jnp.inf), -1) for r in range(3)], -1)
    other = jax.nn.softmax(jnp.where(role == 2, log_w, -jnp.inf), -1)  # [J, K, 7]
    w = jax.nn.softmax(role_w, -1)  # [J, K, 3]: the joint is their product, then the rule
    needs_bad = (p_tier == CHEAPEST).any(-1)  # [J]
    marg = role_marginals(w, needs_bad)
    tier = marg[..., 0:1] * (tiers == BEST) + marg[..., 1:2] * bad + marg[..., 2:3] * other
    return Belief(tier=tier, price_tier=p_tier, role_w=w, needs_bad=needs_bad, other=other)


def _rest(w: jax.Array, needs_bad: jax.Array) -> tuple:
    """Per supplier k, over the suppliers after k ([J, K] each): P(none of them is Q1), P(none is (Q7, P5)),
    P(neither), their roles drawn independently from ``w``; and ``needs_bad`` as a float [J, 1]."""
    after = lambda x: jnp.flip(jnp.cumprod(jnp.flip(x, -1), -1), -1)[..., 1:]  # noqa: E731
    pad = lambda x: jnp.concatenate([after(x), jnp.ones_like(x[..., :1])], -1)  # noqa: E731
    return _absent(w, pad) + (needs_bad[..., None].astype(w.dtype),)


def _absent(w: jax.Array, over) -> tuple:
    """(P(no Q1), P(no (Q7, P5)), P(neither)) over a set of suppliers: ``over`` takes [J, K] per-supplier
    probabilities to their products over the set. Written as 1 - w, each from the last, so that a role no
    supplier can take (weight 0) gives products exactly equal and the rule's inclusion-exclusion exactly 0."""
    not_q1 = 1.0 - w[..., 0]
    return over(not_q1), over(1.0 - w[..., 1]), over(jnp.maximum(not_q1 - w[..., 1], 0.0))


def _rule_met(no_q1, no_bad, neither, has_q1, has_bad):
    """P(the suppliers counted in ``no_q1``, ``no_bad``, ``neither`` complete the rule), given whether a Q1 and a
    needed (Q7, P5) supplier are there already (float 0/1, or 1 for a (Q7, P5) supplier not needed):
    inclusion-exclusion over the rule's two "at least one"."""
    return 1.0 - (1 - has_q1) * no_q1 - (1 - has_bad) * no_bad + (1 - has_q1) * (1 - has_bad) * neither


def role_marginals(w: jax.Array, needs_bad: jax.Array) -> jax.Array:
    """[J, K, 3] P(supplier k has role r | the diversity rule), the suppliers' roles independent by ``w``
    [J, K, 3] before the rule (Q1, (Q7, P5), other) and the rule: at least one Q1, and at least one (Q7, P5)
    where ``needs_bad`` [J]. Exact, by inclusion-exclusion in O(K) (the 3^K assignments enumerated give the
    same, ``tests/policies/test_belief.py``; they cost a store-day about 0.15 ms more on a 2-core CPU)."""
    K = w.shape[-2]
    others = lambda x: jnp.stack(  # noqa: E731  products over the suppliers other than k
        [jnp.prod(jnp.delete(x, k, -1), -1) for k in range(K)], -1
    )
    no_q1, no_bad, neither = _absent(w, others)
    done = 1.0 - needs_bad[..., None].astype(w.dtype)  # 1 where no (Q7, P5) supplier is needed
    met = jnp.stack(
        [
            _rule_met(no_q1, no_bad, neither, 1.0, done),  # k is Q1
            _rule_met(no_q1, no_bad, neither, 0.0, 1.0),  # k is (Q7, P5)
            _rule_met(no_q1, no_bad, neither, 0.0, done),  # k is other
        ],
        -1,
    )
    joint = w * jnp.maximum(met, 0.0)
    return joint / jnp.maximum(joint.sum(-1, keepdims=True), 1e-30)


def select(x: jax.Array, index: jax.Array) -> jax.Array:
    """x [..., n] at ``index`` (int) along its last axis, ``index`` broadcast against ``x[..., 0]``: a one-hot
    select, exact. Why not ``take_along_axis``: under ``vmap`` XLA:CPU computes a gather's operand again for the
    elements it gathers; the posterior's two gathers cost about 30 times these selects (the copula's cells by
    price tier, the roles' weights; measured in the note of ``posterior``)."""
    hot = index[..., None] == jnp.arange(x.shape[-1], dtype=index.dtype)
    return jnp.sum(jnp.where(hot, x, 0.0), -1)


def sample_roles(belief: Belief, key: jax.Array) -> jax.Array:
    """[J, K] int32 roles (0 Q1, 1 (Q7, P5), 2 other) drawn jointly under the diversity rule: supplier by
    supplier, each from its own weights times the chance the suppliers after it can still complete the rule
    (``_rule_met``), so that every draw has a Q1 supplier, and a (Q7, P5) one where the quotes show a P5 tier."""
    w = belief.role_w
    no_q1, no_bad, neither, needs = _rest(w, belief.needs_bad)
    has_q1 = jnp.zeros(w.shape[:-2], w.dtype)
    has_bad = 1.0 - needs[..., 0]
    roles = []
    for k, k_key in enumerate(jax.random.split(key, w.shape[-2])):
        rest = no_q1[..., k], no_bad[..., k], neither[..., k]
        met = jnp.stack(
            [
                _rule_met(*rest, 1.0, has_bad),
                _rule_met(*rest, has_q1, 1.0),
                _rule_met(*rest, has_q1, has_bad),
            ],
            -1,
        )
        p = w[..., k, :] * jnp.maximum(met, 0.0)
        role = jax.random.categorical(k_key, jnp.log(jnp.maximum(p, 1e-30)), -1)
        has_q1 = jnp.maximum(has_q1, (role == 0).astype(w.dtype))
        has_bad = jnp.maximum(has_bad, (role == 1).astype(w.dtype))
        roles.append(role)
    return jnp.stack(roles, -1).astype(jnp.int32)


def sample_tiers(belief: Belief, key: jax.Array) -> jax.Array:
    """[J, K] int32 quality tiers drawn from the belief: the suppliers' roles jointly (``sample_roles``: every
    draw has a Q1 supplier, and a (Q7, P5) one where the quotes show a P5 tier), then each other supplier's
    tier."""
    k_role, k_tier = jax.random.split(key)
    role = sample_roles(belief, k_role)
    other = jax.random.categorical(k_tier, jnp.log(jnp.maximum(belief.other, 1e-30)), -1)
    return jnp.where(role == 0, BEST, jnp.where(role == 1, WORST, other)).astype(jnp.int32)

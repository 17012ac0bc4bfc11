"""A student of the planner: one network call picks among the planner's candidates for today.

The lookahead planner (``rbjax.policies.planner``) builds C candidate actions around an anchor policy's action
(prices times m, orders times o) and plays the one whose simulated futures end best. A student makes the same
choice from what it may read, in one forward pass: its anchor's action, the candidates built from it
(``candidate_actions``), then the candidate its network scores highest. No simulation at decision time.

Three students, by what they read (``StudentConfig.kind``):
  - **privileged**: the anchor is the paper's oracle, and the network also reads the oracle's hidden fields
    (the quality of the supplier it orders from, today's news effects): compared with the oracle like for like;
  - **observed**: reads only the ``Observation`` (as PPO and an LLM agent do); its anchor is the oracle's rule
    with the supplier chosen by the observable evidence of quality (``rbjax.rl.actions.supplier_score``) and no
    news effect (``observed_anchor``). ``tests/rl/test_distill.py`` checks that no hidden field reaches it;
  - **belief**: reads what the tools show, through the belief (``rbjax.rl.distill.belief_inputs``): its anchor
    is the honest oracle, two more candidates move the orders to another supplier, and its teacher is the
    observation-only planner (``plan_obs``), which sees what it sees. ``tests/rl/test_belief_student.py``
    changes each hidden field alone and finds its choice unmoved.

The network is a deep set over products (``StudentNet``): a per-product MLP, pooled (mean and max) over the
products the anchor shelves, with the store's own features, to C scores. Shapes: J products, K suppliers,
P per-product features, G store features, C candidates.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rbjax.config import EPISODE_DAYS
from rbjax.policies.estimates import daily_demand, stock_position
from rbjax.policies.honest_oracle import honest_oracle
from rbjax.policies.oracle import OracleParams, best_supplier, oracle
from rbjax.policies.planner import PlannerParams, candidate_actions
from rbjax.policies.planner import default_params as default_moves
from rbjax.rl.actions import supplier_score
from rbjax.rl.distill import belief_inputs
from rbjax.state import Action, Observation, Privileged

SHARED_P, SUPPLIER_P, STORE_G = 12, 3, 5  # per-product features (every student, of the supplier), store
KINDS = ("privileged", "observed", "belief")  # what a student reads (``StudentConfig.kind``)


def observed_anchor(
    params: OracleParams, obs: Observation, privileged: Privileged = None, key=None
) -> Action:
    """The oracle's rule on the agent's view: the supplier by ``supplier_score`` (ratings, return rates, the
    quote's price), no news effect. Reads ``obs`` only (``privileged`` is ignored)."""
    zero = jnp.zeros_like(obs.prices)
    view = Privileged(quote_quality=supplier_score(obs), news_need=zero, news_supply=zero)
    return oracle(params, obs, view, key)


def product_features(obs: Observation, anchor: Action, privileged: Privileged | None) -> jax.Array:
    """[J, P] what the network reads of each product (P = 15): ``shared_features``, then what the student knows
    of the supplier its anchor picks: with ``privileged``, that supplier's true quality and today's news
    effects; without, the evidence the tools show of it (its units' mean rating, 0 before any review, their
    return rate, its quote against the day's dearest), the inputs of ``supplier_score``, which picked it."""
    f = obs.prices.dtype
    cols = list(shared_features(obs, anchor).T)
    if privileged is not None:
        k = jnp.argmax(anchor.order, -1)
        quality = jnp.take_along_axis(privileged.quote_quality, k[:, None], -1)[:, 0]
        cols += [quality / 5.0, privileged.news_need, privileged.news_supply]
    else:
        k, price = best_supplier(supplier_score(obs), obs.quote_price)  # observed_anchor's own pick
        of_k = lambda x: jnp.take_along_axis(x, k[:, None], -1)[:, 0]  # noqa: E731
        cols += [
            of_k(obs.supplier_rating) / 5.0,
            of_k(obs.supplier_return_rate),
            price / obs.quote_price.max(-1),
        ]
    return jnp.stack([c.astype(f) for c in cols], -1)


def shared_features(obs: Observation, anchor: Action) -> jax.Array:
    """[J, SHARED_P] what every student reads of each product: prices against cost and the anchor's price,
    demand and stock cover, reviews, returns, news mentions, the anchor's orders, price calls, the shelf."""
    f = obs.prices.dtype
    cost = jnp.min(obs.quote_price, -1)
    demand = jnp.maximum(daily_demand(obs, 0.0), 0.5)
    safe_log = lambda x: jnp.log(jnp.clip(x, 1e-3, 1e3))  # noqa: E731
    ordered = anchor.order.sum(-1)
    cols = [
        safe_log(obs.prices / cost),
        safe_log(anchor.price / obs.prices),
        jnp.log1p(demand),
        jnp.log1p(stock_position(obs, pipeline=False) / demand) / 3.0,
        jnp.log1p(obs.incoming.astype(f) / demand) / 3.0,
        obs.rating_mean / 5.0,
        jnp.log1p(obs.rating_count.astype(f)) / 5.0,
        obs.return_rate,
        obs.news_mentions.astype(f),
        jnp.log1p(ordered) / 5.0,
        (anchor.set_price if anchor.set_price is not None else anchor.price != obs.prices).astype(f),
        obs.shelf.astype(f),
    ]
    return jnp.stack([c.astype(f) for c in cols], -1)


def store_features(obs: Observation, horizon: float = float(EPISODE_DAYS)) -> jax.Array:
    """[G] the store's day, funds, net worth and capacity in use (G = 5)."""
    f = obs.prices.dtype
    signed_log = lambda x: jnp.sign(x) * jnp.log1p(jnp.abs(x)) / 12.0  # noqa: E731
    return jnp.stack(
        [
            obs.day.astype(f) / horizon,
            signed_log(obs.funds),
            signed_log(obs.net_worth),
            obs.capacity_used,
            (obs.funds < 0).astype(f),
        ]
    ).astype(f)


class StudentNet(nn.Module):
    """Deep set over products: per-product MLP, mean and max over the anchor's shelf, store features, C scores."""

    candidates: int
    hidden: int = 64

    @nn.compact
    def __call__(self, products: jax.Array, store: jax.Array, mask: jax.Array) -> jax.Array:
        """products [..., J, P], store [..., G], mask [..., J] bool -> scores [..., C]."""
        h = nn.relu(nn.Dense(self.hidden)(products))
        h = nn.relu(nn.Dense(self.hidden)(h))
        m = mask[..., None].astype(h.dtype)
        count = jnp.maximum(m.sum(-2), 1.0)
        mean = (h * m).sum(-2) / count
        top = jnp.max(jnp.where(m > 0, h, -1e9), -2) * (count > 0)
        x = jnp.concatenate([mean, top, store], -1)
        x = nn.relu(nn.Dense(self.hidden)(x))
        return nn.Dense(self.candidates)(x)


@dataclasses.dataclass(frozen=True)
class StudentConfig:
    """What changes a student's program: what it reads (``privileged``: the oracle's hidden fields; else the
    observation, and with ``belief`` the belief computed from what the tools show), ``hidden`` (network width).
    """

    privileged: bool = True
    hidden: int = 64
    belief: bool = False

    def __post_init__(self):
        if not isinstance(self.belief, bool) or not isinstance(self.privileged, bool):
            raise ValueError("StudentConfig.privileged and .belief must be True or False")
        if self.privileged and self.belief:
            raise ValueError("StudentConfig: a belief student reads what the tools show: privileged=False")

    @property
    def kind(self) -> str:
        """One of ``KINDS``."""
        return "privileged" if self.privileged else "belief" if self.belief else "observed"

    @classmethod
    def of_kind(cls, kind: str, **fields) -> StudentConfig:
        if kind not in KINDS:
            raise ValueError(f"a student's kind is one of {', '.join(KINDS)}, got {kind!r}")
        return cls(privileged=kind == "privileged", belief=kind == "belief", **fields)


@struct.dataclass
class StudentParams:
    """net: the network's weights; planner: the planner's params whose candidates it chooses among
    (``PlannerParams``: the moves, its base the anchor's ``OracleParams``; a checkpoint from before the name
    calls it ``moves``, ``recipe.load``)."""

    net: Any
    planner: PlannerParams


@dataclasses.dataclass(frozen=True)
class Student:
    """The student as a policy: ``student(params, obs, privileged, key) -> Action`` (``StudentParams``).

    Equal configs give equal students (a value, not an identity), so their compiled programs are shared."""

    config: StudentConfig = StudentConfig()

    @property
    def anchor(self):
        """The policy whose action the candidates vary: the oracle (privileged), ``observed_anchor`` or the
        honest oracle (belief)."""
        return {"privileged": oracle, "observed": observed_anchor, "belief": honest_oracle}[self.config.kind]

    @property
    def features(self) -> int:
        """P, the features the network reads of a product."""
        return SHARED_P + (belief_inputs.BELIEF_P if self.config.belief else SUPPLIER_P)

    def candidate_count(self, planner: PlannerParams) -> int:
        """C, the candidates it chooses among: the planner's, and the belief's supplier moves."""
        return planner.candidate_count(suppliers=belief_inputs.SUPPLIER_MOVES * self.config.belief)

    def net(self, candidates: int) -> StudentNet:
        return StudentNet(candidates=candidates, hidden=self.config.hidden)

    def inputs(self, planner: PlannerParams, obs: Observation, privileged: Privileged):
        """(anchor action, candidates [C, ...], (products [J, P], store [G], mask [J])): what one morning gives
        the network, and what it chooses among (``planner``: the candidates' moves, its base the anchor's
        params)."""
        if self.config.belief:
            anchor, suppliers, tail = belief_inputs.read(planner.base, obs, privileged)
            feats = jnp.concatenate([shared_features(obs, anchor), tail], -1)
            candidates = candidate_actions(planner, anchor, obs, suppliers=suppliers)
            return anchor, candidates, (feats, store_features(obs), anchor.shelf)
        anchor = self.anchor(planner.base, obs, privileged)
        view = privileged if self.config.privileged else None
        feats = (product_features(obs, anchor, view), store_features(obs), anchor.shelf)
        return anchor, candidate_actions(planner, anchor, obs), feats

    def choose(self, params: StudentParams, candidates: Action, feats) -> Action:
        scores = self.net(self.candidate_count(params.planner)).apply(params.net, *feats)
        best = jnp.argmax(scores)  # ties to the lowest index: the anchor's own action
        return jax.tree.map(lambda x: x[best], candidates)

    def __call__(self, params: StudentParams, obs: Observation, privileged: Privileged, key=None) -> Action:
        _, candidates, feats = self.inputs(params.planner, obs, privileged)
        return self.choose(params, candidates, feats)

    def init(
        self, key: jax.Array, planner: PlannerParams | None = None, num_products: int = 96
    ) -> StudentParams:
        """Fresh weights for the default moves (``policies.planner.default_params``) or ``planner``'s."""
        planner = default_moves(OracleParams.default()) if planner is None else planner
        P, J = self.features, num_products
        net = self.net(self.candidate_count(planner)).init(
            key, jnp.zeros((J, P)), jnp.zeros(STORE_G), jnp.ones(J, bool)
        )
        return StudentParams(net=net, planner=planner)

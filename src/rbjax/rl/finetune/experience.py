"""What a fine-tune learns from: B stores' whole episodes played by the student sampling its own choice.

The student scores its C candidates (``rbjax.rl.distill.student``); played greedily it is the shipped policy,
sampled (softmax of the scores over ``temperature``) it is the behaviour policy PPO improves. Each morning keeps
what the update needs: the actor's inputs, the choice and its log-probability under the behaviour policy and under
the start (for the KL term), and the critic's inputs, which add the hidden fields (``critic_inputs``): the critic
never acts, so it may read them (an asymmetric critic); the acting network reads only what its kind reads.

Shapes: T days, B stores, J products, P the actor's features a product, P + 3 the critic's, G store features,
C candidates.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from rbjax.day_loop import scan_days
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.rl.distill.student import Student, StudentParams
from rbjax.state import Action, Observation, Privileged

HIDDEN_P = (
    3  # what the critic reads beyond the actor, a product: the quality of the anchor's supplier, news x 2
)


@struct.dataclass
class Morning:
    """One store's morning as the update reads it (``collect`` stacks them: [T, B, ...])."""

    products: jax.Array  # [J, P] the actor's per-product features
    store: jax.Array  # [G]
    mask: jax.Array  # [J] bool the anchor's shelf
    hidden: jax.Array  # [J, HIDDEN_P] the critic's extra features (hidden fields)
    choice: jax.Array  # [] int32 the candidate played
    logp: jax.Array  # [] its log-probability under the behaviour policy
    start_logp: jax.Array  # [C] the start's log-probabilities (the KL term's reference)


@struct.dataclass
class Episodes:
    """B stores' T days: ``mornings`` [T, B], ``reward`` [T, B] (the day's change in net worth), ``alive`` [T, B]
    (the day was played: False after a store went bankrupt), ``final`` [B] the final net worth."""

    mornings: Morning
    reward: jax.Array
    alive: jax.Array
    final: jax.Array


def hidden_features(anchor: Action, privileged: Privileged) -> jax.Array:
    """[J, HIDDEN_P]: the true quality / 5 of the supplier the anchor orders from, today's news effects."""
    k = jnp.argmax(anchor.order, -1)
    quality = jnp.take_along_axis(privileged.quote_quality, k[:, None], -1)[:, 0]
    cols = (quality / 5.0, privileged.news_need, privileged.news_supply)
    return jnp.stack([c.astype(anchor.price.dtype) for c in cols], -1)


def log_policy(student: Student, net_params, planner, feats, temperature: float) -> jax.Array:
    """[C] log-probabilities of the candidates: the softmax of the student's scores over ``temperature``."""
    scores = student.net(student.candidate_count(planner)).apply(net_params, *feats)
    return jax.nn.log_softmax(scores / temperature)


def morning(
    student: Student,
    params: StudentParams,
    start: StudentParams,
    temperature: float,
    obs: Observation,
    privileged: Privileged,
    key: jax.Array,
) -> tuple[Morning, Action]:
    """One store's morning: the inputs, a sampled choice, and the action it plays."""
    anchor, candidates, feats = student.inputs(params.planner, obs, privileged)
    logp = log_policy(student, params.net, params.planner, feats, temperature)
    choice = jax.random.categorical(key, logp).astype(jnp.int32)
    start_logp = log_policy(student, start.net, params.planner, feats, temperature)
    seen = Morning(*feats, hidden_features(anchor, privileged), choice, logp[choice], start_logp)
    return seen, jax.tree.map(lambda x: x[choice], candidates)


def collect(
    env: Env,
    student: Student,
    params: StudentParams,
    start: StudentParams,
    temperature: float,
    env_params: EnvParams,
    pool,
    keys: jax.Array,
    days: int,
    copies: int = 1,
) -> Episodes:
    """B stores' episodes, ``copies`` of each, from the ``pool`` of opening (Observation, EnvState) [B] with run
    keys [B], on the one day loop (``scan_days``): the policy samples, the loop's ``watch`` keeps the morning (the
    two compute the same inputs from the same arguments; XLA's common-subexpression pass may merge them). The
    copies of a store share its run key, so the market draws the same numbers for each (common random numbers),
    and sample their choices with keys of their own: they differ by their choices alone. Episodes come
    store-major: [T, B x copies]."""

    def one(obs, state, key, copy):
        def sampled(p, obs, privileged, k):
            return morning(student, p, start, temperature, obs, privileged, jax.random.fold_in(k, copy))[1]

        def watch(day, obs, privileged, state, action, k):
            return morning(student, params, start, temperature, obs, privileged, jax.random.fold_in(k, copy))[
                0
            ]

        _, (worth, seen) = scan_days(
            env, sampled, params, env_params, obs, state, key, jnp.int32(0), days,
            record=lambda info: (info.net_worth, info.alive), watch=watch,
        )  # fmt: skip
        return seen, worth, state.net_worth

    B = keys.shape[0]
    each = lambda x: jnp.repeat(x, copies, axis=0)  # noqa: E731
    copy = jnp.tile(jnp.arange(copies, dtype=jnp.int32), B)
    seen, (worth, alive), opening = jax.vmap(one)(
        *jax.tree.map(each, pool), each(keys), copy
    )  # [B x G, T, ...]
    before = jnp.concatenate([opening[:, None], worth[:, :-1]], 1)
    reward = jnp.where(alive, worth - before, 0.0)
    t_first = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    return Episodes(jax.tree.map(t_first, seen), t_first(reward), t_first(alive), worth[:, -1])

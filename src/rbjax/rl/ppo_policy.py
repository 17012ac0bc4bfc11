"""A trained PPO network as a policy: its params (``PPOPolicyParams``), its heads on one store's observation, and
``make_policy``, the rollout policy ``policy(PPOPolicyParams, obs, privileged, key) -> Action`` that the registry,
the rollouts and the checkpoints play (``rbjax.rl.ppo`` trains it).

Shapes: J products, K suppliers, F/G feature sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from rbjax import programs
from rbjax.rl import actions as A
from rbjax.rl.features import encode
from rbjax.rl.network import ActorCritic
from rbjax.rl.normalize import RunningStats

__all__ = ["PPOPolicyParams", "forward", "make_policy", "network", "policy_heads"]


@struct.dataclass
class PPOPolicyParams:
    """Everything a trained policy needs to act: network weights and the observation statistics."""

    net: Any
    products: RunningStats  # [F]
    globals_: RunningStats  # [G]
    greedy: jax.Array  # [] bool: the most likely choice instead of a sample


def network(num_suppliers: int, hidden: int) -> ActorCritic:
    """The policy's ``ActorCritic``: (products [J, F], glob [G]) -> (Heads, values [J])."""
    return ActorCritic(num_suppliers=num_suppliers, hidden=hidden)


def forward(net: ActorCritic, params, products, glob, prior) -> tuple[A.Heads, jax.Array]:
    """One store's (Heads, values [J]) from its normalised rows (products [J, F], glob [G]) and its supplier
    prior [J, K]: what PPO plays, scores in its loss and ships as a policy."""
    heads, value = net.apply(params, products, glob)
    return A.with_supplier_prior(heads, prior), value


def policy_heads(net: ActorCritic, params: PPOPolicyParams, obs, supplier_prior: float) -> A.Heads:
    """One store's ``Heads`` ([J, ...] logits) as a trained policy acts on ``obs`` (one store's
    ``Observation``; its observation statistics, its prior)."""
    products, glob = encode(obs)
    prior = supplier_prior * A.supplier_score(obs)
    return forward(
        net, params.net, params.products.normalize(products), params.globals_.normalize(glob), prior
    )[0]


def make_policy(num_suppliers: int, hidden: int, supplier_prior: float) -> Callable:
    """A rollout policy ``policy(PPOPolicyParams, obs, privileged, key) -> Action`` (one per shape, kept by
    ``rbjax.programs``, so rollouts with it compile once). ``supplier_prior``: the ``PPOConfig`` value the network
    was trained with."""
    build = lambda: _build_policy(num_suppliers, hidden, supplier_prior)  # noqa: E731
    return programs.cached("ppo.policy", build, None, (num_suppliers, hidden, supplier_prior))


def _build_policy(num_suppliers: int, hidden: int, supplier_prior: float) -> Callable:
    net = network(num_suppliers, hidden)

    def ppo_policy(params: PPOPolicyParams, obs, privileged, key):
        """One store's ``Action`` (price, shelf [J], order [J, K]): a sample, or the mode when
        ``params.greedy``; ``privileged`` is not read."""
        heads = policy_heads(net, params, obs, supplier_prior)
        sampled, best = A.sample(key, heads), A.mode(heads)
        choice = jax.tree.map(lambda s, b: jnp.where(params.greedy, b, s), sampled, best)
        return A.decode(choice, obs)

    return ppo_policy

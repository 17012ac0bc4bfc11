"""One registry of the shipped policies, used by the CLI, the profiler, the benchmarks and the tests.

A policy is a pure ``policy(policy_params, obs, privileged, key) -> Action``; ``make(name)`` returns it
with its default params. ``ppo`` is the learned baseline: its params come from a checkpoint folder, read by
the loader ``rbjax.rl`` provides (``register_learned``: the RL layer sits above this one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from rbjax.policies.baselines import (
    BaseStockParams,
    RandomParams,
    SSParams,
    base_stock,
    null_policy,
    random_policy,
    s_S,
)
from rbjax.policies.oracle import OracleParams, oracle


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    fn: Callable
    default_params: Callable[[], Any]  # a factory of the default params
    summary: str
    privileged: bool = False  # reads hidden state through ``Env.privileged``


POLICIES: dict[str, PolicySpec] = {
    "oracle": PolicySpec(
        oracle, OracleParams.default, "the paper's quality-based heuristic", privileged=True
    ),
    "base_stock": PolicySpec(
        base_stock, BaseStockParams.default, "order up to a few days of demand, fixed prices"
    ),
    "s_S": PolicySpec(s_S, SSParams.default, "(s, S) reorder point and order-up-to level, fixed prices"),
    "random": PolicySpec(random_policy, RandomParams.default, "random orders and small price moves"),
    "null": PolicySpec(null_policy, lambda: None, "does nothing"),
}
LEARNED = ("ppo",)  # policies whose params come from a checkpoint folder, loaded by a layer above this one
NAMES = tuple(POLICIES) + LEARNED

# name -> loader(env, checkpoint, greedy) -> (policy function, its params): filled from above (the package's root
# registers ``rbjax.rl``'s ppo loader), so this layer never imports the layers that depend on it
_LOADERS: dict[str, Callable[..., tuple[Callable, Any]]] = {}


def register_learned(name: str, loader: Callable[..., tuple[Callable, Any]]) -> None:
    """Load the learned policy ``name`` (one of ``LEARNED``) with ``loader(env, checkpoint, greedy)`` ->
    (policy function, its params); ``make`` checks the checkpoint and env are given and calls it."""
    if name not in LEARNED:
        raise ValueError(f"register_learned: {name!r} is not a learned policy name ({', '.join(LEARNED)})")
    _LOADERS[name] = loader


def make(name: str, env=None, checkpoint: str | None = None, greedy: bool = False) -> tuple[Callable, Any]:
    """(policy function, its params) for a registered ``name``.

    ``ppo`` needs ``env`` and a ``checkpoint`` folder (written by ``rbjax train ppo``); ``greedy`` takes
    its most likely action instead of a sample. Raises ValueError naming what is missing or wrong.
    """
    if name in POLICIES:
        return POLICIES[name].fn, POLICIES[name].default_params()
    if name not in LEARNED:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(NAMES)}")
    if not checkpoint:
        raise ValueError(f"policy {name!r} needs a checkpoint folder (written by `rbjax train {name}`)")
    if env is None:
        raise ValueError(f"policy {name!r} needs the env it acts in")
    if name not in _LOADERS:
        raise ValueError(f"policy {name!r}: no loader registered (import rbjax)")
    return _LOADERS[name](env, checkpoint, greedy)

"""One registry of the shipped policies, used by the CLI, the profiler, the benchmarks and the tests.

A policy is a pure ``policy(policy_params, obs, privileged, key) -> Action``; ``make(name)`` returns it
with its default params. ``ppo`` is the learned baseline: its params come from a checkpoint folder.
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
LEARNED = ("ppo",)
NAMES = tuple(POLICIES) + LEARNED


def make(name: str, env=None, checkpoint: str | None = None, greedy: bool = False) -> tuple[Callable, Any]:
    """(policy function, its params) for a registered ``name``.

    ``ppo`` needs ``env`` and a ``checkpoint`` folder (written by ``rbjax train ppo``); ``greedy`` takes
    its most likely action instead of a sample. Raises ValueError naming what is missing or wrong.
    """
    if name in POLICIES:
        return POLICIES[name].fn, POLICIES[name].default_params()
    if name != "ppo":
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(NAMES)}")
    if not checkpoint:
        raise ValueError("policy 'ppo' needs a checkpoint folder (written by `rbjax train ppo`)")
    if env is None:
        raise ValueError("policy 'ppo' needs the env it acts in")
    import numpy as np

    from rbjax.rl import ppo
    from rbjax.rl.train import load

    try:
        params, config = load(checkpoint, env)
    except FileNotFoundError as e:
        raise ValueError(str(e)) from None
    return ppo.make_policy(env.config.num_suppliers, config.hidden, config.supplier_prior), params.replace(
        greedy=np.bool_(greedy)
    )

"""The policies that act on one morning alone (no simulated future, no checkpoint), by name.

Each is a pure ``policy(policy_params, obs, privileged, key) -> Action`` with a factory of its default params.
The planner (``rbjax.policies.planner``) plays one of them after today in every future it simulates, named
here; the registry (``rbjax.policies.registry``) adds the planner and the learned policies around them.
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
from rbjax.policies.honest_oracle import honest_oracle
from rbjax.policies.oracle import OracleParams, oracle


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    """A policy by name: ``fn`` the policy, ``default_params`` a factory of its default params, ``summary`` a
    line for listings, ``privileged`` whether it reads hidden state through ``Env.privileged``."""

    fn: Callable
    default_params: Callable[[], Any]
    summary: str
    privileged: bool = False


POLICIES: dict[str, PolicySpec] = {
    "oracle": PolicySpec(
        oracle, OracleParams.default, "the paper's quality-based heuristic", privileged=True
    ),
    "honest_oracle": PolicySpec(
        honest_oracle,
        OracleParams.default,
        "the oracle's rules on the belief, not the hidden truth (agent-legal)",
    ),
    "base_stock": PolicySpec(
        base_stock, BaseStockParams.default, "order up to a few days of demand, fixed prices"
    ),
    "s_S": PolicySpec(s_S, SSParams.default, "(s, S) reorder point and order-up-to level, fixed prices"),
    "random": PolicySpec(random_policy, RandomParams.default, "random orders and small price moves"),
    "null": PolicySpec(null_policy, lambda: None, "does nothing"),
}

"""Policies: pure functions ``policy(policy_params, obs, privileged, key) -> Action``, and their registry."""

from rbjax.policies.baselines import (
    BEST_RATED,
    CHEAPEST,
    BaseStockParams,
    RandomParams,
    SSParams,
    base_stock,
    null_policy,
    random_policy,
    s_S,
)
from rbjax.policies.oracle import OracleParams, oracle
from rbjax.policies.planner import Planner, PlannerParams, PlanSettings, make_planner
from rbjax.policies.registry import NAMES, make
from rbjax.policies.table import POLICIES, PolicySpec

__all__ = [
    "BEST_RATED",
    "CHEAPEST",
    "NAMES",
    "POLICIES",
    "BaseStockParams",
    "OracleParams",
    "PlanSettings",
    "Planner",
    "PlannerParams",
    "PolicySpec",
    "RandomParams",
    "SSParams",
    "base_stock",
    "make",
    "make_planner",
    "null_policy",
    "oracle",
    "random_policy",
    "s_S",
]

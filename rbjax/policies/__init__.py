"""Policies: pure functions ``policy(policy_params, obs, privileged, key) -> Action``."""
from rbjax.policies.baselines import (BEST_RATED, CHEAPEST, BaseStockParams, RandomParams, SSParams, base_stock,
                                     null_policy, random_policy, s_S)
from rbjax.policies.oracle import OracleParams, oracle

__all__ = ["BEST_RATED", "CHEAPEST", "BaseStockParams", "OracleParams", "RandomParams", "SSParams", "base_stock",
           "null_policy", "oracle", "random_policy", "s_S"]

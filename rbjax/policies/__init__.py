"""Policies: pure functions ``policy(policy_params, obs, privileged, key) -> Action``."""
from rbjax.policies.baselines import BaseStockParams, RandomParams, base_stock, null_policy, random_policy
from rbjax.policies.oracle import OracleParams, oracle

__all__ = ["BaseStockParams", "OracleParams", "RandomParams", "base_stock", "null_policy", "oracle", "random_policy"]

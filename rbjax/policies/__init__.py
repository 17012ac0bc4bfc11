"""Policies: pure functions ``policy(policy_params, obs, privileged, key) -> Action``."""
from rbjax.policies.baselines import BaseStockParams, RandomParams, base_stock, null_policy, random_policy

__all__ = ["BaseStockParams", "RandomParams", "base_stock", "null_policy", "random_policy"]

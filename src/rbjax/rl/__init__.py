"""Learned baselines: observation encoding, action decoding, the actor-critic network and PPO."""

from rbjax.rl.actions import Choice, Heads, decode
from rbjax.rl.features import encode, feature_sizes
from rbjax.rl.ppo import PPOConfig, make_train, policy_params
from rbjax.rl.ppo_policy import PPOPolicyParams, make_policy

__all__ = [
    "Choice",
    "Heads",
    "PPOConfig",
    "PPOPolicyParams",
    "decode",
    "encode",
    "feature_sizes",
    "make_policy",
    "make_train",
    "policy_params",
]

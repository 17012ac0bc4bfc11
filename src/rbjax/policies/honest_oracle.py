"""The honest oracle: the paper's oracle reading the belief instead of the truth (agent-legal).

Where the oracle reads each supplier's hidden quality and today's news effects, this one reads the belief's
posterior mean quality (``rbjax.policies.belief``) and the news effects at every item's mean strength, computed
from the visible part of the state alone (``belief_state.visible``): the best an agent following the oracle's
rules can do with its own information. It takes ``OracleParams``.
"""

from __future__ import annotations

from rbjax.policies import belief_state
from rbjax.policies.oracle import OracleParams, oracle
from rbjax.state import Action, Observation, Privileged


def honest_oracle(params: OracleParams, obs: Observation, privileged: Privileged, key=None) -> Action:
    """One day of the oracle's rules on the belief. privileged: ``Env.privileged`` (its ``state`` and ``params``
    are read only through ``belief_state.belief_of``, which masks every hidden field)."""
    *_, view = belief_state.honest_of(privileged, obs.category, "honest_oracle")
    return oracle(params, obs, view, key)

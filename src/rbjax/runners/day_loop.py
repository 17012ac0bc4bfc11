"""The day loop every runner shares: one store's days as one ``lax.scan``.

A policy is any pure function ``policy(policy_params, obs, privileged, key) -> Action``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from rbjax.env import Env
from rbjax.kernels.rng import day_keys
from rbjax.params import EnvParams
from rbjax.results.records import summarize
from rbjax.state import Action

Policy = Callable[..., Action]


def scan_days(
    env: Env,
    policy: Policy,
    policy_params,
    env_params: EnvParams,
    obs,
    state,
    key: jax.Array,
    first_day,
    days: int,
    record: Callable = summarize,
    watch: Callable | None = None,
):
    """One store's days ``first_day .. first_day + days - 1`` as one ``lax.scan``: the day of every runner.

    Day ``d`` takes its keys from ``day_keys(key, d)`` (the policy's, the step's), asks ``policy(policy_params,
    obs, env.privileged(state, env_params), policy key)`` for the action and steps ``env`` with it.
    obs, state: one store's morning Observation and EnvState; key: [] its run key; first_day: [] int32; days:
    static. record: the day's DayInfo -> its record (``summarize``: a DaySummary; ``lambda info: info``: the
    DayInfo). watch: None, or ``watch(obs, privileged, state, action, policy key)`` -> a pytree computed each
    morning before the step; a day's output is then (record, watched).
    Returns ((final Observation, final EnvState), outputs with a leading [days] axis).
    """

    def body(carry, day):
        obs, state = carry
        k_pol, k_env = day_keys(key, day)
        privileged = env.privileged(state, env_params)
        action = policy(policy_params, obs, privileged, k_pol)
        watched = None if watch is None else watch(obs, privileged, state, action, k_pol)
        obs, state, _, _, _, info = env.step(k_env, state, action, env_params)
        return (obs, state), (record(info) if watch is None else (record(info), watched))

    return jax.lax.scan(body, (obs, state), first_day + jnp.arange(days, dtype=jnp.int32))

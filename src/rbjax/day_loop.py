"""The one day loop: one store's days as one ``lax.scan`` (``scan_days``), and a batch's days in calls of it
(``in_chunks``). Every loop over a store's days runs here: the runners' rollouts, the planner's futures, the
distillation's labels (``tests/test_one_day_loop.py`` finds no other).

A policy is any pure function ``policy(policy_params, obs, privileged, key) -> Action``.
"""

from __future__ import annotations

import time
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
    obs, env.privileged(state, env_params), policy key)`` for the action and steps ``env`` (an ``Env``, or any
    model with its ``step`` and ``privileged``) with it.
    obs, state: one store's morning Observation and EnvState; key: [] its run key; first_day: [] int32 (given
    unbatched under ``vmap``, the loop's day stays unbatched: a ``lax.cond`` on it stays a branch); days: static.
    record: the day's DayInfo -> its record (``summarize``: a DaySummary; ``lambda info: info``: the DayInfo;
    ``lambda info: None``: nothing). watch: None, or ``watch(day, obs, privileged, state, action, policy key)``
    -> a pytree computed each morning before the step (``day``: the loop's day, ``first_day`` + its index); a
    day's output is then (record, watched).
    Returns ((final Observation, final EnvState), outputs with a leading [days] axis).
    """

    def body(carry, day):
        obs, state = carry
        k_pol, k_env = day_keys(key, day)
        privileged = env.privileged(state, env_params)
        action = policy(policy_params, obs, privileged, k_pol)
        watched = None if watch is None else watch(day, obs, privileged, state, action, k_pol)
        obs, state, _, _, _, info = env.step(k_env, state, action, env_params)
        return (obs, state), (record(info) if watch is None else (record(info), watched))

    return jax.lax.scan(body, (obs, state), first_day + jnp.arange(days, dtype=jnp.int32))


def in_chunks(
    advance: Callable,
    carry,
    days: int,
    per_call: int,
    first_day: int = 0,
    on_chunk: Callable | None = None,
):
    """A batch's days ``first_day .. first_day + days - 1`` in calls of ``per_call`` days (the last may be
    shorter): ``advance(carry, first, length) -> (carry, out)`` runs days ``first .. first + length - 1`` (a
    jitted program of ``scan_days``; calls of one length compile once). on_chunk: None, or
    ``on_chunk(out, done, length, seconds)`` after each call, its outputs ready (``done``: days run so far,
    ``seconds``: the call's, to its outputs ready); what it returns is kept in place of ``out``.
    Returns (the last carry, [the calls' outputs]).
    """
    outs, done = [], 0
    while done < days:
        length = min(per_call, days - done)
        clock = time.perf_counter()
        carry, out = advance(carry, first_day + done, length)
        done += length
        if on_chunk is not None:
            jax.block_until_ready(out)
            out = on_chunk(out, done, length, time.perf_counter() - clock)
        outs.append(out)
    return carry, outs

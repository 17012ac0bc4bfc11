"""The compiled programs of a rollout: the reset, the morning observation, and the days of a batch of stores
(``vmap`` over stores, sharded over devices), each built once per process (``rbjax.programs``) and kept
on disk where it can be named (``rbjax.runners.executables``)."""

from __future__ import annotations

import jax
from jax.sharding import PartitionSpec as P

from rbjax import programs
from rbjax.day_loop import Policy, scan_days
from rbjax.env import Env
from rbjax.results.records import summarize
from rbjax.runners import executables
from rbjax.runners.placement import STORES, mesh_map, one_process, place, specs


def _one_store(env: Env, policy: Policy, records: str):
    record = (lambda info: info) if records == "full" else summarize

    def advance(policy_params, env_params, obs, state, key, first_day, days):
        return scan_days(env, policy, policy_params, env_params, obs, state, key, first_day, days, record)

    return advance


def _stored(fn, name: str, env: Env, parts: tuple, **jit_args) -> executables.StoredProgram:
    """``fn`` jitted as a program kept on disk (``rbjax.runners.executables``) when ``env`` and every part can be
    named by value (a part of None: kept in memory only). jit_args: static_argnums, donate_argnums."""
    ident = executables.env_name(env)
    named = None if ident is None or None in parts else (ident, *parts)
    return executables.StoredProgram(fn, name, named, **jit_args)


def _per_store(name: str, fn, env: Env, env_axes, devices: tuple):
    """jitted ``vmap(fn)`` over (store, params) of ``env``, sharded over ``devices`` (``programs.cached`` per
    name, env, env axes and devices; kept on disk, ``rbjax.runners.executables``)."""

    def build():
        f = jax.vmap(fn, in_axes=(0, env_axes))
        if len(devices) > 1:
            f = mesh_map(f, devices, (P(STORES), specs(env_axes)))
        return _stored(f, f"rollout.{name}", env, (repr(env_axes), one_process(devices)))

    return programs.cached(f"rollout.{name}", build, env, (repr(env_axes), devices))


def observer(env: Env, env_axes, devices: tuple):
    """jitted [B] ``env.observe``."""
    return _per_store("observe", env.observe, env, env_axes, devices)


def open_stores(env: Env, keys: jax.Array, env_params, devices: tuple, env_axes=None):
    """(obs, state) [B] of ``len(keys)`` stores opened by a rollout's own reset program (``compiled``), the keys
    and params placed on ``devices`` as a rollout places them: callers that open stores outside a rollout share
    its compiled program (an argument placed otherwise, even on the same device, is another program)."""
    reset = _per_store("reset", env.reset, env, env_axes, devices)
    return reset(place(keys, 0, devices), place(env_params, env_axes, devices))


def compiled(env: Env, policy: Policy, records: str, policy_axes, env_axes, devices: tuple = ()):
    """(reset, chunk) programs (``executables.StoredProgram``: call them, or ``.compile(*args)``): repeated
    rollouts compile once per (env, env axes, devices) for the reset and per (env, policy, records, axes,
    devices) for the days, and a new process loads them from disk where the policy is an rbjax function."""

    def build():
        advance = jax.vmap(
            _one_store(env, policy, records), in_axes=(policy_axes, env_axes, 0, 0, 0, None, None)
        )
        if len(devices) > 1:
            inner = advance
            in_specs = (specs(policy_axes), specs(env_axes), P(STORES), P(STORES), P(STORES))
            advance = lambda pp, ep, obs, state, key, first, days: mesh_map(
                lambda *a: inner(*a, first, days), devices, in_specs
            )(pp, ep, obs, state, key)
        stored = (
            executables.policy_name(policy),
            records,
            repr(policy_axes),
            repr(env_axes),
            one_process(devices),
        )
        return _stored(advance, "rollout.days", env, stored, static_argnums=(6,), donate_argnums=(2, 3))

    parts = (policy, records, repr(policy_axes), repr(env_axes), devices)
    return _per_store("reset", env.reset, env, env_axes, devices), programs.cached(
        "rollout.days", build, env, parts
    )

"""Batched rollouts: one ``lax.scan`` over days, ``vmap`` over stores.

A policy is any pure function ``policy(policy_params, obs, privileged, key) -> Action``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from rbjax.checks import check_policy_params, is_concrete
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.runners.records import summarize
from rbjax.state import Action

Policy = Callable[..., Action]
STORES = "stores"  # the mesh axis the batch of stores is split over


def _one_store(env: Env, policy: Policy, records: str):
    def advance(policy_params, env_params, obs, state, key, first_day, days):
        def body(carry, day):
            obs, state = carry
            k_pol, k_env = jax.random.split(jax.random.fold_in(key, day))
            action = policy(policy_params, obs, env.privileged(state, env_params), k_pol)
            obs, state, _, _, _, info = env.step(k_env, state, action, env_params)
            return (obs, state), (info if records == "full" else summarize(info))

        return jax.lax.scan(body, (obs, state), first_day + jnp.arange(days, dtype=jnp.int32))

    return advance


def rollout(
    env: Env,
    policy: Policy,
    policy_params,
    env_params: EnvParams,
    keys: jax.Array,
    days: int = 180,
    *,
    policy_axes=None,
    env_axes=None,
    records: str = "summary",
    progress: bool | int = False,
    devices: Sequence[jax.Device] | None = None,
):
    """Run ``len(keys)`` stores for ``days`` days.

    keys: [B] PRNG keys (one episode each). policy_axes / env_axes: ``vmap`` in_axes for the params
    (None: shared by every store; 0: a leading batch axis on every leaf; or a matching pytree).
    records: "summary" (DaySummary, [B, days] scalars) or "full" (DayInfo, per product).
    progress: False, or a chunk length in days; chunks run as separate jitted calls (one compile) and
    print a progress line each.
    devices: the devices the stores are spread over (default: all of ``jax.devices()``, which spans every
    host after ``jax.distributed.initialize``). The batch is padded to a multiple of their number; each
    device runs its slice with no communication, so results do not depend on the device count.
    Returns (records with leading axes [B, days], final EnvState [B, ...]).
    """
    if records not in ("summary", "full"):
        raise ValueError(f"records must be 'summary' or 'full', got {records!r}")
    if keys.ndim != 1:
        raise ValueError(f"keys must be a 1-D batch of PRNG keys, got shape {keys.shape}")
    if days < 1:
        raise ValueError(f"days must be >= 1, got {days}")
    if is_concrete(env_params):
        env.check_params(env_params)
    if is_concrete(policy_params):
        check_policy_params(policy_params)
    devices = tuple(jax.devices() if devices is None else devices)
    n = len(keys)
    pad = -n % len(devices)
    policy_params, env_params, keys = (
        _pad(x, axes, pad) for x, axes in ((policy_params, policy_axes), (env_params, env_axes), (keys, 0))
    )
    k_reset, k_run = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k))(keys), 1, 0)
    reset, step_chunk = compiled(env, policy, records, policy_axes, env_axes, devices)
    obs, state = reset(k_reset, env_params)
    chunk = days if not progress else max(1, min(30 if progress is True else int(progress), days))
    outs, done, start = [], 0, time.perf_counter()
    while done < days:
        length = min(chunk, days - done)
        (obs, state), rec = step_chunk(policy_params, env_params, obs, state, k_run, jnp.int32(done), length)
        outs.append(rec)
        done += length
        if progress:
            jax.block_until_ready(rec)
            rate = done * n / (time.perf_counter() - start)
            print(f"rollout: day {done}/{days}, {n} stores, {rate:,.0f} store-days/s", file=sys.stderr)
    recs = outs[0] if len(outs) == 1 else jax.tree.map(lambda *x: jnp.concatenate(x, axis=1), *outs)
    if pad:
        recs, state = jax.tree.map(lambda x: x[:n], (recs, state))
    return recs, state


def _pad(tree, axes, pad: int):
    """Repeat the last store ``pad`` times along the batch axis of the leaves that have one."""
    if not pad or axes is None:
        return tree
    grow = lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)])
    if axes == 0:
        return jax.tree.map(grow, tree)
    return jax.tree.map(
        lambda a, x: x if a is None else jax.tree.map(grow, x), axes, tree, is_leaf=lambda x: x is None
    )


def _specs(axes):
    """vmap axes (None, 0 or a pytree of them) -> shard_map specs: batched leaves split over 'stores'."""
    if axes is None:
        return P()
    if axes == 0:
        return P(STORES)
    return jax.tree.map(lambda a: P() if a is None else P(STORES), axes, is_leaf=lambda x: x is None)


_CACHE: dict = {}


def _mesh_map(f, devices: tuple, in_specs):
    """shard_map ``f`` over the stores axis of ``devices``. No collectives: every device runs its slice of
    stores alone (check_vma off: replicated params meet per-store values inside scans)."""
    mesh = Mesh(np.asarray(devices), (STORES,))
    return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=P(STORES), check_vma=False)


def compiled(env: Env, policy: Policy, records: str, policy_axes, env_axes, devices: tuple = ()):
    """jitted (reset, chunk): repeated rollouts compile once per (env, env axes, devices) for the reset and
    per (env, policy, records, axes, devices) for the days."""
    reset_spec = ("reset", id(env), repr(env_axes), devices)
    if reset_spec not in _CACHE:
        reset = jax.vmap(env.reset, in_axes=(0, env_axes))
        if len(devices) > 1:
            reset = _mesh_map(reset, devices, (P(STORES), _specs(env_axes)))
        _CACHE[reset_spec] = (env, jax.jit(reset))
    spec = (id(env), policy, records, repr(policy_axes), repr(env_axes), devices)
    if spec not in _CACHE:
        advance = jax.vmap(
            _one_store(env, policy, records), in_axes=(policy_axes, env_axes, 0, 0, 0, None, None)
        )
        if len(devices) > 1:
            inner, specs = advance, (_specs(policy_axes), _specs(env_axes), P(STORES), P(STORES), P(STORES))
            advance = lambda pp, ep, obs, state, key, first, days: _mesh_map(
                lambda *a: inner(*a, first, days), devices, specs
            )(pp, ep, obs, state, key)
        _CACHE[spec] = (env, jax.jit(advance, static_argnums=(6,), donate_argnums=(2, 3)))
    return _CACHE[reset_spec][1], _CACHE[spec][1]

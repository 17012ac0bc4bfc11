"""Continue a batch of stores from a snapshot, bit for bit: ``rollout_from`` (any state, keys and day) and
``resume`` (a ``Snapshot``). The records are the uninterrupted ``rollout``'s of the days continued, since a
store's randomness comes from its episode key and the day alone (``rbjax.files.snapshots``).

>>> snap = snapshots.load("day30.npz", env)
>>> more, final = resume(env, oracle, OracleParams.default(), snap, days=30)   # days 30 .. 59
"""

from __future__ import annotations

import dataclasses

import jax

from rbjax.checks import need_count
from rbjax.day_loop import Policy
from rbjax.env import Env
from rbjax.files.snapshots import Snapshot, check_batch_state, check_day, check_keys
from rbjax.params import EnvParams
from rbjax.runners.rollout import RolloutOptions, rollout
from rbjax.state import EnvState


def rollout_from(
    env: Env,
    policy: Policy,
    policy_params,
    env_params: EnvParams,
    state: EnvState,
    keys: jax.Array,
    day: int,
    days: int,
    options: RolloutOptions | None = None,
    **fields,
):
    """Continue ``B`` stores for ``days`` days from ``state`` after ``day`` rollout days.

    state: EnvState, leaves [B, ...] (what ``rollout`` returned after ``day`` days, or ``load``/``fork`` gave).
    keys: [B] the episode keys ``rollout`` started from (day ``d`` uses ``fold_in(split(key)[1], d)``, as in
    ``rollout``). The records are the uninterrupted ``rollout``'s records of days ``day .. day + days - 1``, bit
    for bit, and the final state its final state. The morning's observation is recomputed from the state
    (``env.observe``), as the step computes it. options (or its fields): ``RolloutOptions``, as ``rollout``
    takes them, except that ``store_chunk`` defaults to all ``B`` stores (results are host arrays when there
    are several chunks). Returns (records with leading axes [B, days], final EnvState [B, ...]).
    """
    keys = check_keys(keys)
    day = check_day(day)
    need_count("days", days, whole=True)
    n = int(keys.shape[0])
    check_batch_state(env, state, n, "state")
    options = RolloutOptions.given(options, **fields)
    if options.store_chunk is None:
        options = dataclasses.replace(options, store_chunk=n)
    return rollout(
        env, policy, policy_params, env_params, keys, int(days), options, state=state, first_day=day
    )


def resume(env: Env, policy: Policy, policy_params, snapshot: Snapshot, days: int, **kwargs):
    """``rollout_from`` a Snapshot: its state, keys, day and params (``Snapshot.env_params``).

    Pass ``env_axes=0`` when the snapshot's params have a per-store leading axis. Returns (records [B, days],
    final EnvState [B, ...]); the snapshot after them is ``Snapshot(final, snapshot.keys, snapshot.day + days,
    snapshot.params)``.
    """
    if not isinstance(snapshot, Snapshot):
        raise ValueError(f"resume takes a Snapshot, got {type(snapshot).__name__}")
    return rollout_from(
        env,
        policy,
        policy_params,
        snapshot.env_params(env),
        snapshot.state,
        snapshot.keys,
        snapshot.day,
        days,
        **kwargs,
    )

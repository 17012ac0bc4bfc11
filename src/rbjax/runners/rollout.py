"""Batched rollouts, the chunk driver: stores in chunks that fit in memory, each chunk's days in jitted calls
(``rbjax.runners.rollout_programs``) of one store's day loop (``rbjax.day_loop.scan_days``) under
``vmap`` over stores, sharded over devices.

How a rollout runs (records, axes, devices, chunks, calls, progress) is one ``RolloutOptions``, taken by
``rollout``, ``rollout_chunks`` and ``rbjax.runners.continuation.rollout_from``, as an object or as its fields.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils

from rbjax.checks import check_policy_params, is_concrete, need_count
from rbjax.config import EPISODE_DAYS
from rbjax.day_loop import Policy, in_chunks
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.runners.memory import auto_store_chunk
from rbjax.runners.placement import place, standing_in, take_stores
from rbjax.runners.progress import RolloutProgress
from rbjax.runners.rollout_programs import compiled, observer


@dataclasses.dataclass(frozen=True)
class RolloutOptions:
    """How a rollout runs; none of it changes a store's results.

    policy_axes / env_axes: ``vmap`` in_axes for the params (None: shared by every store; 0: a leading batch
        axis on every leaf; or a matching pytree).
    records: "summary" (DaySummary, [B, days] scalars) or "full" (DayInfo, per product).
    progress: False, or a chunk length in days (True: 30); the days run in calls of that length (one compile)
        and print a progress line each.
    devices: the devices the stores are spread over (default: all of ``jax.devices()``, which spans every host
        after ``jax.distributed.initialize``). The batch is padded to a multiple of their number; each device
        runs its slice with no communication, so results do not depend on the device count.
    store_chunk: stores per jitted call (default: ``auto_store_chunk``, what fits in memory). A larger batch runs
        in chunks, one after another; every store's results are the same in any chunk.
    days_per_call: days per jitted call (default: the progress interval, else all the days); calls of one
        length compile once.
    to_host: hand each chunk's arrays over as numpy arrays, which frees the device for the next chunk (default:
        when there is more than one chunk).
    """

    policy_axes: Any = None
    env_axes: Any = None
    records: str = "summary"
    progress: bool | int = False
    devices: Sequence[jax.Device] | None = None
    store_chunk: int | None = None
    days_per_call: int | None = None
    to_host: bool | None = None

    def __post_init__(self):
        if self.records not in ("summary", "full"):
            raise ValueError(f"records must be 'summary' or 'full', got {self.records!r}")
        if self.store_chunk is not None:
            need_count("store_chunk", self.store_chunk)
        if self.days_per_call is not None:
            need_count("days_per_call", self.days_per_call)
        if self.devices is not None:
            object.__setattr__(self, "devices", tuple(self.devices))

    @classmethod
    def given(cls, options: RolloutOptions | None = None, **fields) -> RolloutOptions:
        """``options`` (default: ``RolloutOptions()``) with ``fields`` replaced; TypeError naming a field that
        is not one."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - names)
        if unknown:
            raise TypeError(f"a rollout has no option {unknown[0]!r} (options: {', '.join(sorted(names))})")
        return dataclasses.replace(options or cls(), **fields)


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One chunk of stores from ``rollout_chunks``: stores ``start .. stop - 1`` of the batch."""

    start: int
    stop: int
    records: Any  # DaySummary or DayInfo, leaves [stop - start, days, ...]
    state: Any  # final EnvState, leaves [stop - start, ...]
    opening_seconds: float = 0.0  # the reset: supplier worlds, pre-opening history (and compiling, the first)
    days_seconds: float = 0.0  # the days, every call of them


def rollout(
    env: Env,
    policy: Policy,
    policy_params,
    env_params: EnvParams,
    keys: jax.Array,
    days: int = EPISODE_DAYS,
    options: RolloutOptions | None = None,
    *,
    state=None,
    first_day: int = 0,
    **fields,
):
    """Run ``len(keys)`` stores for ``days`` days.

    keys: [B] PRNG keys (one episode each). options: ``RolloutOptions``, or its fields as keywords (``records=
    "full"``, ``devices=...``). A batch of several chunks comes back as host (numpy) arrays; for batches whose
    final states do not fit in host memory, iterate ``rollout_chunks`` instead. state, first_day: continue a
    batch from a state (``rollout_chunks``; ``rbjax.runners.continuation.rollout_from``).
    Returns (records with leading axes [B, days], final EnvState [B, ...]).
    """
    options = RolloutOptions.given(options, **fields)
    chunks = list(
        rollout_chunks(
            env, policy, policy_params, env_params, keys, days, options, state=state, first_day=first_day
        )
    )
    if len(chunks) == 1:
        return chunks[0].records, chunks[0].state
    return jax.tree.map(lambda *x: np.concatenate(x), *((c.records, c.state) for c in chunks))


def rollout_chunks(
    env: Env,
    policy: Policy,
    policy_params,
    env_params: EnvParams,
    keys: jax.Array,
    days: int = EPISODE_DAYS,
    options: RolloutOptions | None = None,
    *,
    state=None,
    first_day: int = 0,
    **fields,
) -> Iterator[Chunk]:
    """``rollout`` for any number of stores: yields one ``Chunk`` per ``store_chunk`` stores, in order.

    Memory stays bounded by one chunk (plus what the caller keeps): a caller that reduces each chunk (for
    example ``metrics.store_metrics(chunk.records)``) and drops it can run millions of stores. Every chunk
    has the same shape (the last one is padded with copies of the last store and cut back), so the day
    compiles once. When the devices span several processes (``jax.distributed``), every process runs its
    devices' slice of each chunk and receives the whole chunk's results as numpy arrays. state: start from
    this EnvState batch (leaves [B, ...], device or host arrays) instead of resetting, after ``first_day``
    rollout days: the records are then the uninterrupted run's days ``first_day .. first_day + days - 1``, bit
    for bit (``rbjax.files.snapshots``). options (or its fields): ``RolloutOptions``.
    """
    o = RolloutOptions.given(options, **fields)
    _check_arguments(env, policy_params, env_params, keys, days, state, first_day)
    devices = tuple(jax.devices() if o.devices is None else o.devices)
    n = len(keys)
    size, several_hosts = _chunk_size(env, o.records, days, devices, n, o.store_chunk)
    to_host = n > size if o.to_host is None else o.to_host
    run = dataclasses.replace(
        o, devices=devices, days_per_call=_days_per_call(days, o.progress, o.days_per_call)
    )
    report = RolloutProgress(n, days, size, len(devices), resumed=state is not None) if o.progress else None
    for first in range(0, n, size):
        take = np.minimum(np.arange(first, first + size), n - 1)  # the last chunk repeats its last store
        stop = min(first + size, n)
        if report:
            report.chunk(first, stop)
        start = None if state is None else _take_state(state, take)
        chunk_policy = take_stores(policy_params, o.policy_axes, take)
        chunk_env, chunk_keys = take_stores(env_params, o.env_axes, take), keys[take]
        if not several_hosts:  # inputs committed to other devices (a snapshot, a caller's arrays) move here
            chunk_policy = place(chunk_policy, o.policy_axes, devices)
            chunk_env = place(chunk_env, o.env_axes, devices)
            chunk_keys, start = place((chunk_keys, start), 0, devices)
        rec, final, timing = _run_batch(
            env, policy, (chunk_policy, chunk_env, chunk_keys, start), int(first_day), days, run, report
        )
        rec, final = jax.tree.map(lambda x: x[: stop - first], (rec, final))
        if several_hosts:  # every process gets every store's results (its devices only hold their slice)
            rec, final = multihost_utils.process_allgather((rec, final), tiled=True)
        elif to_host:
            rec, final = jax.tree.map(np.asarray, (rec, final))
        yield Chunk(first, stop, rec, final, *timing)


def _check_arguments(env, policy_params, env_params, keys, days, state, first_day) -> None:
    """ValueError (one line) for a ``rollout_chunks`` argument that does not fit, naming it."""
    if keys.ndim != 1:
        raise ValueError(f"keys must be a 1-D batch of PRNG keys, got shape {keys.shape}")
    need_count("days", days)
    if isinstance(first_day, bool) or int(first_day) != first_day or first_day < 0:
        raise ValueError(f"first_day must be an int >= 0, got {first_day!r}")
    if first_day and state is None:
        raise ValueError("first_day needs the state the stores had after it (state=)")
    if is_concrete(env_params):
        env.check_params(env_params)
    if is_concrete(policy_params):
        check_policy_params(policy_params)


def _chunk_size(env: Env, records: str, days: int, devices: tuple, n: int, store_chunk) -> tuple[int, bool]:
    """(stores per chunk, whether ``devices`` span several processes): ``store_chunk`` or what fits in memory,
    at most ``n``, the same in every process, rounded up to a multiple of the devices."""
    if store_chunk is not None:
        size = min(int(store_chunk), n)
    else:
        size = min(auto_store_chunk(env, records, days, devices), n)
    several_hosts = any(d.process_index != jax.process_index() for d in devices)
    if several_hosts:  # every process must run the same chunks: the first process's estimate
        size = int(multihost_utils.broadcast_one_to_all(np.int32(size)))
    return size + -size % len(devices), several_hosts  # every device gets the same number of stores


def _days_per_call(days: int, progress: bool | int, days_per_call: int | None) -> int:
    """Days per jitted call: ``days_per_call``, else the progress interval (30 for ``progress=True``), else all
    ``days``; never more than ``days``."""
    per_call = days if not progress else max(1, min(30 if progress is True else int(progress), days))
    if days_per_call is not None:
        per_call = min(int(days_per_call), days)
    return per_call


def _take_state(state, take: np.ndarray):
    """Stores ``take`` of a state batch as fresh device arrays (the day program donates its state)."""
    return jax.tree.map(
        lambda x: jnp.asarray(x[take] if isinstance(x, np.ndarray) else x[jnp.asarray(take)]), state
    )


def _run_batch(env, policy, inputs, first_day: int, days: int, o: RolloutOptions, report):
    """One batch of stores (a multiple of ``len(o.devices)``) -> (records, state, (opening seconds, days
    seconds)), in jitted calls of ``o.days_per_call`` days; ``report(days_done)`` after each when given.
    inputs: (policy params, env params, keys [B], start), start the batch's state after ``first_day`` days (None:
    reset); its morning observation is recomputed (``env.observe``), as the step computes it. The opening's
    seconds count the reset (and the programs' compilation, which it waits for); the days' every day call, to
    their records ready."""
    policy_params, env_params, keys, start = inputs
    devices, days_per_call = o.devices, o.days_per_call
    k_reset, k_run = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k))(keys), 1, 0)
    reset, step_chunk = compiled(env, policy, o.records, o.policy_axes, o.env_axes, devices)
    made = lambda what: sum(getattr(p, what, 0) for p in (reset, step_chunk))  # programs built or loaded
    built, loaded = made("built"), made("loaded")
    clock = time.perf_counter()
    lengths = sorted({days_per_call, days % days_per_call or days_per_call})
    if start is None:  # the reset compiles on the compiling thread while the day is traced and lowered
        opening = reset.start(k_reset, env_params)
        obs, state = standing_in(opening.out_info, devices)
    else:
        state = start
        obs = observer(env, o.env_axes, devices)(state, env_params)
    # every call length's day, so that no day call waits for the compiler
    day_programs = {
        n: step_chunk.start(policy_params, env_params, obs, state, k_run, jnp.int32(first_day), n)
        for n in lengths
    }
    if start is None:  # the stores open while the day may still compile (dispatch is asynchronous)
        obs, state = opening.result()(k_reset, env_params)
    # the programs compiled for the stand-ins run the arrays (a stored one refuses arrays placed otherwise)
    run_days = {n: program.result() for n, program in day_programs.items()}
    jax.block_until_ready(state)  # the days cannot start before it anyway: the opening's time is known
    opening_seconds, days_clock = time.perf_counter() - clock, time.perf_counter()
    if report:
        loaded = made("loaded") > loaded and made("built") == built
        report.opened(opening_seconds, loaded=loaded)

    def advance(carry, first: int, length: int):
        return run_days[length](policy_params, env_params, *carry, k_run, jnp.int32(first))

    def reported(rec, done: int, length: int, seconds: float):
        report(done, seconds, length)
        return rec

    (obs, state), outs = in_chunks(
        advance, (obs, state), days, days_per_call, first_day, reported if report else None
    )
    recs = outs[0] if len(outs) == 1 else jax.tree.map(lambda *x: jnp.concatenate(x, axis=1), *outs)
    jax.block_until_ready(recs)
    return recs, state, (opening_seconds, time.perf_counter() - days_clock)

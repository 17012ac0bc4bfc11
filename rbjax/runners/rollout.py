"""Batched rollouts: one ``lax.scan`` over days, ``vmap`` over stores.

A policy is any pure function ``policy(policy_params, obs, privileged, key) -> Action``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from rbjax.checks import check_policy_params, is_concrete, need_count
from rbjax.env import Env
from rbjax.kernels.rng import day_keys
from rbjax.params import EnvParams
from rbjax.results.records import summarize
from rbjax.runners import executables, programs
from rbjax.state import Action

Policy = Callable[..., Action]
STORES = "stores"  # the mesh axis the batch of stores is split over


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


def _one_store(env: Env, policy: Policy, records: str):
    record = (lambda info: info) if records == "full" else summarize

    def advance(policy_params, env_params, obs, state, key, first_day, days):
        return scan_days(env, policy, policy_params, env_params, obs, state, key, first_day, days, record)

    return advance


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One chunk of stores from ``rollout_chunks``: stores ``start .. stop - 1`` of the batch."""

    start: int
    stop: int
    records: Any  # DaySummary or DayInfo, leaves [stop - start, days, ...]
    state: Any  # final EnvState, leaves [stop - start, ...]


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
    store_chunk: int | None = None,
    state=None,
    first_day: int = 0,
    days_per_call: int | None = None,
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
    store_chunk: stores per jitted call (default: ``auto_store_chunk``, what fits in memory). A larger
    batch runs in chunks, one after another, and its results come back as host (numpy) arrays; every
    store's results are the same in any chunk. For batches whose final states do not fit in host memory,
    iterate ``rollout_chunks`` instead. state, first_day, days_per_call: continue a batch from a state
    (``rollout_chunks``; ``rbjax.files.snapshots``).
    Returns (records with leading axes [B, days], final EnvState [B, ...]).
    """
    chunks = list(
        rollout_chunks(
            env,
            policy,
            policy_params,
            env_params,
            keys,
            days,
            policy_axes=policy_axes,
            env_axes=env_axes,
            records=records,
            progress=progress,
            devices=devices,
            store_chunk=store_chunk,
            state=state,
            first_day=first_day,
            days_per_call=days_per_call,
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
    days: int = 180,
    *,
    policy_axes=None,
    env_axes=None,
    records: str = "summary",
    progress: bool | int = False,
    devices: Sequence[jax.Device] | None = None,
    store_chunk: int | None = None,
    to_host: bool | None = None,
    state=None,
    first_day: int = 0,
    days_per_call: int | None = None,
) -> Iterator[Chunk]:
    """``rollout`` for any number of stores: yields one ``Chunk`` per ``store_chunk`` stores, in order.

    Memory stays bounded by one chunk (plus what the caller keeps): a caller that reduces each chunk (for
    example ``metrics.store_metrics(chunk.records)``) and drops it can run millions of stores. Every chunk
    has the same shape (the last one is padded with copies of the last store and cut back), so the day
    compiles once. to_host: hand the chunk's arrays over as numpy arrays, which frees the device for the next
    chunk (default: when there is more than one chunk). When ``devices`` span several processes
    (``jax.distributed``), every process runs its devices' slice of each chunk and receives the whole chunk's
    results as numpy arrays. state: start from this EnvState batch (leaves [B, ...], device or host arrays)
    instead of resetting, after ``first_day`` rollout days: the records are then the uninterrupted run's
    days ``first_day .. first_day + days - 1``, bit for bit (``rbjax.files.snapshots``). Other arguments
    as ``rollout``. days_per_call: days per jitted call (default: the progress interval, else all ``days``);
    calls of one length compile once.
    """
    _check_arguments(env, policy_params, env_params, keys, days, records, store_chunk, state, first_day)
    devices = tuple(jax.devices() if devices is None else devices)
    n = len(keys)
    size, several_hosts = _chunk_size(env, records, days, devices, n, store_chunk)
    to_host = n > size if to_host is None else to_host
    per_call = _days_per_call(days, progress, days_per_call)
    report = _Progress(n, days, size, len(devices), resumed=state is not None) if progress else None
    for first in range(0, n, size):
        take = np.minimum(np.arange(first, first + size), n - 1)  # the last chunk repeats its last store
        stop = min(first + size, n)
        if report:
            report.chunk(first, stop)
        start = None if state is None else _take_state(state, take)
        chunk_policy = _take(policy_params, policy_axes, take)
        chunk_env, chunk_keys = _take(env_params, env_axes, take), keys[take]
        if not several_hosts:  # inputs committed to other devices (a snapshot, a caller's arrays) move here
            chunk_policy = place(chunk_policy, policy_axes, devices)
            chunk_env = place(chunk_env, env_axes, devices)
            chunk_keys, start = place((chunk_keys, start), 0, devices)
        rec, final = _run_batch(
            env,
            policy,
            chunk_policy,
            chunk_env,
            chunk_keys,
            days,
            policy_axes,
            env_axes,
            records,
            devices,
            days_per_call=per_call,
            report=report,
            start=start,
            first_day=int(first_day),
        )
        rec, final = jax.tree.map(lambda x: x[: stop - first], (rec, final))
        if several_hosts:  # every process gets every store's results (its devices only hold their slice)
            rec, final = multihost_utils.process_allgather((rec, final), tiled=True)
        elif to_host:
            rec, final = jax.tree.map(np.asarray, (rec, final))
        yield Chunk(first, stop, rec, final)


def _check_arguments(
    env, policy_params, env_params, keys, days, records, store_chunk, state, first_day
) -> None:
    """ValueError (one line) for a ``rollout_chunks`` argument that does not fit, naming it."""
    if records not in ("summary", "full"):
        raise ValueError(f"records must be 'summary' or 'full', got {records!r}")
    if keys.ndim != 1:
        raise ValueError(f"keys must be a 1-D batch of PRNG keys, got shape {keys.shape}")
    need_count("days", days)
    if store_chunk is not None:
        need_count("store_chunk", store_chunk)
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
        need_count("days_per_call", days_per_call)
        per_call = min(int(days_per_call), days)
    return per_call


def _take_state(state, take: np.ndarray):
    """Stores ``take`` of a state batch as fresh device arrays (the day program donates its state)."""
    return jax.tree.map(
        lambda x: jnp.asarray(x[take] if isinstance(x, np.ndarray) else x[jnp.asarray(take)]), state
    )


def place(tree, axes, devices: tuple):
    """``tree`` on ``devices``: leaves with a store axis (``axes``: vmap in_axes) split over the stores axis, the
    others copied to every device. ``jit`` refuses arrays committed to devices other than its own, which a
    snapshot's state or a caller's arrays may be."""
    if len(devices) == 1:
        return jax.device_put(tree, devices[0])
    mesh = Mesh(np.asarray(devices), (STORES,))
    specs = _specs(axes)
    shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda x: isinstance(x, P))
    return jax.device_put(tree, shardings)


def auto_store_chunk(env: Env, records: str, days: int, devices: Sequence[jax.Device]) -> int:
    """The stores one jitted call runs at most: what fits in ``FREE_SHARE`` of the memory at hand.

    A call's peak is ``chunk_peak_bytes``. CPUs use the host's available memory, at most ``CPU_MAX_CHUNK``
    stores (XLA:CPU's throughput is flat beyond a few thousand stores, so larger chunks only cost memory);
    GPUs and TPUs their own memory (the fixed part is the host's, so it is not counted there).
    """
    per_store = store_peak_bytes(env, records, days)
    if devices[0].platform == "cpu":
        size = min((FREE_SHARE * host_available_bytes() - FIXED_BYTES) // per_store, CPU_MAX_CHUNK)
    else:  # this process's devices (another host's memory is not visible here)
        local = [d for d in devices if d.process_index == jax.process_index()] or list(devices)
        limit = min((d.memory_stats() or {}).get("bytes_limit", 0) for d in local)
        size = FREE_SHARE * limit * len(devices) // per_store if limit else ACCELERATOR_CHUNK * len(devices)
    return max(int(size), len(devices))


def chunk_peak_bytes(env: Env, records: str, days: int, stores: int) -> int:
    """Estimated peak memory of a process that runs ``stores`` stores for ``days`` days in one call:
    ``FIXED_BYTES`` (the JAX runtime and compiling the reset and the day) plus ``store_peak_bytes`` a store.
    ``benchmarks/memory.py`` holds it against measured peaks."""
    return FIXED_BYTES + stores * store_peak_bytes(env, records, days)


def store_peak_bytes(env: Env, records: str, days: int) -> int:
    """One store's share of a call's peak: the larger of the reset's (``RESET_PER_STATE`` states: the
    pre-opening history's temporaries and the supplier selection's lanes) and the days' (``PEAK_PER_STATE``
    states for the step's temporaries, plus its records)."""
    state = store_bytes(env)
    return max(RESET_PER_STATE * state, PEAK_PER_STATE * state + days * record_bytes(env, records))


# measured on XLA:CPU (benchmarks/memory.py, docs/performance.md): a 1,024-store reset peaks 0.37 MB a store
# above its compilation, 180 oracle days 0.35 MB with summary records; the runtime and compiling the two
# programs (one after the other) take ~1.1 GB (256 stores: a 1.25 GB peak)
PEAK_PER_STATE = 6
RESET_PER_STATE = 4
FIXED_BYTES = 1_200_000_000
FREE_SHARE = 0.5
CPU_MAX_CHUNK = 4096
ACCELERATOR_CHUNK = 4096  # stores per device when the device's memory limit is unknown


def host_available_bytes() -> int:
    """The host's available memory (Linux ``MemAvailable``; else its physical memory)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@functools.cache
def _state_shape(env: Env):
    """One store's EnvState as shapes and dtypes (a trace of the reset, run once per env)."""
    return jax.eval_shape(env.reset, jax.random.key(0), env.default_params())[1]


def store_bytes(env: Env) -> int:
    """Bytes of one store's state (found by a trace of the reset, kept on disk: ``executables.remembered``)."""
    return executables.remembered("rollout.store_bytes", _env_parts(env), lambda: _nbytes(_state_shape(env)))


def _env_parts(env: Env) -> tuple | None:
    ident = executables.env_name(env)
    return None if ident is None else (ident,)


@functools.cache
def record_bytes(env: Env, records: str) -> int:
    """Bytes of one store-day's records: "summary" (DaySummary) or "full" (DayInfo) (found by a trace of the
    step, kept on disk: ``executables.remembered``)."""

    def trace() -> int:
        key, params, state = jax.random.key(0), env.default_params(), _state_shape(env)
        info = jax.eval_shape(lambda s: env.step(key, s, Action.noop(s), params)[-1], state)
        return _nbytes(info if records == "full" else jax.eval_shape(summarize, info))

    parts = _env_parts(env)
    return executables.remembered("rollout.record_bytes", None if parts is None else (*parts, records), trace)


def _nbytes(tree) -> int:
    return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))


class _Progress:
    """Progress lines on stderr, by phase: the supplier worlds and pre-opening history of each chunk of stores
    (the first chunk's reset compiles while the day is traced, and its stores open while the day compiles),
    then its days. The estimate of the time left starts with the first day call: the days at the
    measured rate, plus the chunks still to open at the last chunk's opening time once one has opened without
    compiling."""

    def __init__(self, n: int, days: int, size: int, devices: int, resumed: bool = False):
        self.n, self.days, self.size, self.resumed = n, days, size, resumed
        # the day calls so far: none compiles (the day compiled while the first chunk opened)
        self.day_seconds = self.store_days = 0.0
        self.open_seconds = None
        chunks = -(-n // size)
        print(
            f"rollout: {n:,} stores x {days} days"
            + (f" in {chunks:,} chunks of {size:,} stores" if chunks > 1 else "")
            + f" on {devices} device{'s' * (devices > 1)}",
            file=sys.stderr,
        )

    def _where(self) -> str:
        return (
            f"{self.n:,} stores"
            if self.stop - self.first == self.n
            else f"stores {self.first:,}-{self.stop - 1:,}"
        )

    def chunk(self, first: int, stop: int) -> None:
        self.first, self.stop = first, stop
        if first == 0 and not self.resumed:
            print(
                f"rollout: compiling the reset and the day, then drawing supplier worlds for {self._where()}",
                file=sys.stderr,
            )

    def opened(self, seconds: float, loaded: bool = False) -> None:
        """A chunk opened in ``seconds``; loaded: its programs came from disk (``executables``), not compiled."""
        self.open_seconds = seconds
        what = "compiled and opened" if self.first == 0 else "opened (supplier worlds, pre-opening history)"
        if self.first == 0 and loaded:
            what = "opened (compiled programs loaded from the cache)"
        if self.resumed:
            what = "loaded"
        print(f"rollout: {self._where()} {what} in {seconds:.1f} s", file=sys.stderr)

    def __call__(self, done: int, seconds: float, length: int) -> None:
        self.day_seconds += seconds
        self.store_days += (self.stop - self.first) * length
        finished = self.first * self.days + (self.stop - self.first) * done
        rate = self.store_days / self.day_seconds
        line = f"rollout: {self._where()}, day {done}/{self.days}, {rate:,.0f} store-days/s"
        if finished < self.n * self.days:
            left = (self.n * self.days - finished) / rate
            unopened = -(-self.n // self.size) - 1 - self.first // self.size
            opening = ""
            if unopened and self.first == 0:  # no chunk opened without compiling yet: not counted
                opening = f" + opening {unopened:,} more chunk{'s' * (unopened > 1)}"
            else:
                left += unopened * self.open_seconds
            line += f", {_clock(left)} left{opening}"
        print(line, file=sys.stderr)


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def _run_batch(
    env,
    policy,
    policy_params,
    env_params,
    keys,
    days,
    policy_axes,
    env_axes,
    records,
    devices,
    days_per_call,
    report,
    start=None,
    first_day: int = 0,
):
    """One batch of ``len(keys)`` stores (a multiple of ``len(devices)``) -> (records, state), in jitted calls
    of ``days_per_call`` days; ``report(days_done)`` after each when given. start: the batch's state after
    ``first_day`` days (None: reset); its morning observation is recomputed (``env.observe``), as the step
    computes it."""
    k_reset, k_run = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k))(keys), 1, 0)
    reset, step_chunk = compiled(env, policy, records, policy_axes, env_axes, devices)
    made = lambda what: sum(getattr(p, what, 0) for p in (reset, step_chunk))  # programs built or loaded
    built, loaded = made("built"), made("loaded")
    clock = time.perf_counter()
    lengths = sorted({days_per_call, days % days_per_call or days_per_call})
    if start is None:  # the reset compiles on the compiling thread while the day is traced and lowered
        opening = reset.start(k_reset, env_params)
        obs, state = standing_in(opening.out_info, devices)
    else:
        state = start
        obs = observer(env, env_axes, devices)(state, env_params)
    # every call length's day, so that no day call waits for the compiler
    day_programs = {
        n: step_chunk.start(policy_params, env_params, obs, state, k_run, jnp.int32(first_day), n)
        for n in lengths
    }
    if start is None:  # the stores open while the day may still compile (dispatch is asynchronous)
        obs, state = opening.result()(k_reset, env_params)
    # the programs compiled for the stand-ins run the arrays (a stored one refuses arrays placed otherwise)
    run_days = {n: program.result() for n, program in day_programs.items()}
    if report:
        jax.block_until_ready(state)
        loaded = made("loaded") > loaded and made("built") == built
        report.opened(time.perf_counter() - clock, loaded=loaded)
    outs, done = [], 0
    while done < days:
        length = min(days_per_call, days - done)
        clock = time.perf_counter()
        day = jnp.int32(first_day + done)
        (obs, state), rec = run_days[length](policy_params, env_params, obs, state, k_run, day)
        outs.append(rec)
        done += length
        if report:
            jax.block_until_ready(rec)
            report(done, time.perf_counter() - clock, length)
    recs = outs[0] if len(outs) == 1 else jax.tree.map(lambda *x: jnp.concatenate(x, axis=1), *outs)
    return recs, state


def standing_in(out_info, devices: tuple):
    """The arrays a per-store program will return (``out_info``: their shapes and dtypes), as
    ``jax.ShapeDtypeStruct`` on ``devices`` (split over the stores axis), to compile the next program with."""
    if len(devices) == 1:
        sharding = jax.sharding.SingleDeviceSharding(devices[0])
    else:
        sharding = NamedSharding(Mesh(np.asarray(devices), (STORES,)), P(STORES))
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.weak_type, sharding=sharding), out_info
    )


def _take(tree, axes, index: np.ndarray):
    """The stores ``index`` of the leaves that have a batch axis (``axes``: vmap in_axes)."""
    if axes is None:
        return tree
    if axes == 0:
        return jax.tree.map(lambda x: x[index], tree)
    return jax.tree.map(
        lambda a, x: x if a is None else jax.tree.map(lambda y: y[index], x),
        axes,
        tree,
        is_leaf=lambda x: x is None,
    )


def _specs(axes):
    """vmap axes (None, 0 or a pytree of them) -> shard_map specs: batched leaves split over 'stores'."""
    if axes is None:
        return P()
    if axes == 0:
        return P(STORES)
    return jax.tree.map(lambda a: P() if a is None else P(STORES), axes, is_leaf=lambda x: x is None)


def _mesh_map(f, devices: tuple, in_specs):
    """shard_map ``f`` over the stores axis of ``devices``. No collectives: every device runs its slice of
    stores alone (check_vma off: replicated params meet per-store values inside scans)."""
    mesh = Mesh(np.asarray(devices), (STORES,))
    return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=P(STORES), check_vma=False)


def _stored(fn, name: str, env: Env, parts: tuple, **jit_args) -> executables.StoredProgram:
    """``fn`` jitted as a program kept on disk (``rbjax.runners.executables``) when ``env`` and every part can be
    named by value (a part of None: kept in memory only). jit_args: static_argnums, donate_argnums."""
    ident = executables.env_name(env)
    named = None if ident is None or None in parts else (ident, *parts)
    return executables.StoredProgram(fn, name, named, **jit_args)


def _one_process(devices: tuple) -> str | None:
    """The devices' repr, for a program's key; None (not stored) when they span several processes, whose
    programs take every process's arrays (an exported program takes this process's only)."""
    return None if any(d.process_index != jax.process_index() for d in devices) else repr(devices)


def _per_store(name: str, fn, env: Env, env_axes, devices: tuple):
    """jitted ``vmap(fn)`` over (store, params) of ``env``, sharded over ``devices`` (``programs.cached`` per
    name, env, env axes and devices; kept on disk, ``rbjax.runners.executables``)."""

    def build():
        f = jax.vmap(fn, in_axes=(0, env_axes))
        if len(devices) > 1:
            f = _mesh_map(f, devices, (P(STORES), _specs(env_axes)))
        return _stored(f, f"rollout.{name}", env, (repr(env_axes), _one_process(devices)))

    return programs.cached(f"rollout.{name}", build, env, (repr(env_axes), devices))


def observer(env: Env, env_axes, devices: tuple):
    """jitted [B] ``env.observe``."""
    return _per_store("observe", env.observe, env, env_axes, devices)


def compiled(env: Env, policy: Policy, records: str, policy_axes, env_axes, devices: tuple = ()):
    """(reset, chunk) programs (``executables.StoredProgram``: call them, or ``.compile(*args)``): repeated
    rollouts compile once per (env, env axes, devices) for the reset and per (env, policy, records, axes,
    devices) for the days, and a new process loads them from disk where the policy is an rbjax function."""

    def build():
        advance = jax.vmap(
            _one_store(env, policy, records), in_axes=(policy_axes, env_axes, 0, 0, 0, None, None)
        )
        if len(devices) > 1:
            inner, specs = advance, (_specs(policy_axes), _specs(env_axes), P(STORES), P(STORES), P(STORES))
            advance = lambda pp, ep, obs, state, key, first, days: _mesh_map(
                lambda *a: inner(*a, first, days), devices, specs
            )(pp, ep, obs, state, key)
        stored = (
            executables.policy_name(policy),
            records,
            repr(policy_axes),
            repr(env_axes),
            _one_process(devices),
        )
        return _stored(advance, "rollout.days", env, stored, static_argnums=(6,), donate_argnums=(2, 3))

    parts = (policy, records, repr(policy_axes), repr(env_axes), devices)
    return _per_store("reset", env.reset, env, env_axes, devices), programs.cached(
        "rollout.days", build, env, parts
    )

"""How many stores one jitted call can run: the memory a rollout needs, estimated per store and held against the
memory at hand (the host's for CPUs, the device's otherwise). ``benchmarks/memory.py`` holds the estimates
against measured peaks."""

from __future__ import annotations

import os
from collections.abc import Sequence

import jax
import numpy as np

from rbjax import programs
from rbjax.env import Env
from rbjax.results.records import summarize
from rbjax.runners import executables
from rbjax.state import Action

# measured on XLA:CPU (benchmarks/memory.py, docs/performance.md): a 1,024-store reset peaks 0.37 MB a store
# above its compilation, 180 oracle days 0.35 MB with summary records; the runtime and compiling the two
# programs (one after the other) take ~1.1 GB (256 stores: a 1.25 GB peak)
PEAK_PER_STATE = 6
RESET_PER_STATE = 4
FIXED_BYTES = 1_200_000_000
FREE_SHARE = 0.5
CPU_MAX_CHUNK = 4096
ACCELERATOR_CHUNK = 4096  # stores per device when the device's memory limit is unknown


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


def state_shape(env: Env):
    """One store's EnvState as shapes and dtypes (``rbjax.files.snapshots.state_template``)."""
    from rbjax.files.snapshots import state_template

    return state_template(env)


def store_bytes(env: Env) -> int:
    """Bytes of one store's state (found by a trace of the reset, kept on disk: ``executables.remembered``)."""
    return executables.remembered("rollout.store_bytes", env_parts(env), lambda: nbytes(state_shape(env)))


def env_parts(env: Env) -> tuple | None:
    """The env's name as a key of values kept on disk (``executables.remembered``); None for an env that has
    none (kept in memory only)."""
    ident = executables.env_name(env)
    return None if ident is None else (ident,)


def record_bytes(env: Env, records: str) -> int:
    """Bytes of one store-day's records: "summary" (DaySummary) or "full" (DayInfo) (found by a trace of the
    step, kept on disk: ``executables.remembered``)."""

    def trace() -> int:
        key, params, state = jax.random.key(0), env.default_params(), state_shape(env)
        info = jax.eval_shape(lambda s: env.step(key, s, Action.noop(s), params)[-1], state)
        return nbytes(info if records == "full" else jax.eval_shape(summarize, info))

    parts = env_parts(env)
    remember = lambda: executables.remembered(  # noqa: E731
        "rollout.record_bytes", None if parts is None else (*parts, records), trace
    )
    return programs.cached("memory.record_bytes", remember, env, (records,))


def nbytes(tree) -> int:
    """Bytes of every leaf of ``tree`` (arrays or shape-dtype structs)."""
    return sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))

"""Use every CPU core: split the host into several XLA devices, one per core.

XLA runs one CPU device's program largely on one core, so ``rollout`` (which shards stores over
``jax.devices()``) only uses a multi-core CPU fully when the host is split. Call ``split_cpu`` right
after importing rbjax, before any JAX computation. GPUs are unaffected. For several hosts, run the same
script on each after ``jax.distributed.initialize(coordinator_address, num_processes, process_id)``;
``jax.devices()`` then spans all hosts and ``rollout`` shards over all of them (see the README).
"""
from __future__ import annotations

import os

import jax


def split_cpu(n: int | None = None) -> int:
    """Expose ``n`` CPU devices (default: the number of cores); returns n. Must run before JAX starts."""
    n = os.cpu_count() or 1 if n is None else int(n)
    if n < 1:
        raise ValueError(f"split_cpu needs n >= 1, got {n}")
    from jax._src import xla_bridge
    if xla_bridge.backends_are_initialized():
        raise RuntimeError("split_cpu must run before the first JAX computation (the CPU backend is already "
                           "started); call it right after importing rbjax")
    if n > 1:   # one thread per device: the devices, not Eigen's pool, share the cores
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
    jax.config.update("jax_num_cpu_devices", n)
    return n

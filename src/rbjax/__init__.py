"""rbjax: the RetailBench supermarket as a vectorised, JIT-compiled JAX engine."""

from rbjax.perf.devices import guard_cpu_compiler

guard_cpu_compiler()  # before any JAX computation: see rbjax.devices

from rbjax import policies
from rbjax.config import EnvConfig
from rbjax.data import Catalog, CatalogError, load_catalog
from rbjax.env import Env
from rbjax.files.record_files import RecordsWriter
from rbjax.params import EnvParams, World
from rbjax.perf import devices
from rbjax.results import metrics
from rbjax.runners.rollout import rollout, rollout_chunks
from rbjax.runners.sweep import SweepResult, grid, sweep
from rbjax.shipped import PPO_CHECKPOINT, STUDENT_CHECKPOINTS  # noqa: F401  (public paths)
from rbjax.state import Action, EnvState, Observation

__all__ = [
    "Action",
    "Catalog",
    "CatalogError",
    "Env",
    "EnvConfig",
    "EnvParams",
    "EnvState",
    "Observation",
    "World",
    "PPO_CHECKPOINT",
    "RecordsWriter",
    "SweepResult",
    "devices",
    "grid",
    "load_catalog",
    "metrics",
    "policies",
    "rollout",
    "rollout_chunks",
    "setup",
    "sweep",
]
__version__ = "0.1.0"


def setup(devices: int | None = None, cache: str | None = "default") -> None:
    """Set JAX up as the ``rbjax`` command does: a persistent compilation cache and, on a CPU, one device per core.

    Call it once, right after ``import rbjax`` and before any JAX computation (creating an array counts): the
    CPU device split can only happen before JAX's backend starts, and raises RuntimeError after.

    devices: CPU devices to split the host into (``rbjax.devices.split_cpu``; None: one per core, 1: no split,
    so one device with XLA's multi-threaded kernels). GPUs are unaffected.
    cache: folder of JAX's persistent compilation cache, so a program compiled once (same shapes, same
    devices) loads from disk in the next process; "default": $JAX_COMPILATION_CACHE_DIR, else
    ~/.cache/rbjax/xla; None or "none": no cache. A folder that cannot be written to is reported on stderr
    and the cache left off.
    """
    import os
    import sys

    import jax

    from rbjax.perf.devices import split_cpu

    if cache == "default":
        cache = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(
            os.path.expanduser("~"), ".cache", "rbjax", "xla"
        )
    if cache is not None and str(cache).lower() != "none":
        try:
            os.makedirs(cache, exist_ok=True)
            writable = os.access(cache, os.W_OK)
        except OSError:
            writable = False
        if writable:
            jax.config.update("jax_compilation_cache_dir", str(cache))
        else:
            print(
                f"rbjax: the cache folder {cache} is not writable; running without the compilation cache",
                file=sys.stderr,
            )
    split_cpu(devices)

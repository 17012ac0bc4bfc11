"""rbjax: the RetailBench supermarket as a vectorised, JIT-compiled JAX engine."""

from rbjax.perf.devices import guard_cpu_compiler

guard_cpu_compiler()  # before any JAX computation: see rbjax.devices

from rbjax import policies
from rbjax.config import EnvConfig
from rbjax.data import Catalog, CatalogError, load_catalog
from rbjax.env import Env
from rbjax.params import EnvParams, World
from rbjax.perf import devices
from rbjax.runners import metrics
from rbjax.runners.record_files import RecordsWriter
from rbjax.runners.rollout import rollout, rollout_chunks
from rbjax.runners.sweep import SweepResult, grid, sweep
from rbjax.shipped import PPO_CHECKPOINT
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
    "sweep",
]
__version__ = "0.1.0"

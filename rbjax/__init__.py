"""rbjax: the RetailBench supermarket as a vectorised, JIT-compiled JAX engine."""
from rbjax.config import EnvConfig
from rbjax.data import Catalog, CatalogError, load_catalog
from rbjax.env import Env
from rbjax.params import EnvParams, World
from rbjax.rollout import rollout
from rbjax.state import Action, EnvState, Observation

__all__ = ["Action", "Catalog", "CatalogError", "Env", "EnvConfig", "EnvParams", "EnvState", "Observation", "World",
           "load_catalog", "rollout"]
__version__ = "0.1.0"

"""rbjax: the RetailBench supermarket as a vectorised, JIT-compiled JAX engine."""
from rbjax.data import Catalog, CatalogError, load_catalog

__all__ = ["Catalog", "CatalogError", "load_catalog"]
__version__ = "0.1.0"

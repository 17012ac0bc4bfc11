"""Static configuration: everything that fixes array shapes or trace structure.

A change here recompiles; everything a sweep may vary lives in ``rbjax.params.EnvParams`` instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rbjax.counts import need_count
from rbjax.data.catalog import Catalog

GROUPINGS = ("20", "ref19")
EPISODE_DAYS = 180  # the paper's episode: every default of days and horizon reads this one constant


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """Shapes and structure of one store.

    category_of: [J] demand category per product (power-mean groups, review gain, demand-side news).
    grouping "20" uses the data folders (Fabric Softeners its own category); "ref19" the reference's
    upc.json labels, where Fabric Softeners count as Frozen Entrees (``docs/model.md``, "Decisions").
    """

    category_of: tuple[int, ...]
    num_categories: int = 20
    num_suppliers: int = 5
    lot_slots: int = 8  # inventory lots per product (store + capacity-waiting parts share a lot)
    pending_slots: int = 8  # ring of arrival days; must exceed the longest lead time (7)
    review_window: int = 60  # days of daily review counts kept exactly (the rating window)
    sales_window: int = 30  # days of (price, units) sales history kept
    news_slots: int = 20
    history_days: int = 93  # simulated pre-opening days (1991-06-06 .. 1991-09-06 for the default opening)
    grouping: str = "20"
    float64: bool = False
    supplier_attempts: int = (
        50  # supplier worlds drawn per product, one kept by the selection rule (1: no rule)
    )

    def __post_init__(self):
        if self.grouping not in GROUPINGS:
            raise ValueError(f"EnvConfig.grouping must be one of {GROUPINGS}, got {self.grouping!r}")
        if self.pending_slots < 8:
            raise ValueError(
                f"EnvConfig.pending_slots must be >= 8 (lead times reach 7 days), got {self.pending_slots}"
            )
        if self.num_suppliers < 2:
            raise ValueError(
                f"EnvConfig.num_suppliers must be >= 2 (the diversity rule needs a best and a bad supplier), "
                f"got {self.num_suppliers}"
            )
        need_count("EnvConfig.supplier_attempts", self.supplier_attempts)
        if self.lot_slots < 1 or self.history_days < self.review_window:
            raise ValueError("EnvConfig: lot_slots must be >= 1 and history_days >= review_window")

    @classmethod
    def from_catalog(cls, catalog: Catalog, grouping: str = "20", **overrides) -> EnvConfig:
        cats = catalog.category if grouping == "20" else catalog.category_ref19
        return cls(
            category_of=tuple(int(c) for c in cats),
            num_categories=catalog.num_categories,
            grouping=grouping,
            **overrides,
        )

    @property
    def num_products(self) -> int:
        return len(self.category_of)

    @property
    def float_dtype(self):
        return np.float64 if self.float64 else np.float32

    @property
    def category_grid(self) -> np.ndarray:
        """[G, S] product index of the s-th member of category g, or -1 (S = largest category)."""
        cats = np.asarray(self.category_of)
        size = max(1, int(np.bincount(cats, minlength=self.num_categories).max()))
        grid = -np.ones((self.num_categories, size), np.int32)
        for g in range(self.num_categories):
            members = np.flatnonzero(cats == g)
            grid[g, : len(members)] = members
        return grid

"""Validation at the Python boundary: every ``EnvParams`` leaf and any policy's params.

Each ``EnvParams`` leaf has a documented kind (float or integer), trailing shape and valid range
(``PARAM_SPEC``); leading axes are allowed (a sweep or a per-store batch). ``check_params`` raises a
``ValueError`` naming the leaf and what was expected. Inside ``jit`` nothing is checked (values are traced):
``rollout``, ``sweep`` and ``Env.reset`` called outside ``jit`` check concrete params.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from rbjax.config import EnvConfig
from rbjax.params import EnvParams

Rule = Callable[[np.ndarray], bool]
_any = lambda x: True
_pos = lambda x: bool((x > 0).all())
_nonneg = lambda x: bool((x >= 0).all())
_unit = lambda x: bool(((x >= 0) & (x <= 1)).all())
_ordered = lambda x: bool((x[..., 0] <= x[..., 1]).all())

# leaf -> (kind "f" float / "i" integer, trailing shape, rule, what the rule says). Shape symbols:
# J products, G categories, T days of the data window.
PARAM_SPEC: dict[str, tuple[str, tuple, Rule, str]] = {
    "initial_funds": ("f", (), _nonneg, ">= 0"),
    "rent": ("f", (), _nonneg, ">= 0"),
    "capacity": ("i", (), _pos, ">= 1"),
    "shelf_capacity": ("i", (), _nonneg, "in 0..J"),
    "max_units_per_order": ("i", (), _pos, ">= 1"),
    "neg_funds_days": ("i", (), _pos, ">= 1"),
    "horizon": ("i", (), _pos, ">= 1"),
    "open_day": ("i", (), _nonneg, "a day of the data window"),
    "rho": ("f", (), _pos, "> 0"),
    "alpha": ("f", ("J",), _any, "finite"),
    "beta": ("f", ("J",), _any, "finite"),
    "beta_s": ("f", ("J",), _any, "finite"),
    "beta_c": ("f", ("J",), _any, "finite"),
    "sigma": ("f", ("J",), _nonneg, ">= 0"),
    "shelf_life": ("i", ("J",), _pos, ">= 1"),
    "price_min": ("f", ("J",), _pos, "> 0"),
    "price_max": ("f", ("J",), _pos, "> 0"),
    "price_p30": ("f", ("J",), _pos, "> 0"),
    "price_p70": ("f", ("J",), _pos, "> 0"),
    "review_ratio": ("f", (), _unit, "in [0, 1]"),
    "history_review_ratio": ("f", (), _unit, "in [0, 1]"),
    "anchor_rating": ("f", ("J",), lambda x: bool(((x >= 1) & (x <= 5)).all()), "in [1, 5]"),
    "review_poly": ("f", ("G", 5), _any, "finite"),
    "news_ratios": (
        "f",
        (4,),
        lambda x: _nonneg(x) and bool((x.sum(-1) > 0).all()),
        ">= 0 with a positive sum",
    ),
    "news_weights": ("f", (4,), _any, "finite"),
    "news_scale": ("f", (), _nonneg, ">= 0"),
    "news_cap": ("f", (), _nonneg, ">= 0"),
    "supply_category": ("i", ("J",), _nonneg, "category indices in 0..G-1"),
    "quality_bands": ("f", (7, 2), _ordered, "rows (low, high) with low <= high"),
    "price_bands": ("f", (5, 2), lambda x: _pos(x) and _ordered(x), "rows (low, high) with 0 < low <= high"),
    "copula_rho": (
        "f",
        ("J", 2),
        lambda x: bool(((x >= -1) & (x <= 1)).all()) and _ordered(x),
        "rows (low, high) in [-1, 1] with low <= high",
    ),
    "cycle_range": (
        "i",
        (2,),
        lambda x: bool((x >= 1).all() and (x <= np.iinfo(np.int16).max).all()) and _ordered(x),
        "(low, high) with 1 <= low <= high <= 32767 (tier cycles are stored as int16)",
    ),
    "cost_series_start": ("i", ("J",), _any, "calendar days (negative: before the data window)"),
    "traffic": ("f", ("T",), _nonneg, ">= 0"),
    "base_cost": ("f", ("T", "J"), _pos, "> 0"),
    "week_index": ("i", ("T",), _nonneg, ">= 0"),
}


def is_concrete(tree) -> bool:
    """True when no leaf of ``tree`` is a tracer (so its values can be checked on the host)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(tree))


def _fail(name: str, expected: str, x: np.ndarray) -> ValueError:
    shown = x if x.size <= 8 else f"{x.ravel()[:8]} ... (shape {x.shape})"
    return ValueError(f"EnvParams.{name} must be {expected}, got {shown}")


def check_params(params: EnvParams, config: EnvConfig) -> None:
    """Check every leaf's kind, shape and range, and the ranges that tie leaves together."""
    if not isinstance(params, EnvParams):
        raise TypeError(f"expected EnvParams, got {type(params).__name__}")
    J, G = config.num_products, config.num_categories
    T = int(np.shape(params.traffic)[-1])
    sizes = {"J": J, "G": G, "T": T}
    for name, (kind, shape, rule, says) in PARAM_SPEC.items():
        x = np.asarray(getattr(params, name))
        want = tuple(sizes.get(s, s) for s in shape)
        if x.ndim < len(want) or x.shape[x.ndim - len(want) :] != want:
            raise ValueError(f"EnvParams.{name} must have trailing shape {want}, got shape {x.shape}")
        if kind == "i" and x.dtype.kind not in "iu":
            raise ValueError(
                f"EnvParams.{name} is an integer leaf, got dtype {x.dtype} (cast it with np.int32)"
            )
        if kind == "f" and x.dtype.kind != "f":
            raise ValueError(f"EnvParams.{name} is a float leaf, got dtype {x.dtype}")
        if kind == "f" and not np.isfinite(x).all():
            raise _fail(name, f"finite and {says}", x)
        if not rule(x):
            raise _fail(name, says, x)
    _check_joint(params, config, T)


def _check_joint(params: EnvParams, config: EnvConfig, T: int) -> None:
    order = ("price_min", "price_p30", "price_p70", "price_max")
    for lo, hi in zip(order, order[1:]):
        if (np.asarray(getattr(params, lo)) > np.asarray(getattr(params, hi))).any():
            raise ValueError(f"EnvParams.{lo} exceeds {hi} for some product ({' <= '.join(order)} must hold)")
    J = config.num_products
    if (np.asarray(params.shelf_capacity) > J).any():
        raise _fail("shelf_capacity", f"in 0..{J}", np.asarray(params.shelf_capacity))
    if (np.asarray(params.supply_category) >= config.num_categories).any():
        raise _fail(
            "supply_category",
            f"category indices in 0..{config.num_categories - 1}",
            np.asarray(params.supply_category),
        )
    if (np.asarray(params.cost_series_start) >= T).any():
        raise _fail(
            "cost_series_start",
            f"calendar days before the end of the {T}-day window",
            np.asarray(params.cost_series_start),
        )
    open_day, horizon = np.asarray(params.open_day), np.asarray(params.horizon)
    if (open_day < config.history_days).any() or (open_day + horizon + config.pending_slots > T).any():
        raise ValueError(
            f"EnvParams.open_day/horizon: the episode needs days open_day-{config.history_days} .. "
            f"open_day+horizon+{config.pending_slots} inside the {T}-day data window; got open_day "
            f"{open_day}, horizon {horizon}"
        )
    if params.world is not None:
        _check_world(params.world, config)


def _check_world(world, config: EnvConfig) -> None:
    shape = (config.num_products, config.num_suppliers)
    lo, hi = np.asarray(world.transport_min), np.asarray(world.transport_max)
    if lo.shape[-2:] != shape or hi.shape[-2:] != shape:
        raise ValueError(f"EnvParams.world transport ranges must have trailing shape {shape}, got {lo.shape}")
    if not ((lo >= 1).all() and (lo <= hi).all() and (hi < config.pending_slots).all()):
        raise ValueError(
            f"EnvParams.world transport ranges must satisfy 1 <= min <= max < {config.pending_slots} "
            "(the pending ring's length)"
        )
    if (np.asarray(world.cycle_len) < 1).any():
        raise ValueError("EnvParams.world.cycle_len must be >= 1")


def check_policy_params(policy_params: Any, name: str = "policy params") -> None:
    """Every float leaf finite, and the params' own ``check()`` when they define one."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(policy_params)[0]:
        x = np.asarray(leaf)
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            where = jax.tree_util.keystr(path, simple=True, separator=".")
            raise ValueError(
                f"{name}: {where or 'value'} must be finite, got {x if x.size <= 8 else x.ravel()[:8]}"
            )
    if dataclasses.is_dataclass(policy_params) and hasattr(policy_params, "check"):
        policy_params.check()

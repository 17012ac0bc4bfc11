"""Parameter sweeps: many (policy params, env params) points times N seeds in batched, jitted rollouts.

>>> result = rbjax.sweep(env, oracle, OracleParams.default(), env.default_params(),
...                      rbjax.grid(multiplier=[2, 4, 6], shelf_capacity=[30, 40]), seeds=64)
>>> result.summary["final_net_worth"]          # mean, sd, quantiles per point
>>> result.plot("final_net_worth", x="multiplier", y="shelf_capacity", path="net_worth.png")  # saved there

Only the swept leaves get a batch axis (``vmap`` in_axes 0); every other leaf is shared, so a sweep never
copies the catalogue tables per store. Seed s uses the same key at every point (common random numbers),
so differences between points are paired. The stores run through ``rollout_chunks``: batches larger than
``batch_size`` (default: what fits in memory) run in equal chunks, which compile once.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import pandas as pd

from rbjax.config import EPISODE_DAYS
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.results import metrics
from rbjax.runners.rollout import rollout_chunks


def grid(**values: Sequence[Any]) -> list[dict[str, Any]]:
    """Cartesian product of parameter values: ``grid(a=[1, 2], b=[3])`` -> [{a: 1, b: 3}, {a: 2, b: 3}]."""
    names = list(values)
    return [dict(zip(names, combo)) for combo in itertools.product(*(list(values[n]) for n in names))]


@dataclasses.dataclass
class SweepResult:
    table: pd.DataFrame  # one row per (point, seed): parameter columns, point, seed, metrics
    summary: pd.DataFrame  # one row per point (index: parameter values), (metric, statistic) columns
    names: list[str]  # swept parameter columns
    seconds: float  # wall time, compilation included
    store_days: int

    def plot(
        self,
        metric: str = "final_net_worth",
        x: str | None = None,
        y: str | None = None,
        path: str | os.PathLike | None = None,
        **kwargs,
    ):
        """Error bars of ``metric`` against parameter ``x`` (default: the first swept one), or with ``y`` a heat
        map over two (``rbjax.results.plots.plot_sweep``). Returns the matplotlib Figure; with ``path`` it is
        also saved there (the format from the file name's ending, e.g. .png or .pdf)."""
        from rbjax.results.plots import plot_sweep

        fig = plot_sweep(self.summary, metric, x or self.names[0], y, **kwargs)
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig


def _fields(obj) -> list[str]:
    return [f.name for f in dataclasses.fields(obj)]


def _resolve(name: str, policy_params, env_params: EnvParams) -> tuple[str, str]:
    """'policy.x' / 'env.x' / bare 'x' -> (scope, field); a clear error for unknown or ambiguous names."""
    scope, _, field = name.rpartition(".")
    in_policy = (
        policy_params is not None
        and dataclasses.is_dataclass(policy_params)
        and field in _fields(policy_params)
    )
    in_env = field in _fields(env_params) and field != "world"
    if scope == "policy" and in_policy or scope == "" and in_policy and not in_env:
        return "policy", field
    if scope == "env" and in_env or scope == "" and in_env and not in_policy:
        return "env", field
    if scope == "" and in_policy and in_env:
        raise ValueError(
            f"sweep parameter {name!r} is both a policy and an env field: write 'policy.{field}' or "
            f"'env.{field}'"
        )
    policy_fields = _fields(policy_params) if dataclasses.is_dataclass(policy_params) else []
    known = sorted(set(policy_fields) | (set(_fields(env_params)) - {"world"}))
    raise ValueError(
        f"sweep parameter {name!r} is not a field of the policy params or the env params; known: {known}"
    )


def _column(base, field: str, values: list) -> np.ndarray:
    """[P, *shape] the sweep values of ``field`` in its leaf's dtype and shape, or a clear error: numbers only;
    whole numbers within range for an integer leaf (500 is also a valid float leaf); 0 or 1 for a True / False
    leaf. A float past the leaf's range becomes inf, which the params check names."""
    ref = np.asarray(getattr(base, field))
    x = [np.asarray(v) for v in values]
    if any(v.dtype.kind not in "biuf" for v in x):
        raise ValueError(f"sweep values for {field!r} must be numbers, got {values}")
    if ref.dtype.kind in "iu":
        if not all(np.all(v == np.round(v)) for v in x):
            whole = f"{type(base).__name__}.{field} is an integer leaf: sweep values must be whole numbers"
            raise ValueError(f"{whole}, got {values}")
        info = np.iinfo(ref.dtype)
        if not all(((v >= info.min) & (v <= info.max)).all() for v in x):
            raise ValueError(
                f"sweep values for {field!r} must fit {ref.dtype} ({info.min:,} .. {info.max:,}), got {values}"
            )
    if ref.dtype.kind == "b" and not all(np.isin(v.astype(float), (0.0, 1.0)).all() for v in x):
        raise ValueError(f"sweep values for {field!r} must be 0 or 1 (a True / False leaf), got {values}")
    try:
        with np.errstate(over="ignore"):
            return np.stack([np.broadcast_to(v.astype(ref.dtype), ref.shape) for v in x])
    except ValueError as e:
        raise ValueError(f"sweep values for {field!r} must broadcast to its shape {ref.shape}: {e}") from None


def _batched(base, columns: dict[str, np.ndarray], stores: np.ndarray):
    """(params with the swept leaves' ``columns`` [P, ...] stacked over ``stores``, vmap axes pytree)."""
    if not columns:
        return base, None
    axes = dict.fromkeys(_fields(base)) | dict.fromkeys(columns, 0)
    return base.replace(**{f: col[stores] for f, col in columns.items()}), base.replace(**axes)


def sweep(
    env: Env,
    policy: Callable,
    policy_params,
    env_params: EnvParams,
    points: Sequence[Mapping[str, Any]],
    seeds: int = 16,
    days: int = EPISODE_DAYS,
    key: int | jax.Array = 0,
    batch_size: int | None = None,
    progress: bool = False,
) -> SweepResult:
    """Run every point of ``points`` (a list of {parameter: value}, e.g. from ``grid``) with ``seeds`` seeds.

    Parameter names are policy or env params fields ('multiplier', 'shelf_capacity'), prefixed with
    'policy.' or 'env.' when a name exists in both. batch_size: stores per jitted call (default: what fits in
    memory, ``memory.auto_store_chunk``). Returns a SweepResult (tidy table, per-point summary).
    """
    points = [dict(p) for p in points]
    if not points or seeds < 1 or days < 1 or batch_size is not None and batch_size < 1:
        raise ValueError("sweep needs at least one point, seeds >= 1, days >= 1 and batch_size >= 1")
    names = list(points[0])
    if any(list(p) != names for p in points):
        raise ValueError(f"every sweep point must set the same parameters {names}")
    scoped = {n: _resolve(n, policy_params, env_params) for n in names}
    values = {
        scope: {f: [p[n] for p in points] for n, (s, f) in scoped.items() if s == scope}
        for scope in ("policy", "env")
    }
    base = {"policy": policy_params, "env": env_params}
    columns = {scope: {f: _column(base[scope], f, v) for f, v in values[scope].items()} for scope in values}
    for i, p in enumerate(points):  # each point's env params must be valid on their own
        try:
            env.check_params(env_params.replace(**{f: col[i] for f, col in columns["env"].items()}))
        except ValueError as e:
            raise ValueError(f"sweep point {i} {p}: {e}") from None
    n_stores = len(points) * seeds
    ids = np.arange(n_stores)
    p_params, p_axes = _batched(policy_params, columns["policy"], ids // seeds)
    e_params, e_axes = _batched(env_params, columns["env"], ids // seeds)
    seed_keys = jax.random.split(jax.random.key(key) if isinstance(key, int) else key, seeds)
    start = time.perf_counter()
    chunks = rollout_chunks(
        env,
        policy,
        p_params,
        e_params,
        seed_keys[ids % seeds],
        days,
        policy_axes=p_axes,
        env_axes=e_axes,
        store_chunk=batch_size,
        progress=days if progress else False,
    )
    outs = [metrics.store_metrics(c.records) for c in chunks]
    table = pd.concat(outs, ignore_index=True)
    params_cols = pd.DataFrame({n: [points[i][n] for i in ids // seeds] for n in names})
    table = pd.concat(
        [params_cols, pd.DataFrame({"point": ids // seeds, "seed": ids % seeds}), table], axis=1
    )
    return SweepResult(
        table=table,
        summary=metrics.summary(table, by=names),
        names=names,
        seconds=time.perf_counter() - start,
        store_days=n_stores * days,
    )


def check_value(env, policy_params, env_params: EnvParams, name: str, value) -> None:
    """ValueError, in the params check's words, when sweep parameter ``name`` (as ``sweep`` takes it) cannot
    take ``value``: a command line checks each swept value before any work, naming its flag."""
    scope, field = _resolve(name, policy_params, env_params)
    base = policy_params if scope == "policy" else env_params
    changed = base.replace(**{field: _column(base, field, [value])[0]})
    if scope == "env":
        env.check_params(changed)
    elif hasattr(changed, "check"):
        changed.check()

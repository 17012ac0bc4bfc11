"""Snapshots of a batch of stores: save, load, and fork into branches (``rbjax.runners.continuation`` continues
them bit for bit).

A rollout's randomness for store ``b`` comes from its episode key ``keys[b]`` alone: the reset uses
``split(keys[b])[0]`` and rollout day ``d`` (0 = the opening day) uses ``fold_in(split(keys[b])[1], d)``,
split into the policy's and the day's key (``rbjax.runners.rollout``). So the episode keys ``[B]`` and the
number of days run so far pin down the rest of the key stream, and a ``Snapshot`` holds exactly that:

- ``state``: the EnvState batch, leaves ``[B, ...]``;
- ``keys``: ``[B]`` episode keys (typed PRNG keys);
- ``day``: rollout days completed (the next day run is ``day``; not ``state.day``, which stops at a store's
  end);
- ``params``: the EnvParams the run used (None: ``env.default_params()``);
- the engine config (EnvConfig) and a fingerprint of the catalogue, which ``load`` checks against the env.

``continuation.rollout_from`` continues a batch from any (state, keys, day): its records are the uninterrupted
run's records of days ``day .. day + days - 1``. ``fork`` copies every store into ``groups`` branches with the same
key stream (common random numbers: every branch sees the same demand luck) or independent ones.

>>> recs, state = rbjax.rollout(env, oracle, OracleParams.default(), params, keys, days=30)
>>> snapshots.save("day30.npz", env, state, keys, day=30)
>>> snap = snapshots.load("day30.npz", env)
>>> more, final = continuation.resume(env, oracle, OracleParams.default(), snap, days=30)  # days 30 .. 59
>>> branches = snapshots.fork(snap, groups=2)                                            # [2B] stores
>>> both = snapshots.per_branch([OracleParams.default(), OracleParams.default(multiplier=4.0)], len(keys))
>>> recs, final = continuation.resume(env, oracle, both, branches, days=30, policy_axes=0)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rbjax import programs
from rbjax.checks import is_concrete, need_count
from rbjax.config import EnvConfig
from rbjax.data.catalog import FIELDS, Catalog
from rbjax.env import Env
from rbjax.files.record_files import atomic_file
from rbjax.files.untrusted import bad, json_object, need, need_array, need_dict, need_int, read_npz, shown
from rbjax.params import EnvParams
from rbjax.state import EnvState

FORMAT = "rbjax-snapshot"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A batch of ``B`` stores between two days (see the module docstring).

    state: EnvState, leaves [B, ...]. keys: [B] typed PRNG episode keys. day: rollout days completed.
    params: EnvParams the run used (unbatched, or leaves with a leading [B] axis), None for the defaults.
    config: the EnvConfig saved. catalog: the catalogue fingerprint saved (``catalog_fingerprint``).
    """

    state: EnvState
    keys: jax.Array
    day: int
    params: EnvParams | None = None
    config: EnvConfig | None = None
    catalog: dict | None = None

    @property
    def num_stores(self) -> int:
        return int(self.keys.shape[0])

    def env_params(self, env: Env) -> EnvParams:
        """The params to continue with: the saved ones, else ``env.default_params()``."""
        return env.default_params() if self.params is None else self.params


# ---------------------------------------------------------------------------------------------- fingerprints
def catalog_fingerprint(catalog: Catalog) -> dict[str, str]:
    """{field: sha256 hex} of every catalogue field (``rbjax.data.catalog.FIELDS``: the arrays and the static
    names, dtype and shape included) plus ``index_0``, and "all": the hash of them all. ``path`` is left out:
    the same data loaded from another folder has the same fingerprint."""
    out = {}
    for name in (*FIELDS, "index_0"):
        value = getattr(catalog, name)
        h = hashlib.sha256()
        if isinstance(value, np.ndarray) or hasattr(value, "dtype"):
            arr = np.ascontiguousarray(np.asarray(value))
            h.update(f"{arr.dtype.str}{arr.shape}".encode())
            h.update(arr.tobytes())
        else:
            h.update(json.dumps(value if isinstance(value, str) else list(value)).encode())
        out[name] = h.hexdigest()
    out["all"] = hashlib.sha256("".join(out[k] for k in sorted(out)).encode()).hexdigest()
    return out


def params_fingerprint(params: EnvParams) -> str:
    """sha256 hex of a params pytree: every leaf's path, dtype, shape and bytes."""
    h = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        arr = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{jax.tree_util.keystr(path)}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def _config_dict(config: EnvConfig) -> dict:
    return {f.name: _jsonable(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _jsonable(x):
    return list(x) if isinstance(x, tuple) else x


# ---------------------------------------------------------------------------------------------- save / load
def save(
    path: str | os.PathLike,
    env: Env,
    state: EnvState,
    keys: jax.Array,
    day: int,
    params: EnvParams | None = None,
) -> None:
    """Write a batch of stores to ``path`` (an ``.npz`` file), atomically (``atomic_file``: a temporary
    file, then ``os.replace``): a crash leaves the old file or the new one, never a torn one.

    state: EnvState, leaves [B, ...] (device or host arrays), e.g. ``rollout``'s final state. keys: [B] the
    typed PRNG episode keys the run started from (``fork``'s keys after a fork). day: rollout days the batch
    has run (``rollout(..., days=day)``, or the ``day + days`` of a continuation). params: the EnvParams the
    run used, if not ``env.default_params()`` (unbatched, or leaves with a leading [B] axis).
    """
    keys = check_keys(keys)
    day = check_day(day)
    check_batch_state(env, state, keys.shape[0], "state")
    arrays: dict[str, np.ndarray] = {}
    for p, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        arrays["state" + jax.tree_util.keystr(p)] = np.asarray(leaf)
    arrays["keys"] = np.asarray(jax.random.key_data(keys))
    if params is not None:
        if is_concrete(params):
            env.check_params(params)
        for p, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
            arrays["params" + jax.tree_util.keystr(p)] = np.asarray(leaf)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "day": day,
        "stores": int(keys.shape[0]),
        "key_impl": str(jax.random.key_impl(keys)),
        "config": _config_dict(env.config),
        "catalog": catalog_fingerprint(env.catalog),
        "params": None if params is None else params_fingerprint(params),
    }
    arrays["meta"] = np.asarray(json.dumps(meta, sort_keys=True))
    with atomic_file(os.fspath(path), "wb") as f:
        np.savez(f, **arrays)


def load(path: str | os.PathLike, env: Env) -> Snapshot:
    """Read a snapshot written by ``save`` for ``env``; arrays come back as host (numpy) arrays, keys as
    typed PRNG keys.

    Raises ValueError naming the difference when the file was saved with another EnvConfig (the field), another
    catalogue (the catalogue field), or holds a state that does not fit ``env`` (the state field); and when the
    file is not a snapshot or its params do not match its fingerprint.
    """
    path = os.fspath(path)
    arrays = read_npz(path, "snapshot file")
    meta = arrays.pop("meta", None)
    if meta is None:
        raise ValueError(f"{path}: not an rbjax snapshot (no 'meta' entry)")
    if meta.dtype.kind != "U" or meta.shape != ():
        raise bad(path, "meta", "a JSON string", meta)
    meta = json_object(path, meta, "snapshot file")
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(
            f"{path}: not an rbjax snapshot of version {VERSION} "
            f"(format {shown(meta.get('format'))}, version {shown(meta.get('version'))})"
        )
    day = need_int(path, "meta.day", meta.get("day"), 0)
    for name in ("config", "catalog"):
        need_dict(path, f"meta.{name}", meta.get(name))
    if "params" not in meta or (meta["params"] is not None and not isinstance(meta["params"], str)):
        raise bad(path, "meta.params", "a fingerprint (a string) or null", meta.get("params", "absent"))
    _check_config(path, meta["config"], env.config)
    _check_catalog(path, meta["catalog"], env.catalog)
    impl = need(path, "meta.key_impl", meta.get("key_impl"), str, "a PRNG implementation name")
    try:
        width = jax.random.key_data(jax.random.key(0, impl=impl)).shape
    except (TypeError, ValueError, KeyError):
        raise bad(path, "meta.key_impl", "a PRNG implementation name", impl) from None
    stores = need_int(path, "meta.stores", meta.get("stores"), 1)
    raw = need_array(path, "keys", arrays.pop("keys", None), (stores, *width), np.uint32)
    keys = jax.random.wrap_key_data(jnp.asarray(raw), impl=impl)
    n = int(keys.shape[0])
    state = _unflatten(path, "state", state_template(env), arrays, n)
    params = None
    if meta["params"] is not None:
        template = env.default_params()
        if any(k.startswith("params.world.") for k in arrays):
            template = template.replace(world=state_template(env).world)
        params = _unflatten(path, "params", template, arrays, n, per_store=True)
        if params_fingerprint(params) != meta["params"]:
            raise ValueError(f"{path}: the saved params do not match their fingerprint (a damaged file?)")
    if arrays:
        raise ValueError(f"{path}: unexpected entries {sorted(arrays)[:5]}")
    return Snapshot(state, keys, day, params, EnvConfig(**_config_args(meta["config"])), meta["catalog"])


def _config_args(saved: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}


def _check_config(path: str, saved: dict, config: EnvConfig) -> None:
    here = _config_dict(config)
    for name in sorted(set(saved) | set(here)):
        if saved.get(name) != here.get(name):
            a, b = saved.get(name, "<absent>"), here.get(name, "<absent>")
            if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
                i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
                a, b = f"[{i}] = {a[i]}", f"[{i}] = {b[i]}"
            raise ValueError(
                f"{path}: the snapshot was saved with another engine config: EnvConfig.{name} "
                f"is {a} in the snapshot, {b} in this env"
            )


def _check_catalog(path: str, saved: dict, catalog: Catalog) -> None:
    here = catalog_fingerprint(catalog)
    if saved.get("all") == here["all"]:
        return
    differ = [k for k in here if k != "all" and saved.get(k) != here[k]]
    raise ValueError(
        f"{path}: the snapshot was saved with another catalogue: field(s) {', '.join(differ) or 'unknown'} "
        f"differ (this env's catalogue: {catalog.path or 'in memory'})"
    )


def _unflatten(path: str, prefix: str, template, arrays: dict, stores: int, per_store: bool = False):
    """The pytree ``template`` with its leaves read from ``arrays[prefix + keystr]`` (popped); ``stores``: the
    leading batch axis every leaf must have in front of the template leaf's shape (``per_store``: or not, a
    leaf shared by the stores); the dtype must be the template's."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(template)
    names = [prefix + jax.tree_util.keystr(p) for p, _ in flat]
    saved = {k for k in arrays if k.startswith(prefix + ".")}
    if saved != set(names):
        missing, extra = sorted(set(names) - saved), sorted(saved - set(names))
        raise ValueError(
            f"{path}: the snapshot's {prefix} does not fit this env: "
            + "; ".join(
                s for s in (f"missing {missing[:5]}" * bool(missing), f"extra {extra[:5]}" * bool(extra)) if s
            )
        )
    leaves = []
    for name, (_, want) in zip(names, flat):
        x = arrays.pop(name)
        shape = (stores, *want.shape)
        fits = x.shape == shape or (per_store and x.shape == tuple(want.shape))
        if not fits or x.dtype != want.dtype:
            raise ValueError(
                f"{path}: {name} has shape {x.shape} and dtype {x.dtype}, this env expects {shape} {want.dtype}"
            )
        leaves.append(x)
    return jax.tree_util.tree_unflatten(treedef, leaves)


def state_template(env: Env) -> EnvState:
    """One store's EnvState as ShapeDtypeStructs (traced once per env: ``rbjax.programs``)."""
    trace = lambda: jax.eval_shape(env.reset, jax.random.key(0), env.default_params())[1]  # noqa: E731
    return programs.cached("snapshots.state_template", trace, env)


# ---------------------------------------------------------------------------------------------- checks
def check_keys(keys) -> jax.Array:
    if not (isinstance(keys, jax.Array) and jnp.issubdtype(keys.dtype, jax.dtypes.prng_key)):
        raise ValueError(
            "keys must be a 1-D batch of typed PRNG keys (jax.random.key / jax.random.split), "
            f"got {getattr(keys, 'dtype', type(keys))}"
        )
    if keys.ndim != 1:
        raise ValueError(f"keys must be a 1-D batch of PRNG keys, got shape {keys.shape}")
    return keys


def check_day(day) -> int:
    if isinstance(day, bool) or int(day) != day or int(day) < 0:
        raise ValueError(f"day must be an int >= 0 (rollout days completed), got {day!r}")
    return int(day)


def check_batch_state(env: Env, state, stores: int, what: str) -> None:
    """``state``: an EnvState batch of ``stores`` stores for ``env``; ValueError naming the first misfit."""
    if not isinstance(state, EnvState):
        raise ValueError(f"{what} must be an EnvState batch, got {type(state).__name__}")
    flat, want_leaves = jax.tree_util.tree_flatten_with_path(state)[0], jax.tree.leaves(state_template(env))
    if len(flat) != len(want_leaves):
        raise ValueError(f"{what} has {len(flat)} arrays, an EnvState of this env {len(want_leaves)}")
    for (p, x), want in zip(flat, want_leaves):
        shape = (stores, *want.shape)
        if tuple(x.shape) != shape:
            raise ValueError(
                f"{what}{jax.tree_util.keystr(p)} has shape {tuple(x.shape)}, expected {shape} "
                f"({stores} stores: the batch size of the keys)"
            )


# ---------------------------------------------------------------------------------------------- forks
def fork(snapshot_or_state, keys: jax.Array | None = None, groups: int = 2, common_random: bool = True):
    """Copy each of ``B`` stores into ``groups`` branches: ``B * groups`` stores, store-major (store ``b``'s
    branch ``g`` is at index ``b * groups + g``).

    snapshot_or_state: a Snapshot (``keys`` then defaults to its keys), or an EnvState batch, leaves [B, ...],
    with ``keys`` [B] its episode keys. common_random: every branch of a store keeps the store's key, so every
    branch draws the same random numbers each day (common random numbers: two policies on two branches see the
    same demand luck, their difference carries no luck of its own); False: branch ``g`` gets the episode key
    ``fold_in(key, g)``, an independent stream derived from the store's key and the branch index. The supplier
    world (its quotes and news) is part of the state and shared by the branches either way.
    Returns a Snapshot (its params unchanged: repeat per-store params with ``repeat_stores``) for a Snapshot, else
    (state [B * groups, ...], keys [B * groups]). Continue with ``continuation.resume`` at the same day.
    """
    groups = need_count("groups", groups, whole=True)
    snap = snapshot_or_state if isinstance(snapshot_or_state, Snapshot) else None
    state = snap.state if snap is not None else snapshot_or_state
    if keys is None:
        if snap is None:
            raise ValueError("fork of a state needs its keys ([B] episode keys)")
        keys = snap.keys
    keys = check_keys(keys)
    if not isinstance(state, EnvState):
        raise ValueError(f"fork takes a Snapshot or an EnvState batch, got {type(state).__name__}")
    n = int(keys.shape[0])
    for p, x in jax.tree_util.tree_flatten_with_path(state)[0]:
        if x.ndim < 1 or x.shape[0] != n:
            raise ValueError(
                f"state{jax.tree_util.keystr(p)} has batch size {x.shape[0] if x.ndim else 'none'}, "
                f"the keys {n}: they must match"
            )
    new_state = repeat_stores(state, groups)
    if common_random:
        new_keys = jnp.repeat(keys, groups, axis=0)
    else:
        branch = jnp.tile(jnp.arange(groups, dtype=jnp.uint32), n)
        new_keys = jax.vmap(jax.random.fold_in)(jnp.repeat(keys, groups, axis=0), branch)
    if snap is None:
        return new_state, new_keys
    return dataclasses.replace(snap, state=new_state, keys=new_keys)


def repeat_stores(tree, groups: int):
    """Every leaf [B, ...] -> [B * groups, ...], each store repeated ``groups`` times in a row (the order of
    ``fork``): for per-store params of a forked batch. Host leaves stay host arrays."""
    groups = need_count("groups", groups, whole=True)
    return jax.tree.map(
        lambda x: (
            np.repeat(x, groups, axis=0) if isinstance(x, np.ndarray) else jnp.repeat(x, groups, axis=0)
        ),
        tree,
    )


def per_branch(branch_params: Sequence[Any], stores: int):
    """Per-store params for a forked batch: ``branch_params[g]`` (one pytree per branch, same structure) on
    branch ``g`` of each of ``stores`` stores. Leaves [stores * G, ...]; pass ``policy_axes=0`` (or
    ``env_axes=0``)."""
    if not branch_params:
        raise ValueError("per_branch needs the params of at least one branch")
    need_count("stores", stores)
    stacked = jax.tree.map(lambda *x: jnp.stack([jnp.asarray(y) for y in x]), *branch_params)
    return jax.tree.map(lambda x: jnp.tile(x, (int(stores),) + (1,) * (x.ndim - 1)), stacked)

"""An agent run from a slices folder (``rbjax agents run --from-states DIR --at D``): ``open_from_states`` reads
the folder (``rbjax.runners.slices_folder``), makes the env of the run that saved it, and opens its stores on
the snapshot's day with their tool history (``slices.open_slice``, ``history``); ``slice_settings`` is what
``run.json`` records of such a run.

>>> env, sl, settings = open_from_states("slices/oracle", at=90, days=30, stores=8)
>>> records = run_policy_slice(sl, *rbjax.policies.make("base_stock", env), out="runs/bs_d90")   # [8, 30]
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

import jax
import numpy as np

from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs import history
from rbjax.agents.runs.loop import empty_ledger, make_stores
from rbjax.agents.runs.slices import AgentSlice, check_state, open_slice, store_list
from rbjax.env import Env, OptionError, make_env
from rbjax.runners.paired import check_slice_days

SLICE_FIELDS = ("from_states", "at", "reference", "source_policy", "stores", "days")


def open_from_states(
    folder: str,
    at: str | int | None = None,
    stores: int | Sequence[int] | None = None,
    days: int | None = None,
    grouping: str | None = None,
    supplier_attempts: int | None = None,
    seed: int | None = None,
    data: str | None = None,
    reference: str | None = None,
    progress: int = 0,
    note: Callable[[str], None] | None = None,
    **tool_options,
) -> tuple[Env, AgentSlice, dict]:
    """(env, AgentSlice, settings) for a run from the slices folder ``folder``: the env of the slices' run (its
    slices.json: grouping, supplier attempts, data), the snapshot's first ``stores`` stores (default: all),
    or the snapshot's stores listed in ``stores`` (indices, any order), on the snapshot's day (``at``: needed
    when the folder holds several) with their tool history (the folder's ``tools_day_{D:03d}.npz`` when it
    holds them; else made by playing the slices' policy, and kept there for the next run: ``history``; for a
    list, the history of the snapshot's first stores up to the largest index listed), for ``days`` days
    (default: to the horizon), beside ``reference`` (a policy name; default: the oracle).

    grouping, supplier_attempts, seed: None, or the slices' own (anything else is refused: the env must be the
    one the slices were made in); data: the catalogue folder (default: the slices'). progress: a line every N
    days of the warm-up. note: called with a line saying where the stores' past comes from (the CLI prints it).
    tool_options: as ``make_stores``. settings: the run's resolved settings, {``SLICE_FIELDS``, grouping,
    supplier_attempts, seed, data}, with ``snapshot_stores`` (the list) when ``stores`` is a list
    (``slice_settings`` keeps what run.json records). Raises ValueError (one
    line, worded with the command's flags) for a folder, manifest, snapshot or option that does not fit.
    """
    from rbjax import policies
    from rbjax.runners import snapshots
    from rbjax.runners.slices_folder import open_slices_folder

    start = open_slices_folder(folder, at)
    day, manifest = start.day, start.manifest
    source = manifest["policy"]
    made = _made_with(folder, manifest, grouping, supplier_attempts, seed)
    data = manifest.get("data") if data is None else data
    try:
        env, _ = make_env(data, made["grouping"], made["supplier_attempts"], manifest.get("days", 180))
    except OptionError as e:
        raise ValueError(e.as_flag()) from None
    snap = snapshots.load(start.path, env)
    listed = stores is not None and not isinstance(stores, int | np.integer)
    if listed:
        try:
            ids = store_list(stores, snap.num_stores).tolist()
        except ValueError as e:
            raise ValueError(f"the snapshot of day {day} in {folder}: {e}") from None
        _, days = _slice_size(snap, env, folder, day, None, days)
        need = max(ids) + 1  # the history file holds the snapshot's first stores
    else:
        stores, days = _slice_size(snap, env, folder, day, stores, days)
        need = stores
    try:
        policy, policy_params = policies.make(
            source, env, manifest.get("checkpoint"), manifest.get("greedy", False)
        )
    except ValueError as e:
        raise ValueError(f"--from-states {folder}: its policy {source}: {e}") from None
    reference = reference or "oracle"
    like = empty_ledger(env, snap.env_params(env))
    past = history.stored(folder, day, start.path, like, need)
    if note is not None:
        how = (
            "its tool history from " + history.history_name(day)
            if past
            else f"playing {day} days of {source}"
        )
        which = f"stores {ids}" if listed else f"{stores} stores"
        note(f"slice: day {day} of {folder}, {which}; {how}")
    if past is None and listed:  # the history of the first stores up to the last one listed, kept
        warmed = _warm_stores(env, snap, need, policy, policy_params, progress)
        past = history.keep(folder, day, start.path, warmed, note)
    sl = open_slice(
        env,
        snap,
        policy,
        policy_params,
        days=days,
        stores=ids if listed else stores,
        reference=policies.make(reference, env),
        progress=progress,
        past=past,
        **tool_options,
    )
    if past is None:
        history.keep(folder, day, start.path, sl.stores, note)
    settings = {
        "from_states": os.path.abspath(folder),
        "at": day,
        "reference": reference,
        "source_policy": source,
        "stores": len(ids) if listed else stores,
        "days": days,
        **made,
        "data": data,
    }
    if listed:
        settings["snapshot_stores"] = ids
    return env, sl, settings


def _warm_stores(env: Env, snap, n: int, policy, policy_params, progress: int):
    """The tools of the snapshot's first ``n`` stores brought to its day by the slices' policy
    (``history.warm_up``), checked against the snapshot (``check_state``): the history ``rbjax lm tasks``
    keeps (``rbjax.lm.opening``)."""
    sub = dataclasses.replace(
        snap, state=jax.tree.map(lambda x: np.asarray(x)[:n], snap.state), keys=snap.keys[:n]
    )
    params = snap.env_params(env)
    engine = AgentEngine(env, params, sub.keys)
    stores = make_stores(engine, None)
    history.warm_up(engine, stores, policy, policy_params, snap.day, progress)
    check_state(engine, sub)
    return stores


def _made_with(folder: str, manifest: dict, grouping, supplier_attempts, seed) -> dict:
    """{grouping, supplier_attempts, seed} of the slices' run (its manifest); ValueError (one line) when the
    caller asks for another: the env and the stores must be the ones the slices were made in."""
    made = {k: manifest[k] for k in ("grouping", "supplier_attempts", "seed")}
    for name, given in (("grouping", grouping), ("supplier_attempts", supplier_attempts)):
        if given is not None and given != made[name]:
            flag = "--" + name.replace("_", "-")
            raise ValueError(
                f"{flag} {given}: the slices in {folder} were made with {flag} {made[name]} (leave it out)"
            )
    if seed is not None and seed != made["seed"]:
        raise ValueError(
            f"--seed {seed}: the slices in {folder} are stores of --seed {made['seed']} (leave it out)"
        )
    return made


def _slice_size(snap, env, folder: str, day: int, stores: int | None, days: int | None) -> tuple[int, int]:
    """(stores, days) of the slice: the snapshot's stores and the days to its horizon by default; ValueError
    (one line) for more stores than the snapshot holds or days past the horizon."""
    if stores is None:
        stores = snap.num_stores
    elif stores > snap.num_stores:
        raise ValueError(
            f"--stores {stores}: the snapshot of day {day} in {folder} holds {snap.num_stores} stores"
        )
    horizon = int(np.max(np.asarray(snap.env_params(env).horizon)))
    if days is None:
        days = horizon - day
    check_slice_days(day, days, horizon, flag="--days")
    return stores, days


def slice_settings(settings: dict) -> dict:
    """What run.json records of a run from a slices folder (its identity): ``SLICE_FIELDS`` of
    ``open_from_states``'s settings, and ``snapshot_stores`` (store_{s}/ is snapshot store
    ``snapshot_stores[s]``) when the run took a list of stores."""
    return {k: settings[k] for k in (*SLICE_FIELDS, "snapshot_stores") if k in settings}

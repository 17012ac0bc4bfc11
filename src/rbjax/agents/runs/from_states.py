"""An agent run from a slices folder (``rbjax agents run --from-states DIR --at D``): ``open_from_states`` reads
the folder (``rbjax.files.slices_folder``), makes the env of the run that saved it, and opens its stores on
the snapshot's day with their tool history (``slices.open_slice``, ``history``); ``slice_settings`` is what
``run.json`` records of such a run.

>>> env, sl, settings = open_from_states("slices/oracle", at=90, days=30, stores=8)
>>> records = run_policy_slice(sl, *rbjax.policies.make("base_stock", env), out="runs/bs_d90")   # [8, 30]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from rbjax.agents.runs import history
from rbjax.agents.runs.day_start import DayStart, read_day
from rbjax.agents.runs.slices import AgentSlice, open_slice, store_list
from rbjax.arguments import ArgumentError
from rbjax.env import Env
from rbjax.files.slices_folder import open_slices_folder
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
    line; an ``ArgumentError`` naming the argument) for a folder, manifest, snapshot or option that does not fit.
    """
    from rbjax import policies

    made = _made_with(folder, open_slices_folder(folder, at).manifest, grouping, supplier_attempts, seed)
    start = read_day(folder, at, data)
    ids, stores, days = _slice_size(start, stores, days)
    need = stores if ids is None else max(ids) + 1  # the history file holds the snapshot's first stores
    reference = reference or "oracle"
    past = start.stored_history(need)
    # the source policy only makes a missing history (a language model's run keeps its own: save_states)
    policy, policy_params = start.source_policy() if past is None else (None, None)
    if note is not None:
        how = (
            f"its tool history from {history.history_name(start.day)}"
            if past
            else f"playing {start.day} days of {start.source}"
        )
        which = f"{stores} stores" if ids is None else f"stores {ids}"
        note(f"slice: day {start.day} of {folder}, {which}; {how}")
    if past is None and ids is not None:  # the history of the first stores up to the last one listed, kept
        past = start.make_history(need, progress, note)
    sl = open_slice(
        start.env,
        start.snapshot,
        policy,
        policy_params,
        days=days,
        stores=stores if ids is None else ids,
        reference=policies.make(reference, start.env, greedy=True),  # a learned one as the CLI runs it
        progress=progress,
        past=past,
        **tool_options,
    )
    if past is None:  # played by open_slice after its checks (float fields it adopted in sl.adopted): kept
        history.keep(folder, start.day, start.path, sl.stores, note)
    settings = {
        "from_states": os.path.abspath(folder),
        "at": start.day,
        "reference": reference,
        "source_policy": start.source,
        "stores": stores,
        "days": days,
        **made,
        "data": start.manifest.get("data") if data is None else data,
    }
    if ids is not None:
        settings["snapshot_stores"] = ids
    return start.env, sl, settings


def _made_with(folder: str, manifest: dict, grouping, supplier_attempts, seed) -> dict:
    """{grouping, supplier_attempts, seed} of the slices' run (its manifest); ValueError (one line) when the
    caller asks for another: the env and the stores must be the ones the slices were made in."""
    made = {k: manifest[k] for k in ("grouping", "supplier_attempts", "seed")}
    for name, given in (("grouping", grouping), ("supplier_attempts", supplier_attempts)):
        if given is not None and given != made[name]:
            p = "{" + name + "}"
            raise ArgumentError(
                f"{p} {given}: the slices in {folder} were made with {p} {made[name]} (leave it out)", name
            )
    if seed is not None and seed != made["seed"]:
        raise ArgumentError(
            f"{{seed}} {seed}: the slices in {folder} are stores of {{seed}} {made['seed']} (leave it out)",
            "seed",
        )
    return made


def _slice_size(start: DayStart, stores, days: int | None) -> tuple[list[int] | None, int, int]:
    """(ids, stores, days) of the slice: ``ids`` the snapshot's stores listed in ``stores`` (None when
    ``stores`` is a count or None), ``stores`` how many (default: the snapshot's), ``days`` the days to play
    (default: to the horizon); ValueError (one line) for stores the snapshot does not hold or days past the
    horizon."""
    n, ids = start.snapshot.num_stores, None
    if stores is not None and not isinstance(stores, int | np.integer):
        try:
            ids = store_list(stores, n).tolist()
        except ValueError as e:
            raise ValueError(f"the snapshot of day {start.day} in {start.folder}: {e}") from None
        stores = len(ids)
    else:
        stores = start.count(stores)
    if days is None:
        days = start.horizon - start.day
    check_slice_days(start.day, days, start.horizon, name="days")
    return ids, stores, days


def slice_settings(settings: dict) -> dict:
    """What run.json records of a run from a slices folder (its identity): ``SLICE_FIELDS`` of
    ``open_from_states``'s settings, and ``snapshot_stores`` (store_{s}/ is snapshot store
    ``snapshot_stores[s]``) when the run took a list of stores."""
    return {k: settings[k] for k in (*SLICE_FIELDS, "snapshot_stores") if k in settings}

"""One snapshot day of a slices folder, ready to open stores from: the env it was made in, the snapshot's stores
(numpy) and their tool history (``agents.runs.history``, made once and kept beside the snapshot).

``open_day_start(folder, day)`` is what a session pool and ``make_tasks`` start from; a pool keeps one per
(folder, day) it has opened tasks on.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs import history
from rbjax.agents.runs.loop import empty_ledger, make_stores
from rbjax.agents.runs.slices import check_state
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.runners.snapshots import Snapshot


@dataclasses.dataclass
class DayStart:
    """The stores of the snapshot after ``day`` days of a slices folder: S stores (``snapshot``: state leaves
    [S, ...] numpy, keys [S]), their ``history`` (a ``ToolHistory`` of at least the stores asked for), the env
    and params of the run that saved them, and its manifest (slices.json)."""

    folder: str
    day: int
    manifest: dict
    env: Env
    params: EnvParams
    snapshot: Snapshot
    history: history.ToolHistory

    @property
    def horizon(self) -> int:
        return int(self.params.horizon)

    def open_stores(self, stores: int | None = None) -> list[int]:
        """The first ``stores`` stores (default: all with a history) that are still open on the morning."""
        n = self.history.num_stores if stores is None else min(stores, self.history.num_stores)
        done = np.asarray(self.snapshot.state.done, bool)
        return [s for s in range(n) if not done[s]]

    def row(self, store: int):
        """Store ``store``'s state (leaves without the store axis, numpy) and its episode key."""
        return jax.tree.map(lambda x: np.asarray(x)[store], self.snapshot.state), self.snapshot.keys[store]


def open_day_start(
    folder: str, day: int, stores: int | None = None, days: int | None = None, progress: int = 0, note=None
) -> DayStart:
    """The ``DayStart`` of the snapshot of ``day`` in ``folder``, with the tool history of its first ``stores``
    stores (default: all): read from the folder, or made (by playing the slices' policy, ``history.warm_up``)
    and kept there. days: checked against the horizon when given. ValueError (one line) for a folder, day,
    snapshot or size that does not fit."""
    import os

    from rbjax import policies
    from rbjax.env import OptionError, make_env
    from rbjax.runners import snapshots
    from rbjax.runners.paired import check_slice_days
    from rbjax.runners.slices_folder import open_slices_folder

    folder = os.path.abspath(folder)
    start = open_slices_folder(folder, day)
    manifest = start.manifest
    try:
        env, _ = make_env(
            manifest.get("data"),
            manifest["grouping"],
            manifest["supplier_attempts"],
            manifest.get("days", 180),
        )
    except OptionError as e:
        raise ValueError(e.as_flag()) from None
    snap = snapshots.load(start.path, env)
    params = snap.env_params(env)
    if any(np.ndim(x) for x in jax.tree.leaves(params.horizon)):
        raise ValueError(f"--from-states {folder}: the snapshot's params are per store; tasks need one set")
    S = snap.num_stores if stores is None else stores
    if not 1 <= S <= snap.num_stores:
        raise ValueError(
            f"--stores {S}: the snapshot of day {start.day} in {folder} holds {snap.num_stores} stores"
        )
    if days is not None:
        check_slice_days(start.day, days, int(params.horizon), flag="--days")
    snap = dataclasses.replace(snap, state=jax.tree.map(np.asarray, snap.state), params=params)
    past = history.stored(folder, start.day, start.path, empty_ledger(env, params), S)
    if past is None:
        if note is not None:
            note(f"tool history: playing {start.day} days of {manifest['policy']} for {S} stores of {folder}")
        policy, policy_params = policies.make(
            manifest["policy"], env, manifest.get("checkpoint"), manifest.get("greedy", False)
        )
        warmed = _warm_stores(env, params, snap, S, policy, policy_params, progress)
        past = history.keep(folder, start.day, start.path, warmed, note)
    return DayStart(folder, start.day, manifest, env, params, snap, past)


def _warm_stores(env, params, snap: Snapshot, S: int, policy, policy_params, progress):
    """The tool stores of the first S stores of ``snap`` brought to its day (``history.warm_up``), checked
    against the snapshot (``check_state``)."""
    sub = dataclasses.replace(snap, state=jax.tree.map(lambda x: x[:S], snap.state), keys=snap.keys[:S])
    engine = AgentEngine(env, params, sub.keys)
    stores = make_stores(engine, None)
    history.warm_up(engine, stores, policy, policy_params, snap.day, progress)
    check_state(engine, sub)
    return stores

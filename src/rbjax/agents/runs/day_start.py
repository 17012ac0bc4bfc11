"""One snapshot day of a slices folder, opened once for everything that starts stores from it: the env the run
was made in, the snapshot's stores (numpy) and their tool history (``history``: made once by the one warm-up,
``warm_stores``, and kept beside the snapshot).

``read_day(folder, at)`` reads the folder (``rbjax.files.slices_folder``) and loads the snapshot into the
run's env (``run_env``; ``read_day_in`` into a given one, a session pool's); ``DayStart.history_of`` finds or
makes the stores' tool history; ``seat`` puts snapshot stores into an engine's slots (their state, key and
past): the one way stores of a snapshot enter an agent engine, used by slices (``slices.open_slice``,
``--from-states`` runs), session pools, tasks and the reference gains.

>>> start = read_day("slices/oracle", 30)
>>> start.history = start.history_of(8)                    # read from tools_day_030.npz, or made and kept
>>> engine = AgentEngine(start.env, start.params, start.snapshot.keys[:8])
>>> stores = seat(engine, range(8), start.snapshot, range(8), start.history)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

import jax
import numpy as np

from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs import history
from rbjax.agents.runs.loop import empty_ledger, make_stores, store_tools
from rbjax.agents.tools.store import StoreTools
from rbjax.arguments import ArgumentError
from rbjax.env import Env, EnvOptions
from rbjax.files.snapshots import Snapshot, params_fingerprint
from rbjax.params import EnvParams

FLOAT_RTOL = 1e-5  # float leaves: the warm-up may differ from the saved state by a few ulps (see check_state)


@dataclasses.dataclass
class DayStart:
    """The stores of the snapshot after ``day`` days in a slices folder: S stores (``snapshot``: state leaves
    [S, ...] numpy, keys [S], params the run's), the env and params of the run that saved them, its manifest
    (slices.json), the snapshot file's ``path``, and ``history`` (a ``ToolHistory`` of the first stores, or
    None until one is found or made: ``history_of``)."""

    folder: str
    day: int
    manifest: dict
    path: str
    env: Env
    params: EnvParams
    snapshot: Snapshot
    history: history.ToolHistory | None = None

    @property
    def horizon(self) -> int:
        """The run's days per store (the largest, when params are per store)."""
        return int(np.max(np.asarray(self.params.horizon)))

    @property
    def run_id(self) -> tuple:
        """What stores of one engine must share, and so the days they start from: the catalogue folder, the
        grouping, the supplier attempts and the params (``snapshots.params_fingerprint``)."""
        m = self.manifest
        return (m.get("data"), m["grouping"], m["supplier_attempts"], params_fingerprint(self.params))

    @property
    def source(self) -> str:
        """The name of the policy that played the run (and makes the tool history); ``agent:MODEL`` for a
        language model's run (``agents run --save-states``)."""
        m = self.manifest
        return f"agent:{m['agent']}" if m["policy"] == "agent" else m["policy"]

    def open_stores(self, stores: int | None = None) -> list[int]:
        """The first ``stores`` stores (default: all with a history) that are still open on the morning."""
        n = self.history.num_stores if stores is None else min(stores, self.history.num_stores)
        done = np.asarray(self.snapshot.state.done, bool)
        return [s for s in range(n) if not done[s]]

    def count(self, stores: int | None) -> int:
        """The number of stores asked for: ``stores`` (1 .. the snapshot's), or the snapshot's all when None;
        ``ArgumentError`` naming ``stores`` otherwise."""
        n = self.snapshot.num_stores
        S = n if stores is None else stores
        if not 1 <= S <= n:
            raise ArgumentError(
                f"{{stores}} {S}: the snapshot of day {self.day} in {self.folder} holds {n} stores", "stores"
            )
        return int(S)

    def source_policy(self) -> tuple:
        """(policy, params) of the run's policy (its checkpoint and greediness from the manifest); ValueError
        (one line) naming the folder when it cannot be made."""
        from rbjax import policies

        m = self.manifest
        if m["policy"] == "agent":
            raise ArgumentError(
                f"{{from_states}} {self.folder}: its stores were played by the model {m['agent']}, whose days "
                f"cannot be played again: its tool history ({history.history_name(self.day)}) must be there",
                "from_states",
            )
        try:
            plan = policies.PlanSettings.from_dict(m["plan"]) if m.get("plan") else None
            return policies.make(m["policy"], self.env, m.get("checkpoint"), m.get("greedy", False), plan)
        except ValueError as e:
            raise ArgumentError(
                f"{{from_states}} {self.folder}: its policy {m['policy']}: {e}", "from_states"
            ) from None

    def stored_history(self, stores: int) -> history.ToolHistory | None:
        """The tool history beside the snapshot when it holds at least the first ``stores`` stores, else None;
        ValueError (one line) for a file that is there but not this snapshot's."""
        like = empty_ledger(self.env, self.params)
        return history.stored(self.folder, self.day, self.path, like, stores)

    def make_history(self, stores: int, progress: int = 0, note=None) -> history.ToolHistory:
        """The tool history of the first ``stores`` stores, made by the run's policy (``warm_stores``) and kept
        beside the snapshot for the next opening (``history.keep``; ``note`` says when it cannot be)."""
        first = take_stores(self.snapshot, np.arange(stores))
        warmed, _ = warm_stores(self.env, self.params, first, *self.source_policy(), progress)
        return history.keep(self.folder, self.day, self.path, warmed, note)

    def history_of(self, stores: int, progress: int = 0, note=None) -> history.ToolHistory:
        """``stored_history(stores)``, or else ``make_history`` (``note`` is told before the days are played)."""
        past = self.stored_history(stores)
        if past is None:
            if note is not None:
                note(
                    f"tool history: playing {self.day} days of {self.source} for {stores} stores of {self.folder}"
                )
            past = self.make_history(stores, progress, note)
        return past


def run_env(folder: str, data: str | None = None) -> Env:
    """The env of the run that saved the slices folder ``folder``: its grouping, supplier attempts and days, the
    catalogue ``data`` (default the run's); one per process for these options, so the days of one folder share
    its compiled programs. ValueError (one line; an ``OptionError`` names the option) for one that does not fit."""
    from rbjax import programs
    from rbjax.files.slices_folder import read_manifest

    m = read_manifest(folder)
    data = m.get("data") if data is None else data
    env, _ = programs.env_and_params(
        EnvOptions(data, m["grouping"], m["supplier_attempts"], m.get("days", EnvOptions.days))
    )
    return env


def read_day(folder: str, at: str | int | None = None, data: str | None = None) -> DayStart:
    """The ``DayStart`` of the snapshot of day ``at`` in the slices folder ``folder`` (``at`` is needed when it
    holds several), without its tool history, in the env of the run that saved it (``run_env``; the catalogue
    ``data``, default the run's): ``read_day_in``."""
    return read_day_in(run_env(folder, data), folder, at)


def read_day_in(env: Env, folder: str, at: str | int | None = None) -> DayStart:
    """``read_day`` into ``env`` (a session pool's own): the snapshot (state leaves numpy, params the saved ones
    or the env's defaults). ValueError (one line) for a folder, manifest, day or snapshot that does not fit."""
    from rbjax.files import snapshots
    from rbjax.files.slices_folder import open_slices_folder

    start = open_slices_folder(folder, at)
    snap = snapshots.load(start.path, env)
    params = snap.env_params(env)
    snap = dataclasses.replace(snap, state=jax.tree.map(np.asarray, snap.state), params=params)
    return DayStart(folder, start.day, start.manifest, start.path, env, params, snap)


def take_stores(snapshot: Snapshot, rows: Sequence[int]) -> Snapshot:
    """The snapshot of the stores ``rows`` ([n] indices, in that order): state leaves [n, ...], keys [n]."""
    rows = np.asarray(rows, np.int64)
    state = jax.tree.map(lambda x: np.asarray(x)[rows], snapshot.state)
    return dataclasses.replace(snapshot, state=state, keys=snapshot.keys[rows])


def seat(
    engine: AgentEngine,
    slots: Sequence[int],
    snapshot: Snapshot,
    rows: Sequence[int],
    past: history.ToolHistory | None = None,
    **tool_options,
) -> list[StoreTools]:
    """Put the snapshot's stores ``rows`` ([n] indices) into the engine's ``slots`` ([n]): each slot takes its
    store's state and episode key (``AgentEngine.load``), and gets new tools (``StoreTools``, no trace) whose
    past is the store's in ``past`` (``ToolHistory.give``; None: an empty ledger, for a policy's play that
    reads no past). Returns the [n]
    tools, in the order of ``slots``. tool_options: as ``StoreTools`` (code limits, explicit news)."""
    slots, rows = [int(s) for s in slots], [int(r) for r in rows]
    sub = take_stores(snapshot, rows)
    engine.load(slots, sub.state, sub.keys)
    tools = [store_tools(engine, slot, **tool_options) for slot in slots]
    if past is not None:
        for row, store in zip(rows, tools, strict=True):
            past.give(row, store)
    return tools


def warm_stores(
    env: Env,
    params: EnvParams,
    snapshot: Snapshot,
    policy,
    policy_params,
    progress: int = 0,
    max_lines: int = 256,
    **tool_options,
) -> tuple[list[StoreTools], list[str]]:
    """The tools of every store of ``snapshot`` (S stores) brought to its day by playing ``policy`` from day 0
    through the tools (``history.warm_up``, one engine step a day for all), and the engine checked against the
    snapshot (``check_state``): ([S] StoreTools, the float fields reproduced only to within ``FLOAT_RTOL``).
    progress: a line every N days (0: none); max_lines, tool_options: the engine's order lines and the tools'
    options (``StoreTools``; a history kept in a slices folder is made with none)."""
    engine = AgentEngine(env, params, snapshot.keys, max_lines)
    stores = make_stores(engine, None, **tool_options)
    history.warm_up(engine, stores, policy, policy_params, snapshot.day, progress)
    return stores, check_state(engine, snapshot)


def keep_histories(
    folder: str, days: Sequence[int], stores: int | None = None, progress: int = 0, note=None
) -> None:
    """Make the tool histories of the snapshot days ``days`` of ``folder`` that it does not hold yet (of the
    first ``stores`` stores; default: all) in one play of the slices' policy through the tools, from day 0 to
    the last of them, each checked against its snapshot (``check_state``) and kept beside it
    (``history.keep``) as the play passes its day: several days cost the last one's play, not the sum of
    theirs. ``note`` is told before each day's part of the play. Nothing to do for one day or none."""
    starts = [read_day(folder, d) for d in sorted(set(days))]
    todo = [s for s in starts if s.stored_history(s.count(stores)) is None]
    if len(todo) < 2:
        return
    first, S = todo[0], todo[0].count(stores)
    engine = AgentEngine(first.env, first.params, first.snapshot.keys[:S])
    tools = make_stores(engine, None)
    policy = first.source_policy()
    for start in todo:
        if note is not None:
            note(f"tool history: playing to day {start.day} of {start.source} for {S} stores of {folder}")
        history.warm_up(engine, tools, *policy, start.day, progress)
        check_state(engine, take_stores(start.snapshot, np.arange(S)))
        history.keep(folder, start.day, start.path, tools, note)


def check_state(engine: AgentEngine, snapshot: Snapshot, rtol: float = FLOAT_RTOL) -> list[str]:
    """The engine's first S stores hold the snapshot's state: every integer and boolean leaf bit for bit,
    every float leaf bit for bit or within ``rtol`` relative (NaN equal to NaN); else ValueError naming the
    first field that differs. Returns the float fields that differ within ``rtol`` ("field: n entries, at
    most u ulps"); ``rtol=0``: every leaf bit for bit.

    Why a tolerance: the agent engine's step and ``rollout``'s scan are different XLA programs, and XLA:CPU may
    contract a multiply-add into one FMA in one of them and not in the other, so a float that is not in the
    records (the 30-day supplier averages, ``suppliers.log``) can come out an ulp apart after a few days while
    every record is identical."""
    S = snapshot.num_stores
    got = jax.device_get(engine.state)
    near = []
    for (path, a), b in zip(
        jax.tree_util.tree_flatten_with_path(got)[0], jax.tree.leaves(snapshot.state), strict=True
    ):
        a, b, name = np.asarray(a)[:S], np.asarray(b), "state" + jax.tree_util.keystr(path)
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(
                f"the warm-up did not reproduce the snapshot: {name} is {a.dtype}{list(a.shape)} in the "
                f"engine, {b.dtype}{list(b.shape)} in the snapshot"
            )
        differs = _differs(a, b, rtol, name)
        if differs is None:
            continue
        if isinstance(differs, str):
            near.append(differs)
            continue
        raise ValueError(
            f"the warm-up did not reproduce the snapshot: {name} differs (store {int(differs[0][0])}, "
            f"{len(differs)} entries) after {snapshot.day} days of the source policy through the tools "
            "(another policy, checkpoint, catalogue or params than the run that saved it?)"
        )
    return near


def _differs(a: np.ndarray, b: np.ndarray, rtol: float, name: str):
    """None when ``a`` equals ``b`` (NaN equal to NaN); a line "name: n entries, at most u ulps" when floats
    differ within ``rtol`` only; else the [k, ndim] indices of the entries that differ."""
    inexact = np.issubdtype(a.dtype, np.inexact)
    same = (a == b) | (np.isnan(a) & np.isnan(b)) if inexact else a == b
    if same.all():
        return None
    if inexact:
        with np.errstate(invalid="ignore", over="ignore"):
            within = np.isclose(a, b, rtol=rtol, atol=0.0, equal_nan=True) & np.isfinite(a - b)
        if within.all():
            ulps = np.abs(a - b)[~same] / np.spacing(np.maximum(np.abs(a), np.abs(b))[~same])
            return f"{name}: {int((~same).sum())} entries, at most {int(np.round(ulps.max()))} ulps"
        same = same | within
    return np.argwhere(~same)


def open_day_start(
    folder: str,
    day: int,
    stores: int | None = None,
    progress: int = 0,
    note: Callable[[str], None] | None = None,
) -> DayStart:
    """The ``DayStart`` of the snapshot of ``day`` in ``folder`` with the tool history of its first ``stores``
    stores (default: all), read from the folder or made and kept there (``DayStart.history_of``): what a
    session pool and ``make_tasks`` start from (each checks its slices against the horizon:
    ``runners.paired.check_slice_days``), in the env of the run (``run_env``): ``open_day_start_in``."""
    return open_day_start_in(run_env(folder), folder, day, stores, progress, note)


def open_day_start_in(
    env: Env,
    folder: str,
    day: int,
    stores: int | None = None,
    progress: int = 0,
    note: Callable[[str], None] | None = None,
) -> DayStart:
    """``open_day_start`` into ``env`` (a session pool's own). ValueError (one line) for a folder, day, snapshot
    or size that does not fit, and for per-store params (tasks need one set)."""
    folder = os.path.abspath(folder)
    start = read_day_in(env, folder, day)
    if any(np.ndim(x) for x in jax.tree.leaves(start.params.horizon)):
        raise ArgumentError(
            f"{{from_states}} {folder}: the snapshot's params are per store; tasks need one set",
            "from_states",
        )
    S = start.count(stores)
    start.history = start.history_of(S, progress, note)
    return start

"""An agent run of a tasks file (``rbjax agents run --tasks FILE``): the tasks ``rbjax lm tasks`` writes for
language-model training, played by the same agents as ``--from-states`` and scored as sessions score them.

``group_tasks`` splits the tasks into runs, one per (slices folder, snapshot day, days, tail): each run takes
over exactly the tasks' stores of that snapshot (``open_from_states`` with a list of stores) and writes a
``--from-states`` run's files into its own folder (``TaskGroup.name``, e.g. ``day_030_2d``). After the run,
``play_tail`` plays the tasks' continuation: the reference policy for ``tail`` more days of the same stores,
through the tools, as a session's continuation is played. ``score`` reads each task's result: the store's
net-worth gain over the slice and its continuation (a store gone bankrupt keeps the net worth it went
bankrupt with) and the rewards of ``rbjax.lm.rewards`` with the task's reference gain and scale, the numbers a
session (``rbjax.lm.session``) with the same decisions gets. ``write_table`` writes them as ``tasks.csv``.

>>> groups = group_tasks(read_tasks("tasks.jsonl"))
>>> env, sl, settings = open_from_states(g.folder, g.day, g.stores, g.days, reference=g.reference, ...)
>>> records = run_policy_slice(sl, policy, params, out=f"runs/x/{g.name}")
>>> rows = score(g, sl, records, play_tail(g, sl))   # {line: row}
>>> write_table(rows, "runs/x/tasks.csv")
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rbjax import policies
from rbjax.agents.runs.folder import prepare_folder, run_files
from rbjax.agents.runs.history import warm_up
from rbjax.arguments import ArgumentError
from rbjax.files.record_files import atomic_file
from rbjax.lm import rewards
from rbjax.lm.tasks import Task

TABLE = "tasks.csv"
COLUMNS = (
    "id",
    "store",
    "day",
    "days",
    "tail",
    "run",
    "start_net_worth",
    "net_worth",
    "gain",
    "reference_gain",
    "scale",
    "relative",
    "beat",
    "survived",
)
SHARED = ("source_policy", "reference", "seed", "grouping", "supplier_attempts", "data")  # per run


@dataclasses.dataclass(frozen=True)
class TaskGroup:
    """The tasks of one run: snapshot day ``day`` of the slices folder ``folder`` for ``days`` days, then a
    continuation of ``tail`` days.
    stores: the snapshot's stores the run takes over (the tasks' stores, sorted, each once; store_{s}/ of
    the run's folder is ``stores[s]``). name: the run's folder in ``--out``. The fields the tasks share
    (``SHARED``): the env the slices were made in and the reference they are compared with."""

    folder: str
    day: int
    days: int
    tail: int
    tasks: tuple[Task, ...]
    name: str
    lines: tuple[int, ...] = ()  # each task's place in the file (``score``'s keys)

    @property
    def stores(self) -> list[int]:
        """The snapshot's stores the run takes over: the tasks' stores, sorted, each once."""
        return sorted({t.store for t in self.tasks})

    def shared(self, field: str):
        """The value of ``field`` (one of ``SHARED``) that every task of the run holds."""
        return getattr(self.tasks[0], field)

    @property
    def reference(self) -> str:
        """The name of the reference policy the run's tasks are compared with."""
        return self.shared("reference")


def group_tasks(tasks: Sequence[Task]) -> list[TaskGroup]:
    """The runs of ``tasks``, one per (from_states, day, days, tail) in the order they first appear. ValueError
    (one line) when the tasks of one run differ in a ``SHARED`` field (a run has one env and one reference)."""
    keyed: dict[tuple[str, int, int, int], list[int]] = {}
    for i, t in enumerate(tasks):
        keyed.setdefault((os.path.abspath(t.from_states), t.day, t.days, t.tail), []).append(i)
    folders = list(dict.fromkeys(k[0] for k in keyed))
    groups = []
    for (folder, day, days, tail), lines in keyed.items():
        members = [tasks[i] for i in lines]
        first = members[0]
        for t in members[1:]:
            for field in SHARED:
                a, b = getattr(first, field), getattr(t, field)
                if a != b:
                    raise ValueError(
                        f"tasks {first.id} and {t.id} (day {day} of {folder}, {days} days) differ in {field} "
                        f"({a!r}, {b!r}): the tasks of one snapshot day and horizon run together"
                    )
        name = _name(folder, day, days, tail, folders)
        groups.append(TaskGroup(folder, day, days, tail, tuple(members), name, tuple(lines)))
    return groups


def _name(folder: str, day: int, days: int, tail: int, folders: list[str]) -> str:
    """``day_{D:03d}_{N}d`` (``_{K}k`` after it for a continuation of K days); with tasks of several slices
    folders, the folder's name (and its rank, where two folders share a name) before it."""
    name = f"day_{day:03d}_{days}d" + (f"_{tail}k" if tail else "")
    if len(folders) == 1:
        return name
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(folder.rstrip(os.sep))) or "slices"
    if (
        sum(os.path.basename(f.rstrip(os.sep)) == os.path.basename(folder.rstrip(os.sep)) for f in folders)
        > 1
    ):
        base = f"{folders.index(folder)}_{base}"
    return f"{base}_{name}"


def prepare_out(out: str, groups: Sequence[TaskGroup], overwrite: bool = False) -> None:
    """``out`` and each run's folder in it ready (``folder.prepare_folder``): a folder that holds a tasks
    table or a run already is refused unless ``overwrite`` (then those files go first). ValueError (one line)
    for a used or unwritable folder; nothing is written before every folder is checked."""
    table = os.path.join(out, TABLE)
    if not overwrite:
        if os.path.exists(table):
            raise ArgumentError(
                f"{out} holds a tasks run already ({TABLE}): replace it with {{overwrite}}",
                "out",
                "overwrite",
            )
        for g in groups:
            sub = os.path.join(out, g.name)
            if run_files(sub):
                raise ArgumentError(
                    f"{sub} holds a run already: replace it with {{overwrite}}, or choose another {{out}}",
                    "out",
                    "overwrite",
                )
    try:
        os.makedirs(out, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK) or os.path.isdir(table):
            raise ArgumentError(f"{{out}} {out}: cannot write {TABLE} there", "out")
        if os.path.exists(table):
            os.remove(table)
        for g in groups:
            prepare_folder(os.path.join(out, g.name), overwrite=overwrite)
    except OSError as e:
        raise ArgumentError(f"{{out}} {out}: cannot write there ({e.strerror or e})", "out") from None


def check_opened(group: TaskGroup, sl) -> None:
    """The tasks fit the slice opened for them (``AgentSlice`` of ``group.stores``): each task's start net
    worth is its store's in the snapshot. ValueError (one line) for a tasks file made from another snapshot."""
    start = np.asarray(sl.snapshot.state.net_worth, np.float64)
    slot = {s: i for i, s in enumerate(sl.store_ids)}
    for t in group.tasks:
        got = float(start[slot[t.store]])
        if got != t.start_net_worth:
            raise ValueError(
                f"task {t.id}: its start net worth {t.start_net_worth!r} is not store {t.store}'s on day "
                f"{group.day} of {group.folder} ({got!r}): a task of another snapshot"
            )


def play_tail(group: TaskGroup, sl) -> np.ndarray:
    """Play the tasks' continuation on the run's engine (``sl``, an ``AgentSlice`` after its ``days`` days):
    ``group.reference`` for ``group.tail`` more days of every store still open, through the tools as a
    session's continuation is played (``history.warm_up``: the calls of ``history.play_policy_day``), with no
    trace and no decision gaps counted. Returns [S] each engine store's net worth afterwards (float64 of the
    engine's float32). ValueError when a store open after the run is not on the slice's last morning."""
    engine, stop = sl.engine, group.day + group.days
    for s in range(engine.B):
        today = engine.today(s)
        if not today.done and today.day != stop:
            raise ValueError(
                f"{group.name}: store {sl.store_ids[s]} is on day {today.day} after the run, not {stop}"
            )
    if group.tail:
        engine.reference = None
        for store in sl.stores:
            store.trace = None
        warm_up(engine, sl.stores, *policies.make(group.reference, engine.env), stop + group.tail)
    return np.asarray(engine.host["net_worth"], np.float64)[: engine.B]


def score(group: TaskGroup, sl, records, end_net_worth: np.ndarray | None = None) -> dict[int, dict]:
    """{the task's place in the file: its row (``COLUMNS``)} for the tasks of ``group``, from the run's
    records ([S, days] ``DayInfo`` of the stores ``sl.store_ids``) and ``end_net_worth`` ([S], after the
    continuation: ``play_tail``; None: the records' last): its store's net-worth gain over the slice and its
    continuation (as a session counts it: float32 values, their difference in float64) and the rewards of
    ``rbjax.lm.rewards`` with the task's reference gain and scale (``gain``, the gain reward, in dollars;
    ``relative``; ``beat``). survived: the store was open through the run's days."""
    start = np.asarray(sl.snapshot.state.net_worth, np.float64)
    end = np.asarray(records.net_worth, np.float64)[:, -1] if end_net_worth is None else end_net_worth
    alive = np.asarray(records.alive, bool)
    slot = {s: i for i, s in enumerate(sl.store_ids)}
    rows = {}
    for line, t in zip(group.lines or range(len(group.tasks)), group.tasks, strict=True):
        i = slot[t.store]
        gain = float(end[i]) - float(start[i])
        rows[line] = {
            "id": t.id,
            "store": t.store,
            "day": t.day,
            "days": t.days,
            "tail": t.tail,
            "run": group.name,
            "start_net_worth": float(start[i]),
            "net_worth": float(end[i]),
            "gain": rewards.reward("gain", gain, t.reference_gain, t.scale),
            "reference_gain": t.reference_gain,
            "scale": t.scale,
            "relative": rewards.reward("relative", gain, t.reference_gain, t.scale),
            "beat": rewards.reward("beat", gain, t.reference_gain, t.scale),
            "survived": bool(alive[i].all()),
        }
    return rows


def write_table(rows: dict[int, dict], path: str) -> pd.DataFrame:
    """The tasks' rows (``score``'s, of every run) as a CSV in the tasks file's order, written atomically;
    returns the table."""
    table = pd.DataFrame([rows[k] for k in sorted(rows)], columns=list(COLUMNS))
    with atomic_file(path) as f:
        table.to_csv(f, index=False)
    return table


def summary(table: pd.DataFrame) -> str:
    """One line: the tasks, their runs, the mean relative reward and the share beating the reference."""
    return (
        f"{len(table)} tasks in {table['run'].nunique()} runs: mean relative reward "
        f"{table['relative'].mean():+.4f}, {table['beat'].mean():.0%} beat the reference"
    )

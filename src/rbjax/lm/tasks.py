"""Tasks for language models: one row per (snapshot, store, start day, horizon), with the reference's gain.

A task is a store of a slices folder (``rbjax run --policy P --save-states DIR --every D``) taken over on
the morning of day ``day`` for ``days`` days. Its row holds everything needed to open it (the folder, the
day, the store, the env it was made in) and what the reference policy (the oracle by default) gains on the
same slice with the same random numbers (``reference_gain``), so a session's reward is one subtraction.
``make_tasks`` writes the rows as JSON Lines (``write_tasks``), a file dataset libraries read as is;
``read_tasks`` reads them back, every field checked.

>>> tasks = make_tasks("slices/oracle", days=2, at=[30, 90], stores=8)     # 16 tasks
>>> write_tasks(tasks, "tasks.jsonl")
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence

import numpy as np

from rbjax import policies
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs.day_start import keep_histories, open_day_start, seat, take_stores
from rbjax.agents.runs.history import warm_up
from rbjax.arguments import ArgumentError
from rbjax.config import EPISODE_DAYS
from rbjax.counts import is_whole
from rbjax.files.record_files import atomic_file
from rbjax.files.slices_folder import open_slices_folder, read_manifest
from rbjax.lm.panel import MEMBERS, panel_rewards, summarize
from rbjax.lm.rewards import scale
from rbjax.runners.paired import check_slice_days

PROMPT = (
    "You manage store {store} of a supermarket chain from {date} for {days} day(s). Each day, look at the "
    "store with the tools, set prices, choose the shelf and order from suppliers, then call end_today. "
    "Your score is the store's net-worth gain over these days, compared with a reference manager's."
)
TAIL_PROMPT = (
    " After your last day the reference manager runs the store for {tail} more day(s), and the score counts "
    "those days too: the stock and the orders on their way that you leave behind matter."
)
DEFAULT_TAIL = 14  # days of the reference's continuation (docs/lm_training.md, "The reward")


@dataclasses.dataclass(frozen=True)
class Task:
    """One slice: store ``store`` of the slices folder ``from_states`` on the morning of day ``day``, for
    ``days`` decided days, then ``tail`` days of the reference policy (the continuation, ``rewards``).
    reference_gain: the reference policy's net-worth gain over the ``days + tail`` days with the same random
    numbers; start_net_worth: the store's net worth that morning; scale: the reward's divisor
    (``rewards.scale``). prompt: a chat prompt ([{role, content}]) that opens the task. source_policy: the
    policy whose run made the store's state. panel: {member: reward} of ``panel.MEMBERS`` played on the task
    with its random numbers; headroom: what the reference gains over doing nothing (-panel["null"]); spread:
    the panel's largest reward less its smallest (all three None for a task made without the panel)."""

    id: str
    from_states: str
    day: int
    store: int
    days: int
    tail: int
    source_policy: str
    reference: str
    reference_gain: float
    start_net_worth: float
    scale: float
    seed: int
    grouping: str
    supplier_attempts: int
    data: str | None
    prompt: list
    panel: dict | None = None
    headroom: float | None = None
    spread: float | None = None

    def to_row(self) -> dict:
        """The task as a JSON-able row (one line of a tasks file; ``from_row`` reads it back)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row, where: str = "task") -> Task:
        """The task of a tasks file's row (a dict); ValueError (one line) naming ``where`` and the field."""
        return cls(**check_row(row, where))


FIELDS = {
    "id": str,
    "from_states": str,
    "day": int,
    "store": int,
    "days": int,
    "tail": int,
    "source_policy": str,
    "reference": str,
    "reference_gain": float,
    "start_net_worth": float,
    "scale": float,
    "seed": int,
    "grouping": str,
    "supplier_attempts": int,
    "data": (str, type(None)),
    "prompt": list,
}
OPTIONAL = {"panel": dict, "headroom": float, "spread": float}  # None (or absent) for a task without a panel


def check_row(row, where: str) -> dict:
    """``row`` with every ``FIELDS`` entry of the right type (ints as ints, numbers as floats) and the
    ``OPTIONAL`` ones (the panel's: None when absent); extra keys (a dataset's own columns) are dropped.
    ValueError (one line) for a missing or mistyped field."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: a task must be a JSON object, got {type(row).__name__}")
    out = {}
    for name, kind in FIELDS.items():
        if name not in row:
            raise ValueError(f"{where}: field {name!r} is missing")
        v = row[name]
        if kind is float and isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v):
            v = float(v)
        elif kind is int and isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, kind):
            want = {int: "an int", float: "a finite number", str: "a string", list: "a list"}.get(
                kind, "a path or null"
            )
            raise ValueError(f"{where}: field {name!r} must be {want}, got {v!r}"[:300])
        out[name] = v
    for name, kind in OPTIONAL.items():
        v = row.get(name)
        if kind is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if v is not None and (not isinstance(v, kind) or (kind is float and not np.isfinite(v))):
            want = "an object" if kind is dict else "a finite number"
            raise ValueError(f"{where}: field {name!r} must be {want} or null, got {v!r}"[:300])
        if kind is dict and v is not None:
            if not all(
                isinstance(x, int | float) and not isinstance(x, bool) and np.isfinite(x) for x in v.values()
            ):
                raise ValueError(f"{where}: field {name!r} must map names to finite numbers"[:300])
            v = {str(k): float(x) for k, x in v.items()}
        out[name] = v
    for name in ("day", "store", "tail"):
        if out[name] < 0:
            raise ValueError(f"{where}: field {name!r} must be >= 0, got {out[name]}")
    if out["days"] < 1 or out["scale"] <= 0:
        raise ValueError(
            f"{where}: fields 'days' and 'scale' must be positive, got {out['days']}, {out['scale']}"
        )
    return out


def task_id(policy: str, seed: int, day: int, store: int, days: int, tail: int = 0) -> str:
    """``oracle-s0-d030-st0003-n2`` (and ``-k14`` for a continuation of 14 days)."""
    return f"{policy}-s{seed}-d{day:03d}-st{store:04d}-n{days}" + (f"-k{tail}" if tail else "")


def task_of(
    start, store: int, days: int, reference: str, reference_gain: float, tail: int = 0, panel=None
) -> Task:
    """The ``Task`` of store ``store`` of ``start`` (a ``day_start.DayStart``) for ``days`` decided days and
    ``tail`` days of continuation, the reference's gain over all of them given; panel: [len(MEMBERS)] the
    panel's rewards (``panel.panel_rewards``' row) or None."""
    m, env = start.manifest, start.env
    start_nw = float(np.asarray(start.snapshot.state.net_worth)[store])
    date = env.catalog.date_of(int(start.params.open_day) + start.day).isoformat()
    text = PROMPT.format(store=store, date=date, days=days) + (TAIL_PROMPT.format(tail=tail) if tail else "")
    return Task(
        id=task_id(re.sub(r"[^A-Za-z0-9_.]+", "_", start.source), m["seed"], start.day, store, days, tail),
        from_states=start.folder,
        day=start.day,
        store=store,
        days=days,
        tail=tail,
        source_policy=start.source,
        reference=reference,
        reference_gain=float(reference_gain),
        start_net_worth=start_nw,
        scale=scale(reference_gain, float(start.params.rent), days + tail),
        seed=int(m["seed"]),
        grouping=str(m["grouping"]),
        supplier_attempts=int(m["supplier_attempts"]),
        data=m.get("data"),
        prompt=[{"role": "user", "content": text}],
        **panel_fields(panel),
    )


def panel_fields(rewards) -> dict:
    """The task row's panel, headroom and spread of one task's panel rewards ([len(MEMBERS)], or None)."""
    if rewards is None:
        return {}
    headroom, spread = summarize(np.asarray(rewards, np.float64)[None])
    return {
        "panel": {m: float(r) for m, r in zip(MEMBERS, rewards, strict=True)},
        "headroom": float(headroom[0]),
        "spread": float(spread[0]),
    }


def make_tasks(
    folder: str,
    days: int,
    at: Sequence[int] | None = None,
    stores: int | None = None,
    reference: str = "oracle",
    tail: int = DEFAULT_TAIL,
    progress: int = 0,
    note=None,
    panel: bool = True,
) -> list[Task]:
    """The tasks of a slices folder: for each snapshot day in ``at`` (default: every one) and each of its
    first ``stores`` open stores (default: all), the slice of ``days`` decided days and ``tail`` days of
    ``reference``'s continuation, with ``reference``'s gain over all ``days + tail`` days (``reference_gains``,
    the stores' own keys). The stores' tool history is made once per day and kept in the folder
    (``agents.runs.history``), so opening a task never plays a day again. panel: play ``panel.MEMBERS`` on
    every task (its ``panel``, ``headroom`` and ``spread``; ``with_headroom`` keeps the tasks worth training
    on). note: called with a line per snapshot day. ValueError (one line) for
    a folder, day, size or tail that does not fit (a continuation past the run's horizon is refused, never
    shortened)."""
    if not os.path.isdir(folder):
        raise ArgumentError(f"{{from_states}} {folder}: not a folder", "from_states")
    if not os.path.isfile(os.path.join(folder, "slices.json")):
        raise ArgumentError(
            f"{{from_states}} {folder}: no slices.json (the folder `rbjax run|agents run --save-states` writes)",
            "from_states",
        )
    manifest = read_manifest(folder)
    days_in = sorted(int(d) for d in manifest.get("files", {})) if at is None else list(at)
    if not days_in:
        raise ArgumentError(f"{{from_states}} {folder}: the folder holds no snapshot", "from_states")
    if not is_whole(tail) or tail < 0:
        raise ArgumentError(f"{{tail}} must be an int >= 0, got {tail!r}", "tail")
    for day in days_in:
        open_slices_folder(folder, day)  # checks the day exists, one-line errors
        check_tail(day, days, int(tail), int(manifest.get("days", EPISODE_DAYS)))
    keep_histories(folder, days_in, stores, progress, note)  # one play for every day's tool history
    tasks = []
    for day in days_in:
        start = open_day_start(folder, day, stores=stores, progress=progress, note=note)
        check_tail(day, days, int(tail), start.horizon)
        rows = start.open_stores(stores)
        if not rows:  # every store of that day closed before it (a run that went bankrupt)
            if note is not None:
                note(f"day {day} of {folder}: no store is open on its morning, no task")
            continue
        gains = reference_gains(start, days + tail, reference, rows)
        scales = [scale(g, float(start.params.rent), days + tail) for g in gains]
        rewards = (
            panel_rewards(start, rows, days, tail, reference, gains, scales) if panel else [None] * len(rows)
        )
        for s, gain, member_rewards in zip(rows, gains, rewards, strict=True):
            tasks.append(task_of(start, s, days, reference, float(gain), int(tail), member_rewards))
    return tasks


def with_headroom(tasks: Sequence[Task], minimum: float) -> list[Task]:
    """The tasks whose headroom (what the reference gains over doing nothing, relative: ``panel``) is at least
    ``minimum``; ValueError for a task made without the panel or a minimum that is not a finite number."""
    if not np.isfinite(minimum):
        raise ArgumentError(f"{{min_headroom}} must be a finite number, got {minimum!r}", "min_headroom")
    bare = [t.id for t in tasks if t.headroom is None]
    if bare:
        raise ValueError(f"task {bare[0]} has no headroom: it was made without the panel")
    return [t for t in tasks if t.headroom >= minimum]


def check_tail(day: int, days: int, tail: int, horizon: int) -> None:
    """ArgumentError (one line) when ``days`` decided days from the morning of ``day`` pass the run's ``horizon``
    (the rule of every slice, ``runners.paired.check_slice_days``, naming ``days``), or a continuation of
    ``tail`` days after them does."""
    check_slice_days(day, days, horizon, name="days")
    if horizon < day + days + tail:
        raise ArgumentError(
            f"{{tail}} {tail}: day {day} + {days} decided days + {tail} days of continuation passes the run's "
            f"horizon {horizon} (at most {max(horizon - day - days, 0)} days of continuation fit)",
            "tail",
        )


def reference_gains(start, days: int, reference: str, rows=None) -> np.ndarray:
    """[n] the reference policy's net-worth gain over ``days`` days (a task's decided days and its tail) from
    ``start``'s snapshot stores ``rows`` (default: all; a store's gain does not depend on the others played
    beside it), played through the tools on an agent engine (``history.warm_up``): the step
    program a session's store takes, so the reference played through a session gains exactly this.
    (``rollout``'s scan is another XLA program: a float it keeps may differ from the agent engine's by an ulp,
    and a decision on it may then differ.)"""
    snap, env = start.snapshot, start.env
    rows = list(range(snap.num_stores) if rows is None else rows)
    policy, policy_params = policies.make(reference, env)
    engine = AgentEngine(env, start.params, take_stores(snap, rows).keys)
    stores = seat(engine, range(len(rows)), snap, rows)
    before = np.asarray(engine.host["net_worth"], np.float64)[: len(rows)]
    warm_up(engine, stores, policy, policy_params, snap.day + days)
    after = np.asarray(engine.host["net_worth"], np.float64)[: len(rows)]
    return after - before


def write_tasks(tasks: Sequence[Task], path: str) -> None:
    """``tasks`` as JSON Lines in ``path`` (one task a line; written atomically)."""
    with atomic_file(path) as f:
        for t in tasks:
            f.write(json.dumps(t.to_row()) + "\n")


def read_tasks(path: str) -> list[Task]:
    """The tasks of a JSON Lines file (``write_tasks``'s, or a dataset's with these columns); ValueError (one
    line) naming the line and field."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such tasks file")
    tasks = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{i}: not a JSON line ({e})") from None
            tasks.append(Task.from_row(row, f"{path}:{i}"))
    if not tasks:
        raise ValueError(f"{path}: holds no task")
    return tasks

"""Corrections: what a teacher would have done from the mornings a model reached, as demonstration rows.

The data step of DAgger (and LEAP): run the model and save its stores (``rbjax agents run --model M
--save-states RUN --every E``, a language model's run included), then for each saved morning D whose next
snapshot D + ``days`` is saved too, make the task of ``days`` decided days from the model's store
(``lm.tasks.make_tasks``: the same random numbers the model's run had) and let the teacher play it through a
session (``lm.demos.demonstrate``). The row is a demonstration (it replays like one) plus what the model did
on the same days:

- ``model``: the run's agent (``DayStart.source``);
- ``model_reward``: the reward the model's own days earn on the task: its store on the morning D + ``days``
  (the run's next snapshot), run on by the task's reference for the task's continuation, as a session scores
  it (``tasks.reference_gains``, the same engine program), against the same reference gain and scale;
- ``gap``: ``reward - model_reward``, what the teacher's days were worth over the model's, in reward units.

>>> rows = correct("runs/model/states", teacher="plan")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from rbjax.agents.runs.day_start import open_day_start
from rbjax.agents.runs.history import history_name, history_path
from rbjax.arguments import ArgumentError
from rbjax.files.slices_folder import read_manifest
from rbjax.lm import rewards
from rbjax.lm.demos import demonstrate
from rbjax.lm.tasks import DEFAULT_TAIL, make_tasks, reference_gains


def correction_days(folder: str, days: int | None, at: Sequence[int] | None) -> tuple[int, list[int]]:
    """(days, mornings): the decided days of a correction (default: the run's snapshot interval) and the
    snapshot days to correct (default: every one whose next snapshot, ``days`` later, is saved).
    ArgumentError (one line) naming ``from_states``, ``days`` or ``at``."""
    if not os.path.isfile(os.path.join(folder, "slices.json")):
        raise ArgumentError(
            f"{{from_states}} {folder}: no slices.json (not a folder of a run that saved its states)",
            "from_states",
        )
    manifest = read_manifest(folder)
    saved = sorted(int(d) for d in manifest.get("files", {}))
    days = int(manifest.get("every") or 0) if days is None else int(days)
    if days < 1:
        raise ArgumentError(f"{{days}} must be an int >= 1, got {days!r}", "days")
    mornings = [d for d in saved if d + days in saved] if at is None else [int(d) for d in at]
    if not mornings:
        raise ArgumentError(
            f"{{from_states}} {folder}: no two snapshots {days} days apart (saved: {saved}; "
            "the run must save its mornings at least that often)",
            "from_states",
        )
    for d in mornings:
        for day in (d, d + days):
            if day not in saved:
                raise ArgumentError(
                    f"{{at}} {d}: the run saved no snapshot of day {day} (saved: {saved})", "at"
                )
            if not os.path.isfile(history_path(folder, day)):
                raise ArgumentError(
                    f"{{from_states}} {folder}: day {day} has no tool history ({history_name(day)}, which an agent "
                    "run that saves its states writes beside each snapshot)",
                    "from_states",
                )
    return days, mornings


def correct(
    folder: str,
    teacher: str,
    days: int | None = None,
    at: Sequence[int] | None = None,
    stores: int | None = None,
    tail: int = DEFAULT_TAIL,
    reference: str = "oracle",
    form: str = "trl",
    slots: int = 64,
    tokenizer: str | None = None,
    note: Callable[[str], None] | None = None,
) -> list[dict]:
    """The correction rows of the model's run saved in ``folder`` (the module's docstring): one per open store
    (the first ``stores``) and corrected morning (``correction_days``). ArgumentError (one line) naming the
    argument at fault."""
    folder = os.path.abspath(folder)
    days, mornings = correction_days(folder, days, at)
    tasks = make_tasks(folder, days, mornings, stores, reference, tail, note=note, panel=False)
    rows = demonstrate(tasks, teacher, form=form, slots=slots, tokenizer=tokenizer, note=note)
    model = {}
    for day in mornings:
        on_day = [(i, t) for i, t in enumerate(tasks) if t.day == day]
        after = open_day_start(folder, day + days, stores=max(t.store for _, t in on_day) + 1)
        wanted = [t.store for _, t in on_day]
        gains = reference_gains(after, tail, reference, wanted)
        worth = np.asarray(after.snapshot.state.net_worth, np.float64)[wanted]
        for (i, t), w, g in zip(on_day, worth, gains, strict=True):
            model[i] = rewards.reward(
                "relative", float(w) + float(g) - t.start_net_worth, t.reference_gain, t.scale
            )
    source = tasks[0].source_policy if tasks else None
    for i, row in enumerate(rows):
        row.update(model=source, model_reward=model[i], gap=row["reward"] - model[i])
    return rows

"""A fine-tuned student on disk: a student's checkpoint (``rbjax.rl.distill.recipe.save``: ``config.json``,
``student.msgpack``) whose ``config.json`` also names the fine-tune's settings and its start, with the fine-tune's
``curve.csv`` and ``curve.png``. It loads as its kind of student (``rbjax.policies.make("finetuned_belief", env,
folder)``, or as the student it started from: the same network, other weights)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from rbjax.env import Env
from rbjax.policies.registry import needs_checkpoint
from rbjax.rl.distill import recipe as distill
from rbjax.rl.distill.student import Student, StudentParams
from rbjax.rl.finetune.recipe import FinetuneConfig

FINETUNED = distill.FINETUNED
STARTS = tuple(distill.REGISTERED.values()) + tuple(FINETUNED.values())  # what ``--init`` may name


def start_of(env: Env, init: str) -> tuple[Student, StudentParams, distill.DistillConfig, str]:
    """(the student, its params, its recipe's config, what it is called: ``init``) that ``init`` names: a
    student's registry name (its shipped checkpoint), or a folder written by ``rbjax train distill`` or by a
    fine-tune. ValueError naming what is wrong."""
    name, folder = init, init
    if init in STARTS:
        if needs_checkpoint(init):
            raise ValueError(f"{init!r} has no shipped checkpoint: give the folder a fine-tune wrote")
        from rbjax.shipped import STUDENT_CHECKPOINTS

        folder = str(STUDENT_CHECKPOINTS[init])
    elif not (Path(init) / "student.msgpack").is_file():
        raise ValueError(
            f"{init} is neither a student's name ({', '.join(STARTS)}) nor a folder of `rbjax train distill`"
        )
    params, config = distill.load(folder, env)
    return Student(config.student), params, config, name


def save(
    out: str | Path,
    params: StudentParams,
    start: distill.DistillConfig,
    config: FinetuneConfig,
    started_from: str,
    curve: pd.DataFrame,
    env: Env,
) -> None:
    """Write the student's checkpoint (``distill.save``), the fine-tune's settings and start in its
    ``config.json``, the fine-tune's ``curve.csv`` and ``curve.png``."""
    losses = curve[["policy_loss", "value_loss", "kl_to_start"]].iloc[:-1].to_numpy(np.float64)
    weights = [np.asarray(w, np.float64) for w in jax.tree.leaves(params.net)]
    if not (np.isfinite(losses).all() and all(np.isfinite(w).all() for w in weights)):
        raise FloatingPointError(
            "the fine-tune diverged (a loss or a weight is not finite); nothing was saved"
        )
    out = Path(out)
    distill.save(out, params, start, curve, env)
    meta = json.loads((out / "config.json").read_text())
    meta["finetune"] = dict(config=dataclasses.asdict(config), start=str(started_from))
    (out / "config.json").write_text(json.dumps(meta, indent=2) + "\n")
    from rbjax.results.plots import plot_finetune_curve

    plot_finetune_curve(curve).savefig(out / "curve.png", dpi=110, bbox_inches="tight")


def finetuned(path: str | Path) -> dict | None:
    """The fine-tune's entry of a student's checkpoint (its settings and start), None for a distilled one."""
    meta = json.loads((Path(path) / "config.json").read_text())
    return meta.get("finetune")

"""One registry of the shipped policies, used by the CLI, the profiler, the benchmarks and the tests.

A policy is a pure ``policy(policy_params, obs, privileged, key) -> Action``; ``make(name)`` returns it with its
params. The registry is a table, filled by nothing at import (pgx's ``make`` is the model):

- ``POLICIES`` (``rbjax.policies.table``): the oracle and the classic baselines, with default params;
- ``PLANNING``: the lookahead planner (``rbjax.policies.planner``) on the true state and on what the tools show;
  it simulates the store, so it is built for an env, with its settings (``PlanSettings``);
- ``LEARNED_TABLE``: PPO and the planner's students, distilled and fine-tuned, whose params come from a
  checkpoint folder (the shipped one by default, ``rbjax.shipped``). Each names its loader as "module:function",
  imported on first use: the RL layer sits above this one.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from rbjax.policies.planner import STUDENT_BASES, PlanSettings, make_planner
from rbjax.policies.table import POLICIES, PolicySpec

__all__ = [
    "LEARNED",
    "LEARNED_TABLE",
    "Learned",
    "NAMES",
    "PLANNING",
    "POLICIES",
    "PlanSettings",
    "PolicySpec",
    "make",
    "needs_checkpoint",
    "shipped_checkpoint",
]


@dataclasses.dataclass(frozen=True)
class Learned:
    """A learned policy's entry: ``loader`` ("module:function", imported on first ``make``: the RL layer sits
    above this one, and importing the registry loads none of it) called as ``loader(env, checkpoint, greedy,
    **kwargs)`` -> (policy function, its params); ``shipped``: its key in ``rbjax.shipped`` (the checkpoint
    ``make`` loads when none is given), or None; ``writer``: the command that writes its checkpoints."""

    loader: str
    writer: str
    shipped: str | None = None
    kwargs: tuple[tuple[str, Any], ...] = ()


def _student(name: str, writer: str) -> Learned:
    return Learned("rbjax.rl.distill.recipe:load_policy", writer, name, (("expect", name),))


# policies whose params come from a checkpoint folder: PPO, the planner's students (``rbjax.rl.distill``:
# ``distilled`` reads what the oracle reads, ``distilled_obs`` the observation only, ``distilled_belief`` the
# belief from what the tools show, taught by ``plan_obs``) and the students fine-tuned with the environment's reward
# (``rbjax.rl.finetune``: ``rbjax train ppo --init STUDENT``)
LEARNED_TABLE: dict[str, Learned] = {
    "ppo": Learned("rbjax.rl.train:load_policy", "rbjax train ppo", "ppo"),
    **{
        name: _student(name, "rbjax train distill")
        for name in ("distilled", "distilled_obs", "distilled_belief")
    },
    **{
        name: _student(name, "rbjax train ppo --init STUDENT")
        for name in ("finetuned", "finetuned_obs", "finetuned_belief")
    },
}
LEARNED = tuple(LEARNED_TABLE)
# policies that simulate the store they run, built for an env (``make(name, env)``): the planner on the true state,
# and on what the tools show (``PlanSettings(view="agent")``)
PLANNING = ("plan", "plan_obs")
NAMES = tuple(POLICIES) + PLANNING + LEARNED


def shipped_checkpoint(name: str) -> str | None:
    """The checkpoint folder ``make(name)`` loads when none is given (``rbjax.shipped``), or None."""
    from rbjax import shipped  # paths only: no layer above

    entry = LEARNED_TABLE.get(name)
    if entry is None or entry.shipped is None:
        return None
    path = (
        shipped.PPO_CHECKPOINT if entry.shipped == "ppo" else shipped.STUDENT_CHECKPOINTS.get(entry.shipped)
    )
    return str(path) if path is not None and path.is_dir() else None


def needs_checkpoint(name: str) -> bool:
    """Whether ``make(name)`` needs a checkpoint given (a learned policy with no shipped default)."""
    return name in LEARNED and shipped_checkpoint(name) is None


def make(
    name: str,
    env=None,
    checkpoint: str | None = None,
    greedy: bool = False,
    plan: PlanSettings | None = None,
) -> tuple[Callable, Any]:
    """(policy function, its params) for a registered ``name``.

    env: the Env the policy acts in, for the learned and planning ones (None: the process's default env,
    ``rbjax.programs.env_and_params()``). The learned policies (``LEARNED``: ``ppo``, the students
    ``distilled``, ``distilled_obs``, ``distilled_belief`` and their fine-tunes) load ``checkpoint`` (a folder
    written by the entry's ``writer``), the shipped one where none is given. ``greedy``: PPO's most likely
    action instead of a sample (False here; the CLI plays greedily by default; a student is deterministic).
    ``plan`` simulates ``env`` and takes its settings from ``plan`` (default ``PlanSettings()``); ``plan_obs``
    too, in the agent's view (``PlanSettings.view = "agent"``). A planner whose base is a student's name
    (``PlanSettings(base="distilled")``) plays the shipped student after today.
    Raises ValueError naming what is missing or wrong.
    """
    if plan is not None and name not in PLANNING:
        raise ValueError(f"planner settings are for the policies {', '.join(PLANNING)}, not {name!r}")
    if name in POLICIES:
        return POLICIES[name].fn, POLICIES[name].default_params()
    if name not in LEARNED and name not in PLANNING:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(NAMES)}")
    if (
        env is None
    ):  # the process's default env (``rbjax.programs``): the one a command with no env flags runs
        from rbjax.programs import env_and_params

        env = env_and_params()[0]
    if name in PLANNING:
        settings = plan or PlanSettings()
        if name == "plan_obs":  # the observation-only planner: the agent's view whatever else is set
            settings = dataclasses.replace(settings, view="agent")
        if isinstance(settings.base, str) and settings.base in STUDENT_BASES:  # a student, shipped
            base, base_params = make(settings.base, env)
            return make_planner(env, dataclasses.replace(settings, base=base), base_params)
        return make_planner(env, settings)
    entry = LEARNED_TABLE[name]
    checkpoint = checkpoint or shipped_checkpoint(name)
    if not checkpoint:
        raise ValueError(f"policy {name!r} needs a checkpoint folder (written by `{entry.writer}`)")
    module, function = entry.loader.split(":")
    load = getattr(importlib.import_module(module), function)
    return load(env, checkpoint, greedy, **dict(entry.kwargs))

"""One registry of the shipped policies, used by the CLI, the profiler, the benchmarks and the tests.

A policy is a pure ``policy(policy_params, obs, privileged, key) -> Action``; ``make(name)`` returns it
with its default params. ``ppo`` is the learned baseline: its params come from a checkpoint folder, read by
the loader ``rbjax.rl`` provides (``register_learned``: the RL layer sits above this one). ``plan`` is the
lookahead planner (``rbjax.policies.planner``): it simulates the store, so it is built for an env, with its
settings (``PlanSettings``, declared with the planner). ``distilled`` and ``distilled_obs`` are its students,
``distilled_belief`` the student of ``plan_obs`` (``rbjax.rl.distill``), loaded like ``ppo``, from the shipped
checkpoints by default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from rbjax.policies.planner import STUDENT_BASES, PlanSettings, make_planner
from rbjax.policies.table import POLICIES, PolicySpec

__all__ = [
    "LEARNED",
    "NAMES",
    "PLANNING",
    "POLICIES",
    "PlanSettings",
    "PolicySpec",
    "make",
    "register_learned",
]

# policies whose params come from a checkpoint folder, loaded by a layer above this one: PPO, and the planner's
# students (``rbjax.rl.distill``: ``distilled`` reads what the oracle reads, ``distilled_obs`` the observation only,
# ``distilled_belief`` the belief from what the tools show, taught by ``plan_obs``)
# the students fine-tuned with the environment's reward (``rbjax.rl.finetune``: ``rbjax train ppo --init STUDENT``)
LEARNED = (
    "ppo",
    "distilled",
    "distilled_obs",
    "distilled_belief",
    "finetuned",
    "finetuned_obs",
    "finetuned_belief",
)
# policies that simulate the store they run, built for an env (``make(name, env)``): the planner on the true state,
# and on what the tools show (``PlanSettings(view="agent")``)
PLANNING = ("plan", "plan_obs")
NAMES = tuple(POLICIES) + PLANNING + LEARNED


def needs_checkpoint(name: str) -> bool:
    """Whether ``make(name)`` needs a checkpoint given (a learned policy with no shipped default)."""
    return name in LEARNED and name not in _SHIPPED


# name -> loader(env, checkpoint, greedy) -> (policy function, its params): filled from above (the package's root
# registers ``rbjax.rl``'s ppo loader), so this layer never imports the layers that depend on it
_LOADERS: dict[str, Callable[..., tuple[Callable, Any]]] = {}
_SHIPPED: dict[str, str] = {}  # name -> the checkpoint ``make`` loads when none is given


def register_learned(
    name: str, loader: Callable[..., tuple[Callable, Any]], shipped: str | None = None
) -> None:
    """Load the learned policy ``name`` (one of ``LEARNED``) with ``loader(env, checkpoint, greedy)`` ->
    (policy function, its params); ``make`` checks the env is given and calls it, with ``shipped`` (a
    checkpoint folder) where no checkpoint is given, or refuses without one."""
    if name not in LEARNED:
        raise ValueError(f"register_learned: {name!r} is not a learned policy name ({', '.join(LEARNED)})")
    if shipped is not None:
        _SHIPPED[name] = str(shipped)
    _LOADERS[name] = loader


def make(
    name: str,
    env=None,
    checkpoint: str | None = None,
    greedy: bool = False,
    plan: PlanSettings | None = None,
) -> tuple[Callable, Any]:
    """(policy function, its params) for a registered ``name``.

    ``ppo`` needs ``env`` and a ``checkpoint`` folder (written by ``rbjax train ppo``); ``greedy`` takes
    its most likely action instead of a sample. The students (``distilled``, ``distilled_obs``,
    ``distilled_belief``) need ``env`` and take the
    shipped student where no ``checkpoint`` (written by ``rbjax train distill``) is given. ``plan`` needs
    ``env`` (the store it simulates) and takes its settings from ``plan`` (default ``PlanSettings()``);
    ``plan_obs`` too, in the agent's view (``PlanSettings.view = "agent"``). A planner whose base is a student's
    name (``PlanSettings(base="distilled")``) plays the shipped student after today.
    Raises ValueError naming what is missing or wrong.
    """
    if plan is not None and name not in PLANNING:
        raise ValueError(f"planner settings are for the policies {', '.join(PLANNING)}, not {name!r}")
    if name in POLICIES:
        return POLICIES[name].fn, POLICIES[name].default_params()
    if name in PLANNING:
        if env is None:
            raise ValueError(f"policy {name!r} needs the env it simulates")
        settings = plan or PlanSettings()
        if name == "plan_obs":  # the observation-only planner: the agent's view whatever else is set
            settings = dataclasses.replace(settings, view="agent")
        if isinstance(settings.base, str) and settings.base in STUDENT_BASES:  # a student, shipped
            base, base_params = make(settings.base, env)
            return make_planner(env, dataclasses.replace(settings, base=base), base_params)
        return make_planner(env, settings)
    if name not in LEARNED:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(NAMES)}")
    checkpoint = checkpoint or _SHIPPED.get(name)
    if not checkpoint:
        writer = (
            "ppo --init STUDENT"
            if name.startswith("finetuned")
            else "distill"
            if "distilled" in name
            else name
        )
        raise ValueError(f"policy {name!r} needs a checkpoint folder (written by `rbjax train {writer}`)")
    if env is None:
        raise ValueError(f"policy {name!r} needs the env it acts in")
    if name not in _LOADERS:
        raise ValueError(f"policy {name!r}: no loader registered (import rbjax)")
    return _LOADERS[name](env, checkpoint, greedy)

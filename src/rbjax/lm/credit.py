"""Per-day credit for a session: what each decided day was worth, in the units of the ``relative`` reward.

A session's store on the morning m of its task has a value V(m): its net worth on the morning the task's window
ends (``task.day + task.days + task.tail``) when the task's reference policy runs it from m, with the task's
random numbers, in an agent engine, through the tools (the way the session's own continuation is played). Day
d's credit is (V(after day d) - V(before day d)) / scale. The values at the two ends are known without playing:
V(the task's first morning) is the start net worth plus the task's reference gain (made the same way,
``tasks.reference_gains``), and V(after the last decided day) is the session's final net worth (its
continuation is the reference's). So the credits telescope: they sum to the relative reward
(G - R) / scale to float rounding, for a finished, an early-stopped (its undecided days are credited as
played) or a bankrupt session (V is then the net worth it went bankrupt with).

Only the mornings in between are played: a D-day task costs D - 1 plays of at most D - 1 + tail days, one
engine step a day for every morning of every session settled together (``values``).

>>> between = values(env, params, mornings, [end] * len(mornings), ["oracle"] * len(mornings))
>>> credits = turn_rewards(start + reference_gain, between, final, scale)      # [len(mornings) + 1]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np

from rbjax import policies
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs.history import ToolHistory, of_stores, warm_up
from rbjax.agents.runs.loop import store_tools


@dataclasses.dataclass(frozen=True)
class Morning:
    """A session's store on the morning ``day``, before the day begins: its engine state (an ``EnvState`` of
    numpy leaves without the batch axis), its episode key (a typed key, [] shape) and the tools' past (a
    one-store ``ToolHistory``: ledger and news on show)."""

    day: int
    state: object
    key: jax.Array
    past: ToolHistory


def morning_of(engine, slot: int, key: jax.Array, tools, row: dict | None = None) -> Morning:
    """Slot ``slot`` of ``engine`` as it is now (after a step, before the next ``begin_day``), with its episode
    key ``key`` and its tools ``tools``. row: the slot's ``engine.row()`` read on the engine's thread (None:
    read here, for callers on that thread)."""
    today = engine.today(slot)
    state = (engine.row(slot) if row is None else row)["state"]
    return Morning(today.day, state, key, of_stores(today.day, "", [tools]))


def values(
    env,
    params,
    mornings: Sequence[Morning],
    ends: Sequence[int],
    references: Sequence[str],
    max_lines: int = 256,
    **tool_options,
) -> np.ndarray:
    """[n] V of each morning: its store's net worth (float64 of the engine's float32) on the morning
    ``ends[i]`` after policy ``references[i]`` runs it from ``mornings[i]`` through the tools
    (``history.warm_up``), one engine step a day for all the mornings that share a reference. max_lines,
    tool_options: the session pool's engine and tools' (``AgentEngine``, ``StoreTools``)."""
    out = np.zeros(len(mornings), np.float64)
    for reference in dict.fromkeys(references):
        idx = [i for i, r in enumerate(references) if r == reference]
        keys = jax.numpy.stack([mornings[i].key for i in idx])
        states = jax.tree.map(lambda *xs: np.stack(xs), *[mornings[i].state for i in idx])
        engine = AgentEngine(env, params, keys, max_lines)
        engine.load(range(len(idx)), states, keys)
        stores = []
        for slot, i in enumerate(idx):
            tools = store_tools(engine, slot, **tool_options)
            mornings[i].past.give(0, tools)
            stores.append(tools)
        warm_up(engine, stores, *policies.make(reference, env), [ends[i] for i in idx])
        out[idx] = np.asarray(engine.host["net_worth"], np.float64)[: len(idx)]
    return out


def turn_rewards(first: float, between: Sequence[float], last: float, scale: float) -> list[float]:
    """[len(between) + 1] the days' credits: the differences of the values ``first``, ``*between``, ``last``
    over ``scale``."""
    v = np.array([first, *between, last], np.float64)
    return [float(x) for x in np.diff(v) / float(scale)]

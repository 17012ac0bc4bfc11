"""A round's data: play the current policy with some exploration, label sampled mornings with the planner.

On ``label_days`` mornings of every store's episode (the same days for all stores, spread at random over the
episode) the planner values the student's candidates: each candidate played today, then the *current* policy
for ``horizon - 1`` days, over ``futures`` futures with common random numbers (``Planner.values``). Round 0's
current policy is the anchor (the oracle); a later round's is the last student, so each round's teacher plays
on with a stronger policy than the last: approximate policy iteration with a rollout planner as the improvement
step (Deep Controlled Learning). The planner is the honest one: its futures redraw every draw the store made for
later days (``rbjax.model.future_draws``).

The belief student's teacher is the observation-only planner (``PlanSettings(view="agent")``, ``plan_obs``): each
future starts from a draw of the belief, and the futures play on with the oracle on that draw, as ``plan_obs``
does (a student that computes a belief on every simulated day would cost about five times as much), so the
teacher sees what the student sees, and its labels do not follow the rounds' students.

The days between are played by the current policy, except that on a share ``explore`` of store-days a uniformly
random candidate is played instead, so the labeled mornings are varied. Stores are split over the devices
(``runners.placement``); the keys follow ``kernels.rng.day_keys``, as every runner's do.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.config import EPISODE_DAYS
from rbjax.counts import need_count
from rbjax.day_loop import in_chunks, scan_days
from rbjax.env import Env
from rbjax.policies.oracle import oracle
from rbjax.policies.planner import Planner, PlannerParams, PlanSettings, future_keys
from rbjax.rl.distill.student import Student
from rbjax.runners.placement import mesh_map, place, specs
from rbjax.runners.rollout_programs import open_stores
from rbjax.state import Action

_EXPLORE, _LABEL = 0x45585052, 0x4C41424C  # fold-in tags of the exploration and the labels' futures
# days a call of the labels' loop: a labeled morning simulates C x M x H store-days a store (the default recipe's
# take about 27 s on 2 cores, benchmarks/results/distill.json), so a call of one day reports at least that often
DAYS_PER_CALL = 1


@dataclasses.dataclass(frozen=True)
class LabelSettings:
    """stores: episodes played a round; label_days: mornings labeled per store; explore: share of store-days a
    random candidate is played; futures, horizon: the planner's M and H (its defaults)."""

    stores: int = 256
    label_days: int = 20
    days: int = EPISODE_DAYS
    explore: float = 0.2
    futures: int = PlanSettings.futures  # the planner's own defaults
    horizon: int = PlanSettings.horizon

    def __post_init__(self):
        for name in ("stores", "label_days", "days", "futures", "horizon"):  # kept as ints (3.0 -> 3)
            object.__setattr__(
                self, name, need_count(f"LabelSettings.{name}", getattr(self, name), whole=True)
            )
        if self.label_days > self.days:
            raise ValueError(f"LabelSettings.label_days ({self.label_days}) exceeds days ({self.days})")
        if not 0.0 <= self.explore <= 1.0:
            raise ValueError(f"LabelSettings.explore must be in [0, 1], got {self.explore!r}")


@dataclasses.dataclass
class Labels:
    """A round's labeled mornings, N = stores x label_days: products [N, J, P], store [N, G], mask [N, J] (the
    anchor's shelf), values [N, C] (the planner's mean net worth of each candidate), day [N]."""

    products: np.ndarray
    store: np.ndarray
    mask: np.ndarray
    values: np.ndarray
    day: np.ndarray
    seconds: float = 0.0
    simulated_store_days: int = 0

    def __len__(self) -> int:
        return len(self.values)

    @classmethod
    def concat(cls, rounds: list[Labels]) -> Labels:
        """Several rounds' labels as one set (their seconds and simulated store-days summed)."""
        fields = ("products", "store", "mask", "values", "day")
        joined = {f: np.concatenate([getattr(r, f) for r in rounds]) for f in fields}
        seconds = sum(r.seconds for r in rounds)
        return cls(
            **joined, seconds=seconds, simulated_store_days=sum(r.simulated_store_days for r in rounds)
        )

    @property
    def best(self) -> np.ndarray:
        """[N] the planner's choice: the candidate with the best mean (ties to the lowest, the anchor's)."""
        return np.argmax(self.values, -1)


def explore(policy: Callable, candidates_of: Callable, share: float) -> Callable:
    """``policy`` that, on a share ``share`` of store-days, plays a uniformly random candidate instead:
    ``candidates_of(obs, privileged)`` -> the candidates (leaves [C, ...]). The coin and the pick are drawn from
    the policy key (``_EXPLORE``), so a store's days explore alike in every run."""

    def exploring(params, obs, privileged, key) -> Action:
        action = policy(params, obs, privileged, key)
        candidates = candidates_of(obs, privileged)
        k_coin, k_pick = jax.random.split(jax.random.fold_in(key, _EXPLORE))
        pick = jax.random.randint(k_pick, (), 0, jax.tree.leaves(candidates)[0].shape[0])
        coin = jax.random.uniform(k_coin) < share
        random_one = jax.tree.map(lambda x: x[pick], candidates)
        return jax.tree.map(lambda a, b: jnp.where(coin, b, a), action, random_one)

    return exploring


def collect(
    env: Env,
    params,
    student: Student,
    planner_params: PlannerParams,
    policy: Callable,
    policy_params: Any,
    settings: LabelSettings,
    key: jax.Array,
    devices: tuple | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    days_per_call: int = DAYS_PER_CALL,
) -> Labels:
    """Play ``policy`` (the current one: the anchor in round 0, the last student after; a policy function) on
    ``settings.stores`` stores from ``key`` and label ``settings.label_days`` mornings of each with the planner
    over ``student``'s candidates (``planner_params``: its moves, its base the anchor's params).

    The days are the one day loop's (``rbjax.day_loop.scan_days``), ``days_per_call`` a call (one program,
    compiled once): the exploring policy (``explore``) plays, and the loop's watch labels each labeled morning
    under a ``lax.cond`` on the day (the day is the same for every store, so only labeled days simulate
    futures). Each call's labeled mornings are taken to the host. progress: None, or ``progress(days done,
    days, seconds so far)`` after each call."""
    need_count("days_per_call", days_per_call, whole=True)
    devices = tuple(jax.devices() if devices is None else devices)
    n = settings.stores + (-settings.stores) % len(devices)  # whole stores per device
    k_stores, k_days = jax.random.split(key)
    keys = jax.random.split(k_stores, n)
    label_days = labeled_mornings(settings, k_days)
    planner, plan_params = teacher(env, student, planner_params, policy, policy_params, settings)
    candidates_of = lambda obs, privileged: student.inputs(planner_params, obs, privileged)[1]  # noqa: E731
    playing = explore(policy, candidates_of, settings.explore)

    def one_store(obs, state, key, first_day, labeled, policy_params, plan_params, length):
        def label(day, obs, privileged):
            _, candidates, (products, store, mask) = student.inputs(planner_params, obs, privileged)
            futures = future_keys(jax.random.fold_in(jax.random.fold_in(key, _LABEL), day), settings.futures)
            values = planner.values(plan_params, candidates, obs, privileged, futures).mean(-1)
            return products, store, mask, values

        def watch(day, obs, privileged, state, action, k_pol):
            empty = jax.tree.map(
                lambda x: jnp.zeros(x.shape, x.dtype), jax.eval_shape(label, day, obs, privileged)
            )
            return jax.lax.cond(labeled[day], label, lambda *_: empty, day, obs, privileged)

        (obs, state), (_, watched) = scan_days(
            env, playing, policy_params, params, obs, state, key, first_day, length,
            record=lambda info: None, watch=watch,
        )  # fmt: skip
        return (obs, state), watched

    per_store = (0, 0, 0, None, None, None, None)
    labeled = jnp.asarray(label_days)  # an argument: the program does not hold the round's label days
    calls = {}

    def advance(carry, first: int, length: int):
        if length not in calls:
            f = jax.vmap(functools.partial(one_store, length=length), in_axes=per_store)
            calls[length] = jax.jit(mesh_map(f, devices, specs(per_store)))
        (obs, state), watched = calls[length](
            *carry, keys, jnp.int32(first), labeled, policy_params, plan_params
        )
        return (obs, state), watched

    out = []

    def keep(watched, done: int, length: int, seconds: float):
        first = done - length
        for i in np.flatnonzero(label_days[first:done]):  # the call's labeled mornings, on the host
            out.append(tuple(np.asarray(x[: settings.stores, i]) for x in watched) + (first + i,))
        if progress is not None:
            progress(done, settings.days, time.perf_counter() - start)

    obs, state = open_stores(env, keys, params, devices)  # the rollouts' reset: a batch size compiles once
    keys = place(keys, 0, devices)
    start = time.perf_counter()
    in_chunks(advance, (obs, state), settings.days, days_per_call, on_chunk=keep)
    C = student.candidate_count(planner_params)
    simulated = settings.stores * settings.label_days * C * settings.futures * settings.horizon
    return gathered(out, settings.stores, time.perf_counter() - start, simulated)


def labeled_mornings(settings: LabelSettings, key: jax.Array) -> np.ndarray:
    """[days] bool: the ``settings.label_days`` mornings a round labels, drawn without replacement from ``key``."""
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).astype(np.uint64).sum())
    label_days = np.zeros(settings.days, bool)
    label_days[rng.choice(settings.days, settings.label_days, replace=False)] = True
    return label_days


def teacher(env: Env, student: Student, planner_params, policy, policy_params, settings: LabelSettings):
    """(Planner, its params) that label a round: the planner over ``policy`` (the current one) with the
    settings' futures and horizon; for the belief student, ``plan_obs`` (the belief's draws, then the oracle)."""
    plan = PlanSettings(base=policy, futures=settings.futures, horizon=settings.horizon)
    plan_params = planner_params.replace(base=policy_params)
    if student.config.belief:  # plan_obs: the belief's draws, then the oracle on them
        plan, plan_params = dataclasses.replace(plan, base=oracle, view="agent"), planner_params
    return Planner(env, plan), plan_params


def gathered(out: list, stores: int, seconds: float, simulated: int) -> Labels:
    """One ``Labels`` from the labeled mornings kept on the host, each (products, store, mask, values, day)."""
    cat = lambda i: np.concatenate([o[i] for o in out])  # noqa: E731
    return Labels(
        products=cat(0),
        store=cat(1),
        mask=cat(2),
        values=cat(3),
        day=np.concatenate([np.full(stores, o[4], np.int32) for o in out]),
        seconds=seconds,
        simulated_store_days=simulated,
    )

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
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.env import Env
from rbjax.kernels.rng import day_keys
from rbjax.policies.oracle import oracle
from rbjax.policies.planner import Planner, PlanSettings, future_keys
from rbjax.rl.distill.student import Student
from rbjax.runners.placement import mesh_map, place, specs
from rbjax.runners.rollout_programs import open_stores

_EXPLORE, _LABEL = 0x45585052, 0x4C41424C  # fold-in tags of the exploration and the labels' futures


@dataclasses.dataclass(frozen=True)
class LabelSettings:
    """stores: episodes played a round; label_days: mornings labeled per store; explore: share of store-days a
    random candidate is played; futures, horizon: the planner's M and H (its defaults)."""

    stores: int = 256
    label_days: int = 20
    days: int = 180
    explore: float = 0.2
    futures: int = PlanSettings.futures  # the planner's own defaults
    horizon: int = PlanSettings.horizon

    def __post_init__(self):
        for name in ("stores", "label_days", "days", "futures", "horizon"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LabelSettings.{name} must be an int >= 1, got {value!r}")
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


def collect(
    env: Env,
    params,
    student: Student,
    moves,
    policy: Callable,
    policy_params: Any,
    settings: LabelSettings,
    key: jax.Array,
    devices: tuple | None = None,
) -> Labels:
    """Play ``policy`` (the current one: the anchor in round 0, the last student after) on ``settings.stores``
    stores from ``key`` and label ``settings.label_days`` mornings of each with the planner over ``student``'s
    candidates (``moves``: ``PlannerParams``, its base the anchor's params)."""
    devices = tuple(jax.devices() if devices is None else devices)
    n = settings.stores + (-settings.stores) % len(devices)  # whole stores per device
    k_stores, k_days = jax.random.split(key)
    keys = jax.random.split(k_stores, n)
    rng = np.random.default_rng(np.asarray(jax.random.key_data(k_days)).astype(np.uint64).sum())
    label_days = set(rng.choice(settings.days, settings.label_days, replace=False).tolist())
    plan = PlanSettings(base=policy, futures=settings.futures, horizon=settings.horizon)
    plan_params = moves.replace(base=policy_params)
    if student.config.belief:  # plan_obs: the belief's draws, then the oracle on them
        plan, plan_params = dataclasses.replace(plan, base=oracle, view="agent"), moves
    planner = Planner(env, plan)
    C = student.candidates(moves)

    def play(state, obs, key, day, policy_params):
        k_pol, k_env = day_keys(key, day)
        privileged = env.privileged(state, params)
        anchor, candidates, feats = student.inputs(moves, obs, privileged)
        if policy is student.anchor:  # round 0: the anchor's own action, computed once
            action = anchor
        elif policy == student:  # a student of this kind: its choice among the candidates just built
            action = student.choose(policy_params, candidates, feats)
        else:
            action = policy(policy_params, obs, privileged, k_pol)
        k_coin, k_pick = jax.random.split(jax.random.fold_in(k_pol, _EXPLORE))
        pick = jax.random.randint(k_pick, (), 0, C)
        explore = jax.random.uniform(k_coin) < settings.explore
        random_one = jax.tree.map(lambda x: x[pick], candidates)
        action = jax.tree.map(lambda a, b: jnp.where(explore, b, a), action, random_one)
        obs, state, *_ = env.step(k_env, state, action, params)
        return state, obs

    def label(state, obs, key, day, plan_params):
        privileged = env.privileged(state, params)
        _, candidates, (products, store, mask) = student.inputs(moves, obs, privileged)
        futures = future_keys(jax.random.fold_in(jax.random.fold_in(key, _LABEL), day), settings.futures)
        values = planner.values(plan_params, candidates, obs, privileged, futures).mean(-1)
        return products, store, mask, values

    per_store = (0, 0, 0, None, None)
    shard = lambda f: jax.jit(mesh_map(jax.vmap(f, in_axes=per_store), devices, specs(per_store)))  # noqa: E731
    play_days, label_morning = shard(play), shard(label)
    obs, state = open_stores(env, keys, params, devices)  # the rollouts' reset: a batch size compiles once
    keys = place(keys, 0, devices)
    start = time.perf_counter()
    out = []
    for day in range(settings.days):
        d = jnp.int32(day)
        if day in label_days:
            out.append(jax.device_get(label_morning(state, obs, keys, d, plan_params)) + (day,))
        state, obs = play_days(state, obs, keys, d, policy_params)
    jax.block_until_ready(state)
    keep = slice(0, settings.stores)
    cat = lambda i: np.concatenate([np.asarray(o[i])[keep] for o in out])  # noqa: E731
    return Labels(
        products=cat(0),
        store=cat(1),
        mask=cat(2),
        values=cat(3),
        day=np.concatenate([np.full(settings.stores, o[4], np.int32) for o in out]),
        seconds=time.perf_counter() - start,
        simulated_store_days=settings.stores * settings.label_days * C * settings.futures * settings.horizon,
    )

"""Fine-tuning a student with the environment's reward: PPO over the student's own choice among its candidates.

A student (``rbjax.rl.distill``) is a categorical policy over C candidate actions around its anchor's. The
fine-tune starts from its weights and keeps its encoding: each update plays B stores' whole episodes sampling the
student's choice (``experience.collect``), then learns (``update.learn``). Three things keep the start:

- the critic learns alone for ``critic_updates`` updates before the actor moves (a critic that starts untrained
  hands the actor noise for advantages, and the distilled policy is lost in the first updates);
- a KL term toward the start, KL(start || now) over the candidates, weighted ``kl_coef`` and annealed linearly to
  0 over the actor's updates, holds the policy near its teacher's choices while the critic is still rough;
- evaluation is greedy, as the student is shipped: before the first update the fine-tune's evaluation is the
  student's own, store for store.

The critic may read the hidden fields (it never acts); the actor reads what its kind reads. Rewards are the
day's change in net worth, as the env's, discounted with ``gamma`` (a 100-day horizon: longer than an order's
lead time and a product's shelf life, shorter than the 180-day episode, which lowers the returns' variance) and
scaled by the first episodes' spread. Stores start from a pool of openings redrawn every ``pool_every``
updates (an opening costs as much as many store-days).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd

from rbjax.checks import need_count
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.rl.distill.student import STORE_G, Student, StudentParams
from rbjax.rl.finetune import experience, update
from rbjax.runners.rollout import rollout

VALIDATION_SEED = 20261205  # the curve's stores: neither the held-out seed nor a training one


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """The fine-tune's settings (a change of any recompiles its update)."""

    stores: int = 32  # B: stores played an update, each a whole episode
    copies: int = 2  # G: episodes of each store on the same market draws (1: independent episodes, GAE)
    updates: int = 120
    epochs: int = 4
    minibatches: int = 8
    lr: float = 1e-3  # the actor's Adam step
    critic_lr: float = 1e-3
    critic_hidden: int = 64
    critic_updates: int = 10  # updates that train the critic alone
    kl_coef: float = 0.2  # the KL term's weight when the actor starts, annealed to 0 by the last update
    clip: float = 0.2
    gamma: float = 0.99
    gae_lambda: float = 0.9
    ent_coef: float = 0.0
    temperature: float = 0.5  # of the behaviour policy's softmax over the student's scores (1: its own)
    max_grad_norm: float = 0.5
    pool_every: int = 4
    eval_every: int = 10  # updates between greedy evaluations on the validation stores
    eval_stores: int = 64

    def __post_init__(self):
        for name in (
            "stores",
            "copies",
            "updates",
            "epochs",
            "minibatches",
            "critic_hidden",
            "pool_every",
            "eval_every",
        ):
            need_count(f"FinetuneConfig.{name}", getattr(self, name))
        need_count("FinetuneConfig.eval_stores", self.eval_stores)
        if not isinstance(self.critic_updates, int) or not 0 <= self.critic_updates < self.updates:
            raise ValueError(
                f"FinetuneConfig.critic_updates must be an int in [0, updates={self.updates}), got "
                f"{self.critic_updates!r}"
            )
        for name in ("lr", "critic_lr", "temperature", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"FinetuneConfig.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("kl_coef", "clip", "ent_coef"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"FinetuneConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if not (0 < self.gamma <= 1 and 0 <= self.gae_lambda <= 1):
            raise ValueError(
                f"FinetuneConfig: gamma in (0, 1] and gae_lambda in [0, 1], got {self.gamma}, {self.gae_lambda}"
            )

    def kl_weight(self, index: int) -> float:
        """The KL term's weight at update ``index``: ``kl_coef`` when the actor starts, linearly to 0 after the
        last update."""
        acting = self.updates - self.critic_updates
        return self.kl_coef * min(1.0, max(0.0, 1.0 - (index - self.critic_updates) / acting))


def _adam(lr: float, clip: float) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(clip), optax.adam(lr, eps=1e-5))


def make_update(env: Env, student: Student, config: FinetuneConfig, env_params: EnvParams, days: int):
    """``step(learner, start, pool, key, actor_on, kl_coef) -> (learner, metrics)``, jitted: one update's
    episodes and learning. metrics: dict of [] (the parts' means, the episodes' mean final net worth)."""
    actor_tx = _adam(config.lr, config.max_grad_norm)
    critic_tx = _adam(config.critic_lr, config.max_grad_norm)

    def step(learner: update.Learner, start: StudentParams, pool, key, actor_on, kl_coef):
        k_play, k_learn = jax.random.split(key)
        params = start.replace(net=learner.actor)
        keys = jax.random.split(k_play, config.stores)
        episodes = experience.collect(
            env, student, params, start, config.temperature, env_params, pool, keys, days, config.copies
        )
        learner, parts = update.learn(
            student, config, actor_tx, critic_tx, learner, episodes, k_learn, actor_on, kl_coef
        )
        metrics = {k: v.mean() for k, v in parts.items()}
        return learner, dict(
            episode_net_worth=episodes.final.mean(), survival=episodes.alive[-1].mean(), **metrics
        )

    return jax.jit(step), actor_tx, critic_tx


def make_evaluate(env: Env, student: Student, env_params: EnvParams, days: int):
    """``evaluate(params, keys [E]) -> final net worth [E]``: the student greedy on ``rbjax.rollout`` (its compiled
    programs are kept per env and policy, so each evaluation after the first runs them again)."""

    def evaluate(params: StudentParams, keys: jax.Array) -> np.ndarray:
        records, _ = rollout(env, student, params, env_params, keys, days=days)
        return np.asarray(jax.device_get(records.net_worth)[:, -1])

    return evaluate


def finetune(
    env: Env,
    env_params: EnvParams,
    student: Student,
    start: StudentParams,
    config: FinetuneConfig = FinetuneConfig(),
    seed: int = 0,
    progress: Callable[[str], None] | None = print,
    eval_seed: int = VALIDATION_SEED,
    every: int = 1,
    on_eval: Callable[[int, StudentParams], None] | None = None,
) -> tuple[StudentParams, pd.DataFrame]:
    """(the fine-tuned params, the curve): one row per update (its episodes' net worth, the loss parts, the KL to
    the start, wall seconds) and, every ``eval_every`` updates and before the first, the greedy policy's mean
    final net worth on ``eval_stores`` stores of ``eval_seed`` (``eval_net_worth``, NaN between). ``progress``
    gets a line every ``every`` updates; ``on_eval(update, params)`` sees the policy at each evaluation (after
    ``update`` updates)."""
    days = int(env_params.horizon)
    key = jax.random.key(seed)
    step, actor_tx, critic_tx = make_update(env, student, config, env_params, days)
    evaluate = make_evaluate(env, student, env_params, days)
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    eval_keys = jax.random.split(jax.random.key(eval_seed), config.eval_stores)
    P = start.net["params"]["Dense_0"]["kernel"].shape[0]  # the actor's features a product
    critic = update.critic_net(config.critic_hidden).init(
        jax.random.fold_in(key, 1),
        jnp.zeros((env.config.num_products, P + experience.HIDDEN_P)),
        jnp.zeros(STORE_G),
        jnp.ones(env.config.num_products, bool),
    )
    learner = update.Learner(
        actor=start.net,
        critic=critic,
        actor_opt=actor_tx.init(start.net),
        critic_opt=critic_tx.init(critic),
        scale=jnp.zeros((), jnp.float32),
    )
    rows, begun = [], time.perf_counter()
    pool = None
    for i in range(config.updates + 1):
        row = dict(
            update=i, store_days=i * config.stores * config.copies * days, wall_s=time.perf_counter() - begun
        )
        if i % config.eval_every == 0 or i == config.updates:
            row["eval_net_worth"] = float(np.mean(evaluate(start.replace(net=learner.actor), eval_keys)))
            if on_eval is not None:
                on_eval(i, start.replace(net=learner.actor))
        if i == config.updates:
            rows.append(row)
            break
        if i % config.pool_every == 0:
            pool = reset(jax.random.split(jax.random.fold_in(key, 2 * i + 2), config.stores), env_params)
        on, kl = i >= config.critic_updates, config.kl_weight(i)
        k = jax.random.fold_in(key, 2 * i + 3)
        learner, metrics = step(learner, start, pool, k, jnp.asarray(on), jnp.float32(kl))
        row |= {name: float(v) for name, v in metrics.items()} | dict(actor_on=on, kl_coef=kl)
        rows.append(row)
        if progress is not None and ((i + 1) % max(every, 1) == 0 or i + 1 == config.updates):
            progress(_line(row, config, time.perf_counter() - begun))
    return start.replace(net=learner.actor), pd.DataFrame(rows)


def _line(row: dict, config: FinetuneConfig, seconds: float) -> str:
    """A progress line for one update's row, ``seconds`` into the run."""
    phase = "actor" if row["actor_on"] else "critic warm-up"
    held = f"  greedy after {row['update']}: {row['eval_net_worth']:,.0f}" if "eval_net_worth" in row else ""
    return (
        f"update {row['update'] + 1}/{config.updates} ({phase})  episodes {row['episode_net_worth']:,.0f}{held}  "
        f"KL to the start {row['kl_to_start']:.4f}  critic explains {row['explained_variance']:.0%}  "
        f"{seconds:.0f} s"
    )

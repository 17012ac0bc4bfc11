"""PPO for the store, PureJaxRL-style: rollout, GAE and minibatch epochs in one jitted ``train(key)``.

The action factorises over products (``rbjax.rl.actions``) and so does the reward: each product earns its
share of the day's change in net worth (``rbjax.rl.rewards``). Products are therefore trained like the
agents of a cooperative multi-agent PPO: one importance ratio, one value and one GAE advantage per
product (one ratio for the whole 96-product action would leave the trust region after a single step,
and one store-wide advantage drowns each product's signal in the other 95). Observations are
standardised with running statistics and rewards are scaled by the running standard deviation of the
discounted per-product return. Stores auto-reset from a pool of initial states (one per store) redrawn every
``pool_every`` updates: a reset (the supplier selection among 50 attempts and the 93-day pre-opening history)
costs as much as a few hundred store days on a CPU, so it is not run at every step.

Shapes: B stores (``num_envs``), T days per update (``num_steps``), J products, F/G feature sizes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct
from flax.training.train_state import TrainState

from rbjax.checks import need_count
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.rl import actions as A
from rbjax.rl.features import encode, feature_sizes
from rbjax.rl.network import ActorCritic
from rbjax.rl.normalize import RunningStats
from rbjax.rl.ppo_policy import PPOPolicyParams, forward, network
from rbjax.rl.rewards import product_rewards


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """Static PPO settings (a change recompiles)."""

    num_envs: int = 512
    num_steps: int = 16
    total_steps: int = 2_000_000  # store-days over the whole run
    epochs: int = 3
    minibatches: int = 8
    lr: float = 1e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    ent_coef: float = 0.005
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 32
    pool_every: int = 8
    supplier_prior: float = 10.0  # scale of ``actions.supplier_score`` added to the supplier logits (0: none)

    def __post_init__(self):
        """Refuse settings PPO cannot run with (ValueError naming the field)."""
        for name in ("num_envs", "num_steps", "total_steps", "epochs", "minibatches", "hidden", "pool_every"):
            need_count(f"PPOConfig.{name}", getattr(self, name))
        for name in (
            "lr",
            "gamma",
            "gae_lambda",
            "clip",
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
            "supplier_prior",
        ):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"PPOConfig.{name} must be a finite number >= 0, got {value}")
        if not (self.lr > 0 and self.gamma <= 1 and self.gae_lambda <= 1):
            raise ValueError(
                f"PPOConfig: lr must be > 0 and gamma, gae_lambda at most 1; got lr={self.lr}, "
                f"gamma={self.gamma}, gae_lambda={self.gae_lambda}"
            )
        if self.num_envs % self.minibatches:
            raise ValueError(
                f"PPOConfig.num_envs ({self.num_envs}) must be a multiple of minibatches ({self.minibatches})"
            )
        if self.num_updates < 1:
            raise ValueError(
                f"PPOConfig.total_steps ({self.total_steps}) is below one update "
                f"(num_envs x num_steps = {self.num_envs * self.num_steps})"
            )

    @property
    def num_updates(self) -> int:
        """Updates in the run: ``total_steps // (num_envs x num_steps)`` (the remainder is not played)."""
        return self.total_steps // (self.num_envs * self.num_steps)


@struct.dataclass
class Runner:
    """The training loop's carry: optimiser state, statistics, the B stores in play and their pool."""

    train: TrainState
    obs_products: RunningStats
    obs_globals: RunningStats
    returns: RunningStats  # [] discounted-return statistics (reward scale)
    ret_acc: jax.Array  # [B, J] running discounted return per product
    obs: Any  # Observation [B]
    state: Any  # EnvState [B]
    pool: Any  # (Observation, EnvState) [B]: where a store restarts after its episode ends
    key: jax.Array


@struct.dataclass
class Transition:
    """One day of B stores as PPO learns from it (``collect`` stacks T of them: [T, B, ...])."""

    products: jax.Array  # [B, J, F] normalised
    globals_: jax.Array  # [B, G]
    supplier_prior: jax.Array  # [B, J, K] added to the supplier logits
    choice: A.Choice  # [B, J]
    logp: jax.Array  # [B, J]
    value: jax.Array  # [B, J]
    reward: jax.Array  # [B, J] scaled
    done: jax.Array  # [B]


def init_params(env: Env, config: PPOConfig, key: jax.Array):
    """Fresh network weights (flax params) for ``env``'s shapes: rows [J, F], global row [G]."""
    F, G = feature_sizes(env.config.num_suppliers)
    J = env.config.num_products
    return network(env.config.num_suppliers, config.hidden).init(key, jnp.zeros((J, F)), jnp.zeros(G))


def initial_policy(env: Env, config: PPOConfig, key: jax.Array) -> PPOPolicyParams:
    """The untrained policy ``train(key, ...)`` starts from when given no ``init`` (fresh weights, empty
    statistics)."""
    F, G = feature_sizes(env.config.num_suppliers)
    return PPOPolicyParams(
        net=init_params(env, config, jax.random.split(key, 3)[0]),
        products=RunningStats.zeros(F),
        globals_=RunningStats.zeros(G),
        greedy=jnp.asarray(False),
    )


@dataclasses.dataclass(frozen=True)
class Parts:
    """The pieces of one PPO update, each a pure function (``make_parts``); ``make_train`` composes them and
    ``benchmarks/ppo_speed.py`` times them one by one.

    collect(runner, pool, env_params) -> (runner, (Transition [T, B], stats)): T days of B stores; stats:
    dict of [T, B] arrays (nonfinite: [T]).
    learn(runner, traj) -> (runner, aux [epochs, M]): GAE, then ``epochs`` passes of M minibatches.
    reset(keys [B], env_params) -> (Observation [B], EnvState [B]): fresh stores (the pool's refill).
    """

    collect: Callable
    learn: Callable
    reset: Callable


def _batch_forward(net: ActorCritic) -> Callable:
    """``forward`` over B stores: (params, products [B, J, F], glob [B, G], prior [B, J, K]) -> (Heads [B],
    values [B, J])."""
    return jax.vmap(functools.partial(forward, net), in_axes=(None, 0, 0, 0))


def _observe(runner: Runner, config: PPOConfig, num_features: int):
    """The B stores' rows as the policy sees them, the running statistics updated with today's.

    Returns (products RunningStats, globals RunningStats, products [B, J, F], glob [B, G] normalised, prior
    [B, J, K], bad [] int32: the non-finite inputs zeroed)."""
    raw_products, raw_glob = jax.vmap(encode)(runner.obs)
    bad = jnp.sum(~jnp.isfinite(raw_products)) + jnp.sum(~jnp.isfinite(raw_glob))
    # a non-finite number would poison the running statistics for good: zero it, and count it
    raw_products, raw_glob = (
        jnp.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0) for x in (raw_products, raw_glob)
    )
    obs_p = runner.obs_products.update(raw_products.reshape(-1, num_features))
    obs_g = runner.obs_globals.update(raw_glob)
    products, glob = obs_p.normalize(raw_products), obs_g.normalize(raw_glob)
    prior = config.supplier_prior * jax.vmap(A.supplier_score)(runner.obs)
    return obs_p, obs_g, products, glob, prior, bad


def _env_step(env: Env, config: PPOConfig, net: ActorCritic, runner: Runner, pool, env_params):
    """One day of the B stores: encode and normalise, act, step, split the reward over products.

    pool: (Observation [B], EnvState [B]), where an ended store restarts. Returns (runner, (Transition [B],
    stats)): stats ended, survived, final_net_worth, reward, invalid [B] and nonfinite [] (the non-finite
    inputs zeroed today).
    """
    B = config.num_envs
    F, _ = feature_sizes(env.config.num_suppliers)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    key, k_act, k_env = jax.random.split(runner.key, 3)
    obs_p, obs_g, products, glob, prior, bad_obs = _observe(runner, config, F)
    heads, value = _batch_forward(net)(runner.train.params, products, glob, prior)
    choice = jax.vmap(A.sample)(jax.random.split(k_act, B), heads)
    logp = jax.vmap(A.log_prob)(heads, choice)
    action = jax.vmap(A.decode)(choice, runner.obs)
    obs, state, reward, term, trunc, info = step(jax.random.split(k_env, B), runner.state, action, env_params)
    done = term | trunc
    shares = jax.vmap(product_rewards, in_axes=(0, 0, 0, 0, None))(
        runner.state, state, action, info, env_params
    )
    bad = bad_obs + jnp.sum(~jnp.isfinite(shares)) + jnp.sum(~jnp.isfinite(action.price))
    shares = jnp.nan_to_num(shares, nan=0.0, posinf=0.0, neginf=0.0)
    ret_acc = runner.ret_acc * config.gamma + shares
    returns = runner.returns.update(ret_acc.reshape(-1, 1))
    scaled = shares / jnp.sqrt(returns.var[0] + 1e-8)
    pick = lambda new, fresh: jax.tree.map(
        lambda n, f: jnp.where(done.reshape(done.shape + (1,) * (n.ndim - 1)), f, n), new, fresh
    )
    stats = dict(
        ended=done,
        survived=trunc,
        final_net_worth=info.net_worth,
        reward=reward,
        nonfinite=bad,
        invalid=info.invalid_orders + info.refused_orders + info.invalid_prices + info.shelf_refused,
    )
    runner = runner.replace(
        obs=pick(obs, pool[0]),
        state=pick(state, pool[1]),
        ret_acc=jnp.where(done[:, None], 0.0, ret_acc),
        returns=returns,
        obs_products=obs_p,
        obs_globals=obs_g,
        key=key,
    )
    return runner, (
        Transition(products, glob, prior, choice, logp, value, scaled, done.astype(jnp.float32)),
        stats,
    )


def _gae(config: PPOConfig, traj: Transition, last_value: jax.Array):
    """traj: Transition [T, B]; last_value [B, J] (after the last day) -> (advantages, value targets), each
    [T, B, J], per product."""

    def back(carry, t):
        """One day back: carry (advantage, next value) [B, J] each, t: Transition [B]."""
        adv, next_value = carry
        live = 1.0 - t.done[:, None]
        delta = t.reward + config.gamma * next_value * live - t.value
        adv = delta + config.gamma * config.gae_lambda * live * adv
        return (adv, t.value), adv

    _, adv = jax.lax.scan(back, (jnp.zeros_like(last_value), last_value), traj, reverse=True)
    return adv, adv + traj.value


def _loss(config: PPOConfig, net: ActorCritic, params, batch: Transition, adv, target):
    """PPO's clipped loss on a minibatch: batch Transition [N] (N = T x B / M store-days), adv and target
    [N, J]. Returns (total [], dict of [] parts: policy_loss, value_loss, entropy, clip_frac)."""
    heads, value = _batch_forward(net)(params, batch.products, batch.globals_, batch.supplier_prior)
    logp = jax.vmap(A.log_prob)(heads, batch.choice)
    ratio = jnp.exp(jnp.clip(logp - batch.logp, -20.0, 20.0))  # [N, J] per product
    a = (adv - adv.mean()) / (adv.std() + 1e-8)
    policy = -jnp.mean(jnp.minimum(ratio * a, jnp.clip(ratio, 1 - config.clip, 1 + config.clip) * a))
    v_clipped = batch.value + jnp.clip(value - batch.value, -config.clip, config.clip)
    value_loss = 0.5 * jnp.mean(jnp.maximum((value - target) ** 2, (v_clipped - target) ** 2))
    ent = jnp.mean(jax.vmap(A.entropy)(heads))
    total = policy + config.vf_coef * value_loss - config.ent_coef * ent
    return total, dict(
        policy_loss=policy,
        value_loss=value_loss,
        entropy=ent,
        clip_frac=jnp.mean(jnp.abs(ratio - 1) > config.clip),
    )


def _epoch(config: PPOConfig, net: ActorCritic, carry, data):
    """One pass over the update's data in M minibatches of whole stores.

    carry: (TrainState, key); data: (Transition [T, B], adv [T, B, J], target [T, B, J]). Returns the new
    carry and the loss parts, dict of [M]."""
    B, M = config.num_envs, config.minibatches
    train, key = carry
    key, k_perm = jax.random.split(key)
    stores = jax.random.permutation(k_perm, B).reshape(M, B // M)  # each minibatch's stores

    def minibatch(train, picked):
        """One gradient step on the stores ``picked`` [B / M] (all T days of each)."""
        # [T, B, ...] -> [T * B / M, ...], gathered here one minibatch at a time: shuffling a copy of the
        # whole update's data and then slicing the minibatches out of it moved every byte twice
        mb = jax.tree.map(lambda x: jnp.take(x, picked, axis=1).reshape((-1,) + x.shape[2:]), data)
        grads, aux = jax.grad(functools.partial(_loss, config, net), has_aux=True)(train.params, *mb)
        return train.apply_gradients(grads=grads), aux

    train, aux = jax.lax.scan(minibatch, train, stores)
    return (train, key), aux


def make_parts(env: Env, config: PPOConfig) -> Parts:
    """The update's parts for ``env`` and ``config`` (see ``Parts``)."""
    net = network(env.config.num_suppliers, config.hidden)
    reset = jax.vmap(env.reset, in_axes=(0, None))

    def collect(runner: Runner, pool, env_params):
        """T days of ``_env_step`` (see ``Parts``): (runner, (Transition [T, B], stats: dict of [T, B]))."""
        return jax.lax.scan(
            lambda r, _: _env_step(env, config, net, r, pool, env_params),
            runner.replace(pool=pool),
            None,
            config.num_steps,
        )

    def learn(runner: Runner, traj: Transition):
        """GAE on ``traj`` (Transition [T, B]), then ``epochs`` epochs: (runner, loss parts: dict of
        [epochs, M])."""
        products, glob = jax.vmap(encode)(runner.obs)
        _, last_value = jax.vmap(net.apply, in_axes=(None, 0, 0))(  # the values only: no prior needed
            runner.train.params, runner.obs_products.normalize(products), runner.obs_globals.normalize(glob)
        )
        adv, target = _gae(config, traj, last_value)
        key, k_epochs = jax.random.split(runner.key)
        (train, _), aux = jax.lax.scan(
            lambda c, _: _epoch(config, net, c, (traj, adv, target)),
            (runner.train, k_epochs),
            None,
            config.epochs,
        )
        return runner.replace(train=train, key=key), aux

    return Parts(collect=collect, learn=learn, reset=reset)


def optimizer(config: PPOConfig) -> optax.GradientTransformation:
    """Adam with global-norm clipping and a linear learning-rate decay over the run; a step whose gradient
    is not finite is skipped (and counted)."""

    def lr(count):
        """[] learning rate at optimiser step ``count`` (epochs x minibatches steps an update)."""
        frac = 1.0 - (count // (config.minibatches * config.epochs)) / config.num_updates
        return config.lr * frac if config.anneal_lr else config.lr

    return optax.apply_if_finite(
        optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr, eps=1e-5)),
        max_consecutive_errors=1_000_000,
    )


def initial_runner(
    env: Env, config: PPOConfig, key: jax.Array, env_params: EnvParams, init: PPOPolicyParams
) -> Runner:
    """The runner ``train(key, env_params, init)`` starts from: B fresh stores (also the first pool), the
    policy ``init``, a fresh optimiser and return scale."""
    _, k_reset, k_run = jax.random.split(key, 3)
    B = config.num_envs
    obs, state = make_parts(env, config).reset(jax.random.split(k_reset, B), env_params)
    net = network(env.config.num_suppliers, config.hidden)
    return Runner(
        train=TrainState.create(apply_fn=net.apply, params=init.net, tx=optimizer(config)),
        obs_products=init.products,
        obs_globals=init.globals_,
        returns=RunningStats.zeros(1),
        ret_acc=jnp.zeros((B, env.config.num_products), env.config.float_dtype),
        obs=obs,
        state=state,
        pool=(obs, state),
        key=k_run,
    )


def make_train(env: Env, config: PPOConfig, progress: Callable | None = None):
    """Returns ``train(key, env_params, init=None) -> (Runner, metrics)``; jit it (or vmap it over keys or
    params). metrics: dict of [num_updates] arrays. ``init``: a trained ``PPOPolicyParams`` to continue from
    (its weights and observation statistics; the optimiser and the return scale start afresh).

    progress: optional host callback ``progress(update_index, metrics_of_that_update)`` (jax.debug.callback;
    a program with a host callback is not kept in JAX's persistent compilation cache).
    """
    parts = make_parts(env, config)

    def update(runner: Runner, index, env_params):
        """Update ``index`` ([] int32): refill the pool every ``pool_every`` updates, collect, learn.
        Returns (runner, metrics: dict of [] scalars over the update's T x B store-days)."""
        key, k_pool = jax.random.split(runner.key)
        pool = jax.lax.cond(
            (index % config.pool_every == 0) & (index > 0),
            lambda: parts.reset(jax.random.split(k_pool, config.num_envs), env_params),
            lambda: runner.pool,
        )
        runner, (traj, stats) = parts.collect(runner.replace(key=key), pool, env_params)
        runner, aux = parts.learn(runner, traj)
        ended = stats["ended"].sum()
        metrics = dict(
            episodes=ended,
            reward_per_day=stats["reward"].mean(),
            episode_net_worth=jnp.sum(jnp.where(stats["ended"], stats["final_net_worth"], 0.0))
            / jnp.maximum(ended, 1),
            survival=jnp.sum(stats["survived"]) / jnp.maximum(ended, 1),
            invalid_actions=stats["invalid"].sum(),
            nonfinite=stats["nonfinite"].sum(),
            skipped_steps=runner.train.opt_state.total_notfinite,
            **jax.tree.map(jnp.mean, aux),
        )
        return runner, metrics

    def train(key: jax.Array, env_params: EnvParams, init: PPOPolicyParams | None = None):
        """The whole run: (Runner, metrics: dict of [num_updates] arrays)."""
        init = initial_policy(env, config, key) if init is None else init
        runner = initial_runner(env, config, key, env_params, init)

        def update_and_report(runner, i):
            """``update`` i ([] int32), then ``progress`` on the host when given."""
            runner, metrics = update(runner, i, env_params)
            if progress is not None:
                jax.debug.callback(progress, i, metrics)
            return runner, metrics

        return jax.lax.scan(update_and_report, runner, jnp.arange(config.num_updates, dtype=jnp.int32))

    return train


def policy_params(runner: Runner, greedy: bool = False) -> PPOPolicyParams:
    """The acting part of a trained runner."""
    return PPOPolicyParams(
        net=runner.train.params,
        products=runner.obs_products,
        globals_=runner.obs_globals,
        greedy=jnp.asarray(greedy),
    )

"""One fine-tune update's learning: GAE on the episodes, then epochs of minibatches that move the critic and,
after its warm-up, the actor (PPO's clipped objective plus a KL term toward the start).

The critic is a ``StudentNet`` with one output over the actor's features and the hidden ones
(``experience.hidden_features``): the value of the store's remaining days, in units of ``scale`` (the standard
deviation of the first episodes' discounted returns, fixed for the run so the targets do not drift).

Shapes: N = T x B store-days, M minibatches, C candidates, J products.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from flax import struct

from rbjax.rl.distill.student import Student, StudentNet
from rbjax.rl.finetune.experience import Episodes, Morning


@struct.dataclass
class Learner:
    """What the updates carry: the actor's and the critic's weights and optimiser states, the reward scale."""

    actor: dict
    critic: dict
    actor_opt: optax.OptState
    critic_opt: optax.OptState
    scale: jax.Array  # [] the reward's unit (0 until the first episodes set it)


def critic_net(hidden: int) -> StudentNet:
    return StudentNet(candidates=1, hidden=hidden)


def value(net: StudentNet, params, m: Morning) -> jax.Array:
    """[...] the critic's value of the mornings ``m`` [...]."""
    products = jnp.concatenate([m.products, m.hidden], -1)
    return net.apply(params, products, m.store, m.mask)[..., 0]


def discounted_returns(reward: jax.Array, alive: jax.Array, gamma: float) -> jax.Array:
    """[T, B] the discounted sum of each day's rewards to the episode's end."""

    def back(after, t):
        r, live = t
        now = r + gamma * after * live
        return now, now

    _, ret = jax.lax.scan(back, jnp.zeros_like(reward[0]), (reward, alive.astype(reward.dtype)), reverse=True)
    return ret


def gae(reward, alive, values, gamma: float, lam: float):
    """(advantages, value targets), each [T, B]: reward, alive and values [T, B]; the episode ends after day T
    (no value after it) or where ``alive`` turns False."""
    next_alive = jnp.concatenate([alive[1:], jnp.zeros_like(alive[:1])]).astype(values.dtype)
    next_value = jnp.concatenate([values[1:], jnp.zeros_like(values[:1])]) * next_alive
    delta = reward + gamma * next_value - values

    def back(after, t):
        d, live = t
        adv = d + gamma * lam * live * after
        return adv, adv

    _, adv = jax.lax.scan(back, jnp.zeros_like(reward[0]), (delta, next_alive), reverse=True)
    return adv, adv + values


def paired(ret: jax.Array, values: jax.Array, copies: int):
    """(advantages, value targets), each [T, B x G], for G ``copies`` of each store that saw the same market draws:
    a copy's return to the episode's end less the critic's value, less the same for the store's other copies (on
    the same day). The market's noise after the day is common to the copies and cancels; the critic removes what
    their different mornings are worth. Neither term reads the copy's own choice that day, so the estimate is
    unbiased. The targets are the returns themselves."""
    T = ret.shape[0]
    surprise = (ret - values).reshape(T, -1, copies)
    others = (surprise.sum(-1, keepdims=True) - surprise) / (copies - 1)
    return (surprise - others).reshape(T, -1), ret


def losses(student: Student, config, actor, critic, batch, temperature: float, kl_coef):
    """(actor loss [], critic loss [], parts dict of []): batch = (Morning [N], advantage [N], target [N],
    live [N] float, the days played)."""
    m, adv, target, live = batch
    count = jnp.maximum(live.sum(), 1.0)
    mean = lambda x: jnp.sum(x * live) / count  # noqa: E731
    net = student.net(m.start_logp.shape[-1])
    logp_all = jax.nn.log_softmax(net.apply(actor, m.products, m.store, m.mask) / temperature)
    logp = jnp.take_along_axis(logp_all, m.choice[:, None], -1)[:, 0]
    ratio = jnp.exp(jnp.clip(logp - m.logp, -20.0, 20.0))
    a = (adv - mean(adv)) / (jnp.sqrt(mean((adv - mean(adv)) ** 2)) + 1e-8)
    clipped = jnp.clip(ratio, 1 - config.clip, 1 + config.clip)
    policy = -mean(jnp.minimum(ratio * a, clipped * a))
    kl = mean(jnp.sum(jnp.exp(m.start_logp) * (m.start_logp - logp_all), -1))  # KL(start || now)
    entropy = mean(-jnp.sum(jnp.exp(logp_all) * logp_all, -1))
    actor_loss = policy + kl_coef * kl - config.ent_coef * entropy
    critic_loss = 0.5 * mean((value(critic_net(config.critic_hidden), critic, m) - target) ** 2)
    parts = dict(
        policy_loss=policy,
        value_loss=critic_loss,
        kl_to_start=kl,
        entropy=entropy,
        clip_frac=mean((jnp.abs(ratio - 1) > config.clip).astype(adv.dtype)),
    )
    return actor_loss, critic_loss, parts


def learn(
    student: Student,
    config,
    actor_tx: optax.GradientTransformation,
    critic_tx: optax.GradientTransformation,
    learner: Learner,
    episodes: Episodes,
    key: jax.Array,
    actor_on,
    kl_coef,
):
    """(learner, parts: dict of [epochs, M], and the critic's ``explained_variance`` []): the advantages
    (``paired`` where each store was played in copies, else ``gae``), then ``config.epochs`` passes of
    ``config.minibatches`` minibatches; the actor moves only where ``actor_on`` ([] bool: the critic's warm-up
    is over)."""
    ret = discounted_returns(episodes.reward, episodes.alive, config.gamma)
    live = episodes.alive.astype(ret.dtype)
    spread = jnp.sqrt(jnp.sum(live * (ret - jnp.sum(live * ret) / live.sum()) ** 2) / live.sum())
    scale = jnp.where(learner.scale > 0, learner.scale, jnp.maximum(spread, 1e-6))
    cnet = critic_net(config.critic_hidden)
    # a day not played (after a bankruptcy) is worth nothing: the critic never learns there, so its guess must
    # not enter the paired baseline of the store's other copy
    values = jnp.where(episodes.alive, value(cnet, learner.critic, episodes.mornings), 0.0)
    if config.copies > 1:
        adv, target = paired(ret / scale, values, config.copies)
    else:
        adv, target = gae(episodes.reward / scale, episodes.alive, values, config.gamma, config.gae_lambda)
    flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
    data = jax.tree.map(flat, (episodes.mornings, adv, target, live))
    n = adv.size
    M = config.minibatches

    def minibatch(learner: Learner, picked):
        batch = jax.tree.map(lambda x: x[picked], data)
        f = functools.partial(losses, student, config, temperature=config.temperature, kl_coef=kl_coef)
        (a_grad, c_grad), parts = _grads(f, learner.actor, learner.critic, batch)
        a_upd, a_opt = actor_tx.update(a_grad, learner.actor_opt, learner.actor)
        c_upd, c_opt = critic_tx.update(c_grad, learner.critic_opt, learner.critic)
        keep = lambda new, old: jax.tree.map(lambda x, y: jnp.where(actor_on, x, y), new, old)  # noqa: E731
        return learner.replace(
            actor=keep(optax.apply_updates(learner.actor, a_upd), learner.actor),
            actor_opt=keep(a_opt, learner.actor_opt),
            critic=optax.apply_updates(learner.critic, c_upd),
            critic_opt=c_opt,
        ), parts

    def epoch(learner, k):
        order = jax.random.permutation(k, n)[: n - n % M].reshape(M, -1)
        return jax.lax.scan(minibatch, learner, order)

    learner, parts = jax.lax.scan(epoch, learner.replace(scale=scale), jax.random.split(key, config.epochs))
    # how much of the returns' spread the critic explains before this update's learning (1: all, 0: none)
    spread_of = lambda x: jnp.sum(live * (x - jnp.sum(live * x) / live.sum()) ** 2)  # noqa: E731
    parts["explained_variance"] = 1.0 - spread_of(target - values) / jnp.maximum(spread_of(target), 1e-12)
    return learner, parts


def _grads(f, actor, critic, batch):
    """((d actor loss / d actor, d critic loss / d critic), parts) in one pass."""

    def both(a, c):
        actor_loss, critic_loss, parts = f(a, c, batch)
        return actor_loss + critic_loss, parts

    # the two losses share no weights: the gradient of their sum is each one's gradient for its own network
    (ga, gc), parts = jax.grad(both, argnums=(0, 1), has_aux=True)(actor, critic)
    return (ga, gc), parts

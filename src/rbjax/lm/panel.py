"""A task's headroom: a small panel of policies played on the task with its random numbers.

Each member plays the task's decided days its own way, then the task's reference plays the continuation, as a
session is scored; every member of every task of a snapshot day runs in one batched ``lax.scan``
(``continuation.rollout_from``: the stores x members, each store's episode key shared by its members, so
they see the same demand, quotes and news). The members (``MEMBERS``):

- ``reference``: the task's reference policy (the oracle by default);
- ``null``: doing nothing (prices and shelf kept, no order), what a session that stops deciding plays;
- ``keep_prices``: the reference's shelf and orders, its prices left as they were;
- ``no_orders``: the reference's prices and shelf, no order;
- ``random``: the registry's ``random`` policy (random orders, small price moves, its own shelf);
- ``noisy_orders``: the reference with each order x exp(N(0, 0.5²)), rounded up to whole units;
- ``noisy_prices``: the reference with each price x exp(N(0, 0.1²)), every day.

A member's reward is the session's: (G - R) / scale, with the task's reference gain R and scale (a session
playing as the member would score it, up to the float rounding of two XLA programs: ``tasks.reference_gains``).
headroom = -reward(null), what the reference gains over doing nothing (relative); spread = the largest member
reward less the smallest. ``rbjax lm tasks --min-headroom X`` keeps the tasks whose headroom is at least X.

>>> rewards = panel_rewards(start, rows, days=7, tail=14, reference="oracle", gains=gains, scales=scales)
>>> headroom, spread = summarize(rewards)          # [n] each
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rbjax import policies
from rbjax.runners import continuation
from rbjax.runners.batches import batch_bucket
from rbjax.state import Action

MEMBERS = ("reference", "null", "keep_prices", "no_orders", "random", "noisy_orders", "noisy_prices")
ORDER_SIGMA, PRICE_SIGMA = 0.5, 0.1  # the noisy members' log-normal spreads
DAYS_PER_CALL = 7  # days per jitted call where it divides a task's days + tail (one program for all of them)


def full(action: Action, prices: jax.Array) -> Action:
    """``action`` with its optional fields written out (set_price, order_rank), so that two policies' actions
    share one pytree structure; the same decisions (``Action``'s docstring). prices: [J] this morning's. Order
    lines (``Action.lines``, the tools' orders) are not carried: the panel's policies order by ``order``."""
    J = prices.shape[-1]
    set_price = action.price != prices if action.set_price is None else action.set_price
    rank = jnp.arange(J, dtype=jnp.float32) if action.order_rank is None else action.order_rank
    return Action(
        price=action.price,
        shelf=action.shelf,
        order=action.order,
        set_price=set_price,
        order_rank=rank.astype(jnp.float32),
    )


def member_actions(
    ref: Action, rand: Action, obs, key: jax.Array, order_sigma=ORDER_SIGMA, price_sigma=PRICE_SIGMA
) -> Action:
    """Every member's action this morning, stacked: leaves [len(MEMBERS), ...] in ``MEMBERS`` order. ref,
    rand: the reference's and the random policy's ``full`` actions; key: the noise's; order_sigma,
    price_sigma: [] the noisy members' log-normal spreads."""
    k_o, k_p = jax.random.split(key)
    kept = dict(price=obs.prices, set_price=jnp.zeros_like(ref.set_price))
    no_order = jnp.zeros_like(ref.order)
    noisy_order = jnp.ceil(ref.order * jnp.exp(order_sigma * jax.random.normal(k_o, ref.order.shape)))
    noisy_price = ref.price * jnp.exp(price_sigma * jax.random.normal(k_p, ref.price.shape))
    members = (
        ref,
        ref.replace(shelf=obs.shelf, order=no_order, **kept),
        ref.replace(**kept),
        ref.replace(order=no_order),
        rand,
        ref.replace(order=noisy_order.astype(ref.order.dtype)),
        ref.replace(price=noisy_price.astype(ref.price.dtype), set_price=jnp.ones_like(ref.set_price)),
    )
    return jax.tree.map(lambda *xs: jnp.stack(xs), *members)


@dataclasses.dataclass(frozen=True)
class PanelPolicy:
    """A policy that plays panel member ``member`` on the mornings before ``switch_day`` and ``reference`` from
    then on. params: ((reference's params, the random policy's params), (member [] int32, switch_day [] int32,
    order_sigma [], price_sigma [] float32)). Equal for equal references (a planner by its settings), so the
    program cache compiles its rollouts once per reference."""

    reference: Callable

    def __call__(self, params, obs, privileged, key) -> Action:
        (ref_params, random_params), (member, switch_day, order_sigma, price_sigma) = params
        random_fn = policies.POLICIES["random"].fn
        ref = full(self.reference(ref_params, obs, privileged, key), obs.prices)
        rand = full(random_fn(random_params, obs, privileged, jax.random.fold_in(key, 1)), obs.prices)
        noise = jax.random.fold_in(key, 2)
        every = member_actions(ref, rand, obs, noise, order_sigma, price_sigma)
        mine = jax.tree.map(lambda x: x[member], every)
        return jax.tree.map(lambda m, r: jnp.where(obs.day < switch_day, m, r), mine, ref)


def member_gains(
    env,
    snap,
    rows: Sequence[int],
    members: Sequence[int],
    days: int,
    tail: int,
    reference: str,
    order_sigmas=None,
    price_sigmas=None,
) -> np.ndarray:
    """[len(members), n] each member's net-worth gain over ``days`` decided days and ``tail`` days of
    ``reference`` from the snapshot ``snap``'s stores ``rows`` ([n]), every member on each store's own
    random numbers (one ``rollout_from``). members: indices into ``MEMBERS``; order_sigmas, price_sigmas:
    [len(members)] the noisy members' spreads (default ``ORDER_SIGMA``, ``PRICE_SIGMA``)."""
    given, M = len(rows), len(members)
    rows = np.asarray(rows, np.int64)
    rows = np.concatenate([rows, np.repeat(rows[-1:], batch_bucket(given) - given)])  # a few batch sizes, so
    n = len(rows)  # a few compilations; the extra stores copy the last one and are dropped
    spreads = lambda per_member, default: np.repeat(  # noqa: E731
        np.full(M, default, np.float32) if per_member is None else per_member, n
    )
    state = jax.tree.map(lambda x: np.concatenate([np.asarray(x)[rows]] * M), snap.state)
    keys = jnp.concatenate([snap.keys[rows]] * M)  # member-major: store b = m * n + s
    per_store = (
        jnp.asarray(np.repeat(np.asarray(members, np.int32), n)),
        jnp.full(M * n, snap.day + days, jnp.int32),
        jnp.asarray(spreads(order_sigmas, ORDER_SIGMA), jnp.float32),
        jnp.asarray(spreads(price_sigmas, PRICE_SIGMA), jnp.float32),
    )
    shared = (policies.make(reference, env)[1], policies.make("random", env)[1])
    total = days + tail
    records, _ = continuation.rollout_from(
        env,
        PanelPolicy(policies.make(reference, env)[0]),
        (shared, per_store),
        snap.env_params(env),
        state,
        keys,
        snap.day,
        total,
        policy_axes=(None, 0),
        days_per_call=DAYS_PER_CALL if total % DAYS_PER_CALL == 0 else total,
    )
    start_nw = np.asarray(snap.state.net_worth, np.float64)[rows]
    return (np.asarray(records.net_worth, np.float64)[:, -1].reshape(M, n) - start_nw)[:, :given]


def panel_rewards(
    start, rows: Sequence[int], days: int, tail: int, reference: str, gains, scales
) -> np.ndarray:
    """[n, len(MEMBERS)] each member's reward on the tasks of ``start``'s snapshot stores ``rows`` ([n]) of
    ``days`` decided days and ``tail`` days of ``reference``'s continuation. gains, scales: [n] the tasks'
    reference gains and scales."""
    played = member_gains(start.env, start.snapshot, rows, range(len(MEMBERS)), days, tail, reference)
    return ((played - np.asarray(gains, np.float64)) / np.asarray(scales, np.float64)).T


def summarize(rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(headroom [n], spread [n]) of ``panel_rewards``' [n, len(MEMBERS)]: -reward(null) and max - min."""
    rewards = np.asarray(rewards, np.float64)
    return -rewards[:, MEMBERS.index("null")], rewards.max(1) - rewards.min(1)

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

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.state import Action

MEMBERS = ("reference", "null", "keep_prices", "no_orders", "random", "noisy_orders", "noisy_prices")
ORDER_SIGMA, PRICE_SIGMA = 0.5, 0.1  # the noisy members' log-normal spreads
DAYS_PER_CALL = 7  # days per jitted call: one program for every task length


def full(action: Action, prices: jax.Array) -> Action:
    """``action`` with its optional fields written out (set_price, order_rank), so that two policies' actions
    share one pytree structure; the same decisions (``Action``'s docstring). prices: [J] this morning's."""
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


def member_actions(ref: Action, rand: Action, obs, key: jax.Array) -> Action:
    """Every member's action this morning, stacked: leaves [len(MEMBERS), ...] in ``MEMBERS`` order. ref,
    rand: the reference's and the random policy's ``full`` actions; key: the noise's."""
    k_o, k_p = jax.random.split(key)
    kept = dict(price=obs.prices, set_price=jnp.zeros_like(ref.set_price))
    no_order = jnp.zeros_like(ref.order)
    noisy_order = jnp.ceil(ref.order * jnp.exp(ORDER_SIGMA * jax.random.normal(k_o, ref.order.shape)))
    noisy_price = ref.price * jnp.exp(PRICE_SIGMA * jax.random.normal(k_p, ref.price.shape))
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


def panel_policy(reference):
    """A policy that plays panel member ``member`` on the mornings before ``switch_day`` and ``reference`` from
    then on. params: ((reference's params, the random policy's params), (member [] int32, switch_day [] int32))."""
    from rbjax import policies

    random_fn = policies.POLICIES["random"].fn

    def play(params, obs, privileged, key):
        (ref_params, random_params), (member, switch_day) = params
        ref = full(reference(ref_params, obs, privileged, key), obs.prices)
        rand = full(random_fn(random_params, obs, privileged, jax.random.fold_in(key, 1)), obs.prices)
        mine = jax.tree.map(lambda x: x[member], member_actions(ref, rand, obs, jax.random.fold_in(key, 2)))
        return jax.tree.map(lambda m, r: jnp.where(obs.day < switch_day, m, r), mine, ref)

    return play


def panel_rewards(
    start, rows: Sequence[int], days: int, tail: int, reference: str, gains, scales
) -> np.ndarray:
    """[n, len(MEMBERS)] each member's reward on the tasks of ``start``'s snapshot stores ``rows`` ([n]) of
    ``days`` decided days and ``tail`` days of ``reference``'s continuation. gains, scales: [n] the tasks'
    reference gains and scales."""
    from rbjax import policies
    from rbjax.runners import continuation

    snap, env = start.snapshot, start.env
    rows, M = np.asarray(rows, np.int64), len(MEMBERS)
    n = len(rows)
    state = jax.tree.map(lambda x: np.concatenate([np.asarray(x)[rows]] * M), snap.state)
    keys = jnp.concatenate([snap.keys[rows]] * M)  # member-major: store b = m * n + s
    member = np.repeat(np.arange(M, dtype=np.int32), n)
    shared = (policies.make(reference, env)[1], policies.make("random", env)[1])
    per_store = (jnp.asarray(member), jnp.full(M * n, snap.day + days, jnp.int32))
    total = days + tail
    per_call = DAYS_PER_CALL if total % DAYS_PER_CALL == 0 else total
    records, _ = continuation.rollout_from(
        env,
        panel_policy(policies.make(reference, env)[0]),
        (shared, per_store),
        snap.env_params(env),
        state,
        keys,
        snap.day,
        total,
        policy_axes=(None, 0),
        days_per_call=per_call,
    )
    start_nw = np.asarray(snap.state.net_worth, np.float64)[rows]
    gain = np.asarray(records.net_worth, np.float64)[:, -1].reshape(M, n) - start_nw
    return ((gain - np.asarray(gains, np.float64)) / np.asarray(scales, np.float64)).T


def summarize(rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(headroom [n], spread [n]) of ``panel_rewards``' [n, len(MEMBERS)]: -reward(null) and max - min."""
    rewards = np.asarray(rewards, np.float64)
    return -rewards[:, MEMBERS.index("null")], rewards.max(1) - rewards.min(1)

"""A lookahead planner: the batched engine as its own model, with common random numbers.

Each planned morning, for every store, the planner builds C candidate actions for today (the base policy's
action and variations of it), plays each one H days ahead in the simulator (today the candidate, then the
base policy) over M simulated futures, the same M futures for every candidate, and plays the candidate whose
mean net worth after the H days is highest. Candidate 0 is the base action, so the planner only departs from
the base policy where the simulated futures say it pays.

Privileged, and said so: it reads the store's true state and parameters through ``Privileged.state`` and
``Privileged.params`` (``Env.privileged``), as the oracle reads the hidden supplier quality. It is an upper
bound for agents, not an agent.

No leaked randomness: the futures are drawn from the policy key the runner hands every policy (never the
store's run key, which the planner cannot reach), and every future redraws what the store has already drawn
for later days (``rbjax.model.future_draws``: the world's key, so the quotes, tier rule and news of every later
day; the tier pairs and lengths of the cycles to come; the news items' days left). The planner reads today's
state, quotes and news, as the oracle does, and the store's true parameters; ``future_draws.KEPT`` lists what
it reads as it is, and why.

The candidates (``candidate_actions``), for the products the base action shelves:
  - the base action (always candidate 0, exactly: the same calls, so the same action counts);
  - ``price_moves``: every shelved product's price times m (rounded to cents): these explore prices the
    history has never seen, which the paper's oracle never does;
  - ``order_moves``: the base orders times o (o = 0: order nothing today);
  - ``cheapest`` (off by default): the base orders placed with each product's cheapest supplier instead.

Cost: a planned day simulates C x M x H store-days per store (``simulated_days``). ``every`` plans one day in
``every`` and plays the base action on the others; under one ``vmap`` over stores a day that no store plans
costs one base action (``unless_all_skip``), so the cost falls by ``every``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from rbjax.kernels.batching import unless_all_skip
from rbjax.kernels.halving import sequential_halving, survivors
from rbjax.kernels.rng import day_keys
from rbjax.model import future_draws
from rbjax.policies.oracle import OracleParams, oracle
from rbjax.policies.params_check import require
from rbjax.state import Action, Observation, Privileged

_FUTURES, _WORLD = 0x504C414E, 0x574F524C  # fold-in tags of the planner's streams ("PLAN", "WORL")


@struct.dataclass
class PlannerParams:
    """The planner's numbers (a sweep may vary them; their lengths fix the number of candidates).

    base: the base policy's params (``OracleParams`` for the default base, the oracle).
    price_moves: [P] price multipliers tried on every shelved product (1.0 would repeat the base).
    order_moves: [O] multipliers of the base orders (0: no order today).
    cheapest: also try the base orders placed with each product's cheapest supplier (static: it adds a
        candidate; off by default, as it costs net worth: ``docs/results.md``, "Beyond the oracle").
    """

    base: Any
    price_moves: jax.Array
    order_moves: jax.Array
    cheapest: bool = struct.field(pytree_node=False, default=False)

    def check(self) -> None:
        require(self, "price_moves", lambda x: x > 0, "> 0 (price multipliers)")
        require(self, "order_moves", lambda x: x >= 0, ">= 0 (order multipliers)")
        if not isinstance(self.cheapest, bool):
            raise ValueError(f"PlannerParams.cheapest must be True or False, got {self.cheapest!r}")
        if dataclasses.is_dataclass(self.base) and hasattr(self.base, "check"):
            self.base.check()

    @property
    def candidates(self) -> int:
        """C, the candidates of a planned day (the base action included)."""
        return 1 + len(self.price_moves) + len(self.order_moves) + int(self.cheapest)


def default_params(base_params: Any, cheapest: bool = False, **moves) -> PlannerParams:
    """The shipped settings: prices x 0.9, 1.25, 1.5, 2, 3 and orders x 0, 0.5, 2 (C = 9 with the base
    action); ``moves`` replace ``price_moves`` or ``order_moves`` (sequences of floats), ``cheapest`` adds the
    cheapest-supplier candidate."""
    base = dict(
        price_moves=jnp.asarray([0.9, 1.25, 1.5, 2.0, 3.0], jnp.float32),
        order_moves=jnp.asarray([0.0, 0.5, 2.0], jnp.float32),
    )
    unknown = set(moves) - set(base)
    if unknown:
        raise ValueError(
            f"PlannerParams has no field {sorted(unknown)[0]!r} (price_moves, order_moves, cheapest)"
        )
    given = {k: jnp.asarray(v, jnp.float32).reshape(-1) for k, v in moves.items()}
    return PlannerParams(base=base_params, **{**base, **given}, cheapest=bool(cheapest))


def candidate_actions(params: PlannerParams, base: Action, obs: Observation) -> Action:
    """The C candidate actions, leaves [C, ...]; candidate 0 is ``base``.

    base: the base policy's action (price, shelf [J], order [J, K]); obs: this morning's Observation.
    Candidate 0 makes the base action's calls exactly (a base that leaves ``set_price`` unset calls a price
    where it differs from today's, as the step reads it). Price moves act on the products ``base`` shelves and
    add them to ``set_price``; order moves scale every order (floored to whole units); the cheapest-supplier
    candidate (``params.cheapest``) moves each product's units to its cheapest quote.
    """
    f = obs.prices.dtype
    set_price = (base.price.astype(f) != obs.prices) if base.set_price is None else base.set_price
    rank = base.order_rank

    def like(price=base.price, set_p=set_price, order=base.order):
        return Action(
            price=price.astype(f), shelf=base.shelf, order=order.astype(f), set_price=set_p, order_rank=rank
        )

    out = [like()]
    for m in params.price_moves:
        moved = jnp.round(base.price * m * 100.0) / 100.0  # whole cents, as an agent's set_price writes them
        out.append(like(price=jnp.where(base.shelf, moved, base.price), set_p=set_price | base.shelf))
    for o in params.order_moves:
        out.append(like(order=jnp.floor(base.order * o)))
    if params.cheapest:
        K = obs.quote_price.shape[-1]
        cheapest = jnp.argmin(obs.quote_price, axis=-1)
        out.append(
            like(order=jnp.where(jnp.arange(K) == cheapest[:, None], base.order.sum(-1, keepdims=True), 0.0))
        )
    return jax.tree.map(lambda *x: jnp.stack(x), *out)


@dataclasses.dataclass(frozen=True, eq=False)
class Planner:
    """The planner as a policy: ``planner(params, obs, privileged, key) -> Action`` (``PlannerParams``).

    env: the Env it simulates (the one the store runs in); base: the base policy ``base(base_params, obs,
    privileged, key)`` played after today in every future (and today in candidate 0); futures: M, simulated
    futures per candidate; horizon: H, days each future runs (today included); every: plan one day in
    ``every`` (days ``0, every, 2 every, ...`` since the opening), the base action on the others; halving:
    sequential halving in two rounds (every candidate meets the first half of the futures, the better half of
    them, the base action always among them, the second half too; the best mean over all futures of those is
    played), which costs 3/4 of the plain plan.
    """

    env: Any
    base: Callable
    futures: int = 4
    horizon: int = 14
    every: int = 1
    halving: bool = False

    def __post_init__(self):
        for name in ("futures", "horizon", "every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Planner.{name} must be an int >= 1, got {value!r}")
        if self.halving and self.futures < 2:
            raise ValueError(f"Planner.halving needs futures >= 2 (two rounds), got {self.futures}")
        if isinstance(self.base, Planner):
            raise ValueError(
                "Planner.base must be a policy that does not plan (its futures would plan again)"
            )

    def simulated_days(self, params: PlannerParams) -> int:
        """Store-days simulated per planned store-day: C x M x H (with halving, C x M1 x H + C2 x M2 x H)."""
        C, M, H = params.candidates, self.futures, self.horizon
        if not self.halving:
            return C * M * H
        return (C * (M // 2) + survivors(C) * (M - M // 2)) * H

    def __call__(self, params: PlannerParams, obs: Observation, privileged: Privileged, key) -> Action:
        if privileged.state is None or privileged.params is None:
            raise ValueError(
                "the planner simulates the store: call it with env.privileged(state, params), which carries "
                "the true state and params"
            )
        if key is None:
            raise ValueError(
                "the planner draws its futures from the policy key: call it with a key, not None"
            )
        k_base, k_plan = jax.random.split(key)
        base = self.base(params.base, obs, privileged, k_base)
        if self.every == 1:
            return self.plan(params, base, obs, privileged, k_plan)
        planned_today = obs.day % self.every == 0
        return unless_all_skip(self.plan, planned_today, base, (params, base, obs, privileged, k_plan))

    def plan(
        self, params: PlannerParams, base: Action, obs: Observation, privileged: Privileged, key
    ) -> Action:
        """The candidate with the best mean net worth after ``horizon`` days over ``futures`` futures."""
        candidates = candidate_actions(params, base, obs)
        keys = future_keys(key, self.futures)
        if not self.halving:
            best = jnp.argmax(self.values(params, candidates, privileged, keys).mean(-1))
            return jax.tree.map(lambda x: x[best], candidates)  # ties go to the lowest index: the base
        some = lambda idx, ks: self.values(params, jax.tree.map(lambda x: x[idx], candidates), privileged, ks)
        best = sequential_halving(some, params.candidates, keys)
        return jax.tree.map(lambda x: x[best], candidates)

    def values(self, params: PlannerParams, candidates: Action, privileged: Privileged, keys) -> jax.Array:
        """[C, M] net worth after ``horizon`` days of each candidate (leaves [C, ...]) in each future of ``keys``
        ([M], ``future_keys``): every candidate meets the same M futures."""
        state, env_params = privileged.state, privileged.params
        one = lambda action, k: self.future(params.base, state, env_params, action, k)
        return jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, None))(candidates, keys)

    def future(self, base_params, state, env_params, action: Action, key) -> jax.Array:
        """[] net worth after today's ``action`` and ``horizon - 1`` base days in the future of ``key``, in a
        state whose draws for later days are the future's own (``own_future``)."""
        env = self.env
        state = own_future(state, env_params, key)
        _, k_env = day_keys(key, 0)
        obs, state, *_ = env.step(k_env, state, action, env_params)

        def day(carry, h):
            obs, state = carry
            k_pol, k_env = day_keys(key, h)
            act = self.base(base_params, obs, env.privileged(state, env_params), k_pol)
            obs, state, *_ = env.step(k_env, state, act, env_params)
            return (obs, state), None

        (_, state), _ = jax.lax.scan(day, (obs, state), jnp.arange(1, self.horizon, dtype=jnp.int32))
        return state.net_worth


def own_future(state, env_params, key):
    """``state`` with every draw the store made for later days redrawn from the future's ``key``
    (``future_draws.redraw``: quotes, tier rule and news of every later day, the cycles to come, the news
    items' days left); today's state stays."""
    return future_draws.redraw(state, env_params, jax.random.fold_in(key, _WORLD))


def future_keys(key, futures: int) -> jax.Array:
    """[M] the planner's future keys from its policy key (a typed key; raw uint32 key data is wrapped)."""
    if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.wrap_key_data(key)
    return jax.random.split(jax.random.fold_in(key, _FUTURES), futures)


def make_planner(
    env,
    base: Callable = oracle,
    base_params: Any = None,
    futures: int = 4,
    horizon: int = 14,
    every: int = 1,
    halving: bool = False,
    **moves,
):
    """(Planner, its default PlannerParams) for ``env`` over the policy ``base`` (one that does not plan; the
    oracle by default) with ``base_params`` (None: the oracle's defaults); ``moves`` go to ``default_params``
    (price_moves, order_moves, cheapest). The same arguments give the same Planner object, so its compiled
    programs are reused (``rbjax.policies.make("plan", env, plan=PlanSettings(...))`` names the base instead)."""
    if base_params is None:
        if base is not oracle:
            raise ValueError("make_planner: give base_params for a base policy other than the oracle")
        base_params = OracleParams.default()
    key = (id(env), base, futures, horizon, every, halving)
    if key not in _PLANNERS:
        _PLANNERS[key] = Planner(env, base, futures=futures, horizon=horizon, every=every, halving=halving)
    return _PLANNERS[key], default_params(base_params, **moves)


_PLANNERS: dict[tuple, Planner] = {}  # (id(env), settings) -> Planner; the env is held by its Planner

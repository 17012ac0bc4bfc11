"""A lookahead planner: the batched engine as its own model, with common random numbers.

Each planned morning, for every store, the planner builds C candidate actions for today (the base policy's
action and variations of it), plays each one H days ahead in the simulator (today the candidate, then the
base policy) over M simulated futures, the same M futures for every candidate, and plays the candidate whose
mean net worth after the H days is highest. Candidate 0 is the base action, so the planner only departs from
the base policy where the simulated futures say it pays.

Privileged, and said so: it reads the store's true state and parameters through ``Privileged.state`` and
``Privileged.params`` (``Env.privileged``), as the oracle reads the hidden supplier quality. It is an upper
bound for agents, not an agent. ``PlanSettings(view="agent")`` (``plan_obs``) is the planner an agent could run:
it reads the state only through ``rbjax.policies.belief_state`` (every hidden field masked, then drawn from the
belief per future), which ``tests/policies/test_plan_obs.py`` checks field by field.

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

Two kinds of settings: ``PlanSettings`` (frozen, hashable, every default declared there once) holds what
changes the planner's programs: the base policy, M futures, H days, the cadence, halving, the candidate kinds;
``PlannerParams`` (a pytree) holds what a sweep may vary: the base's params and the moves' values. Two
``Planner`` objects of one env and equal settings are equal, so they share their compiled programs.

Cost: a planned day simulates C x M x H store-days per store (``simulated_days``). ``every`` plans one day in
``every`` and plays the base action on the others; under one ``vmap`` over stores a day that no store plans
costs one base action (``unless_all_skip``), so the cost falls by ``every``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from rbjax.arguments import ArgumentError
from rbjax.counts import need_count
from rbjax.day_loop import scan_days
from rbjax.kernels.batching import unless_all_skip
from rbjax.kernels.halving import sequential_halving, survivors
from rbjax.model import future_draws
from rbjax.params import EnvParams
from rbjax.policies import belief_state
from rbjax.policies.belief import sample_tiers
from rbjax.policies.params_check import require
from rbjax.policies.table import POLICIES
from rbjax.state import Action, EnvState, Observation, Privileged

_FUTURES, _WORLD = 0x504C414E, 0x574F524C  # fold-in tags of the planner's streams ("PLAN", "WORL")
_BELIEF, _MOVES = 0x42454C49, 0x4D4F5645  # a future's hidden state, the supplier moves' draw ("BELI", "MOVE")
VIEWS = ("state", "agent")  # what a planner reads (``PlanSettings.view``)
# the planner's students, which do not plan: a base by name, loaded from their shipped (or given) checkpoint by
# ``rbjax.policies.make`` (policy iteration's next teacher: the planner on its last student)
STUDENT_BASES = ("distilled", "distilled_obs", "distilled_belief")
SUPPLIER_MOVES = 2  # the agent view's supplier candidates: a Thompson draw's best, the cheapest likely good


class Model(Protocol):
    """What the planner needs of the store it simulates (``rbjax.env.Env`` is one): a day, and the view an
    oracle policy reads."""

    def step(self, key: jax.Array, state: EnvState, action: Action, params: EnvParams) -> tuple:
        """(obs, state, reward, terminated, truncated, info) after one day."""
        ...

    def privileged(self, state: EnvState, params: EnvParams) -> Privileged:
        """The hidden view of ``state`` a privileged policy reads."""
        ...


@dataclasses.dataclass(frozen=True)
class PlanSettings:
    """Every setting that changes the planner's programs, each declared here once with its default.

    base: the policy played after today in every future (and today in candidate 0): a name of
        ``rbjax.policies.table.POLICIES`` or of a shipped student (``STUDENT_BASES``, loaded by
        ``rbjax.policies.make``: what a run's manifest records), or a policy function that does not plan (a
        student, ``rbjax.rl.distill``); its params are ``PlannerParams.base``.
    futures: M, simulated futures per candidate; horizon: H, days each future runs (today included).
    every: plan one day in ``every`` (days ``0, every, 2 every, ...`` since the opening), the base action on the
        others.
    halving: sequential halving in two rounds (``rbjax.kernels.halving``: every candidate meets the first half
        of the futures, the better half of them, the base action always among them, the second half too),
        which costs 3/4 of the plain plan.
    cheapest: also try the base orders placed with each product's cheapest supplier (one more candidate; off by
        default, as it costs net worth: ``docs/results.md``, "Beyond the oracle").
    view: what the planner reads. ``"state"``: the store's true state and params (privileged, an upper bound).
        ``"agent"``: only what the tools show (``rbjax.policies.belief_state.visible``): each future starts from a
        hidden state drawn from the belief (``belief_state.sample``), today's base action reads the belief
        (``honest_view``: the cheapest supplier it holds good, the news at its mean strength), and two more
        candidates move the base orders to another supplier (``supplier_moves``): the observation-only planner,
        ``plan_obs``.

    The defaults plan every day, the best setting measured: a 16-store, 180-day run takes about two and a half
    minutes on a 2-core CPU, compilation included; ``every=7`` a minute. Raises ``ArgumentError`` naming the
    field for a value it cannot plan with.
    """

    base: str | Callable = "oracle"
    futures: int = 4
    horizon: int = 14
    every: int = 1
    halving: bool = False
    cheapest: bool = False
    view: str = "state"

    def __post_init__(self):
        for name in ("futures", "horizon", "every"):  # kept as ints (3.0 -> 3): shapes and hashes read them
            count = need_count(
                f"{{{name}}}", getattr(self, name), whole=True, error=lambda m, n=name: ArgumentError(m, n)
            )
            object.__setattr__(self, name, count)
        for name in ("halving", "cheapest"):
            if not isinstance(getattr(self, name), bool):
                raise ArgumentError(f"{{{name}}} {getattr(self, name)!r}: must be True or False", name)
        if self.view not in VIEWS:
            raise ArgumentError(f"{{view}} {self.view!r}: must be one of {', '.join(VIEWS)}", "view")
        if self.halving and self.futures < 2:
            raise ArgumentError(
                "{halving} needs {futures} 2 or more (two rounds of futures), got " + str(self.futures),
                "halving",
                "futures",
            )
        if isinstance(self.base, str):
            if self.base not in (*POLICIES, *STUDENT_BASES):
                known = ", ".join((*POLICIES, *STUDENT_BASES))
                raise ArgumentError(
                    f"{{base}} {self.base!r}: not a policy that does not plan ({known})", "base"
                )
        elif isinstance(self.base, Planner) or not callable(self.base):
            raise ArgumentError(
                "{base} must be a policy that does not plan (its futures would plan again)", "base"
            )

    @property
    def base_policy(self) -> Callable:
        """The base policy's function (a student's name is loaded by ``rbjax.policies.make``, not here)."""
        if isinstance(self.base, str) and self.base in STUDENT_BASES:
            raise ValueError(
                f"the planner's base {self.base!r} is a student: make the planner with rbjax.policies.make"
            )
        return POLICIES[self.base].fn if isinstance(self.base, str) else self.base

    def as_dict(self) -> dict:
        """The settings as a run's manifest records them (a named base only)."""
        if not isinstance(self.base, str):
            raise ValueError("PlanSettings.as_dict: only a planner whose base is named can be recorded")
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, record: dict) -> PlanSettings:
        """The settings ``as_dict`` recorded (a record without ``cheapest`` or ``view`` predates it: off, the true
        state). ValueError for a record that is not one."""
        if not isinstance(record, dict):
            raise ValueError(f"the planner's settings must be a JSON object, got {type(record).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        if not set(record) <= fields or not set(record) >= fields - {"cheapest", "view"}:
            raise ValueError(f"the planner's settings must have the fields {', '.join(sorted(fields))}")
        return cls(**record)


@struct.dataclass
class PlannerParams:
    """The planner's numbers, what a sweep may vary (the moves' lengths fix the number of candidates).

    base: the base policy's params (``OracleParams`` for the default base, the oracle).
    price_moves: [P] price multipliers tried on every shelved product (1.0 would repeat the base).
    order_moves: [O] multipliers of the base orders (0: no order today).
    """

    base: Any
    price_moves: jax.Array
    order_moves: jax.Array

    def check(self) -> None:
        require(self, "price_moves", lambda x: x > 0, "> 0 (price multipliers)")
        require(self, "order_moves", lambda x: x >= 0, ">= 0 (order multipliers)")
        if dataclasses.is_dataclass(self.base) and hasattr(self.base, "check"):
            self.base.check()

    def candidate_count(self, cheapest: bool = False, suppliers: int = 0) -> int:
        """C, the candidate actions ``candidate_actions`` makes of these params: the base action, P price and O
        order moves, the cheapest supplier's where ``cheapest``, and ``suppliers`` supplier moves."""
        return 1 + len(self.price_moves) + len(self.order_moves) + int(cheapest) + suppliers


def default_params(base_params: Any, **moves) -> PlannerParams:
    """The shipped moves: prices x 0.9, 1.25, 1.5, 2, 3 and orders x 0, 0.5, 2 (C = 9 with the base action);
    ``moves`` replace ``price_moves`` or ``order_moves`` (sequences of floats)."""
    base = dict(
        price_moves=jnp.asarray([0.9, 1.25, 1.5, 2.0, 3.0], jnp.float32),
        order_moves=jnp.asarray([0.0, 0.5, 2.0], jnp.float32),
    )
    unknown = set(moves) - set(base)
    if unknown:
        raise ValueError(f"PlannerParams has no field {sorted(unknown)[0]!r} (price_moves, order_moves)")
    given = {k: jnp.asarray(v, jnp.float32).reshape(-1) for k, v in moves.items()}
    return PlannerParams(base=base_params, **{**base, **given})


def candidate_actions(
    params: PlannerParams, base: Action, obs: Observation, cheapest: bool = False, suppliers=None
) -> Action:
    """The C candidate actions, leaves [C, ...]; candidate 0 is ``base``.

    base: the base policy's action (price, shelf [J], order [J, K]); obs: this morning's Observation.
    Candidate 0 makes the base action's calls exactly (a base that leaves ``set_price`` unset calls a price
    where it differs from today's, as the step reads it). Price moves act on the products ``base`` shelves and
    add them to ``set_price``; order moves scale every order (floored to whole units); ``cheapest`` adds a
    candidate that moves each product's units to its cheapest quote; ``suppliers`` ([S, J] int, or None) adds S
    candidates that move each product's units to the supplier given.
    """
    f = obs.prices.dtype
    set_price = as_candidate(base, obs).set_price
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
    K = obs.quote_price.shape[-1]
    moved_to = lambda k: like(
        order=jnp.where(jnp.arange(K) == k[:, None], base.order.sum(-1, keepdims=True), 0.0)
    )
    if cheapest:
        out.append(moved_to(jnp.argmin(obs.quote_price, axis=-1)))
    for k in [] if suppliers is None else suppliers:
        out.append(moved_to(k))
    return jax.tree.map(lambda *x: jnp.stack(x), *out)


def supplier_moves(belief, params: EnvParams, obs: Observation, key) -> jax.Array:
    """[SUPPLIER_MOVES, J] suppliers the agent view's candidates move the base orders to: the best (then
    cheapest) of one draw of the tiers (Thompson sampling: it buys information where the belief is unsure), and
    the cheapest quote among the suppliers the belief holds Q1-Q3 with probability 0.9 or more (the best mean
    quality where none is)."""
    drawn = sample_tiers(belief, jax.random.fold_in(key, _MOVES))
    best = drawn == drawn.min(-1, keepdims=True)
    thompson = jnp.argmin(jnp.where(best, obs.quote_price, jnp.inf), -1)
    good = belief.tier[..., :3].sum(-1) >= 0.9
    mean = belief.mean_quality(params)
    likely = jnp.argmin(jnp.where(good, obs.quote_price, jnp.inf), -1)
    cheap_good = jnp.where(good.any(-1), likely, jnp.argmax(mean, -1))
    return jnp.stack([thompson, cheap_good]).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class Planner:
    """The planner as a policy: ``planner(params, obs, privileged, key) -> Action`` (``PlannerParams``).

    env: the model it simulates (the Env the store runs in; ``Model``); settings: ``PlanSettings``. Equal for
    one env and equal settings (the env by identity), so the program cache (``rbjax.programs``), which
    keys a program by its policy, compiles a planner's programs once however often it is made.
    """

    env: Model
    settings: PlanSettings = PlanSettings()

    def __post_init__(self):
        if not isinstance(self.settings, PlanSettings):
            raise ValueError(f"Planner.settings must be a PlanSettings, got {type(self.settings).__name__}")

    @property
    def base(self) -> Callable:
        """The base policy's function."""
        return self.settings.base_policy

    def candidate_count(self, params: PlannerParams) -> int:
        """C, the candidates of a planned day: ``params``' moves, the cheapest supplier's where ``cheapest``, and
        ``SUPPLIER_MOVES`` more in the agent's view."""
        s = self.settings
        return params.candidate_count(s.cheapest, SUPPLIER_MOVES * (s.view == "agent"))

    def simulated_days(self, params: PlannerParams) -> int:
        """Store-days simulated per planned store-day: C x M x H (with halving, C x M1 x H + C2 x M2 x H)."""
        s = self.settings
        C, M, H = self.candidate_count(params), s.futures, s.horizon
        if not s.halving:
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
        today = privileged
        if self.settings.view == "agent":  # today's base action reads the belief, not the truth
            seen, public, _, view = belief_state.honest_of(privileged, obs.category, "the planner")
            today = view.replace(state=seen, params=public)  # a base that reads the belief computes it again
        base = self.base(params.base, obs, today, k_base)
        every = self.settings.every
        if every == 1:
            return self.plan(params, base, obs, privileged, k_plan)
        return unless_all_skip(self.plan, obs.day % every == 0, base, (params, base, obs, privileged, k_plan))

    def candidates(self, params: PlannerParams, base: Action, obs: Observation, privileged: Privileged, key):
        """The day's C candidate actions (``candidate_actions``; in the agent's view with ``supplier_moves``
        drawn from the belief with ``key``)."""
        moves = None
        if self.settings.view == "agent":
            _, public, belief = belief_state.belief_of(privileged.state, privileged.params)
            moves = supplier_moves(belief, public, obs, key)
        return candidate_actions(params, base, obs, self.settings.cheapest, moves)

    def plan(
        self, params: PlannerParams, base: Action, obs: Observation, privileged: Privileged, key
    ) -> Action:
        """The candidate with the best mean net worth after ``horizon`` days over ``futures`` futures."""
        s = self.settings
        candidates = self.candidates(params, base, obs, privileged, key)
        keys = future_keys(key, s.futures)
        if not s.halving:
            best = jnp.argmax(self.values(params, candidates, obs, privileged, keys).mean(-1))
            return jax.tree.map(lambda x: x[best], candidates)  # ties go to the lowest index: the base
        some = lambda idx, ks: self.values(
            params, jax.tree.map(lambda x: x[idx], candidates), obs, privileged, ks
        )
        best = sequential_halving(some, self.candidate_count(params), keys)
        return jax.tree.map(lambda x: x[best], candidates)

    def values(
        self, params: PlannerParams, candidates: Action, obs: Observation, privileged: Privileged, keys
    ) -> jax.Array:
        """[C, M] net worth after ``horizon`` days of each candidate (leaves [C, ...]) in each future of ``keys``
        ([M], ``future_keys``): every candidate meets the same M futures. obs: this morning's Observation. In the
        agent's view each future starts from its own draw of the hidden state (``belief_state.sample``), the
        same for every candidate, and reads nothing of ``privileged`` that ``belief_state.visible`` masks."""
        state, env_params = privileged.state, privileged.params
        if self.settings.view == "agent":
            state, env_params, belief = belief_state.belief_of(state, env_params)
            draw = lambda k: belief_state.sample(state, env_params, belief, jax.random.fold_in(k, _BELIEF))
            starts = jax.vmap(draw)(keys)
            one = lambda action, start, k: self.future(params.base, obs, start, env_params, action, k)
            return jax.vmap(jax.vmap(one, in_axes=(None, 0, 0)), in_axes=(0, None, None))(
                candidates, starts, keys
            )
        one = lambda action, k: self.future(params.base, obs, state, env_params, action, k)
        return jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, None))(candidates, keys)

    def future(self, base_params, obs: Observation, state, env_params, action: Action, key) -> jax.Array:
        """[] net worth after today's ``action`` and ``horizon - 1`` base days in the future of ``key``, in a
        state whose draws for later days are the future's own (``own_future``): the one day loop
        (``rbjax.day_loop.scan_days``, days 0 .. H - 1 of ``key``) on ``played_today``."""
        state = own_future(state, env_params, key)
        policy = played_today(action, self.base, obs.day)
        (_, state), _ = scan_days(
            self.env, policy, base_params, env_params, obs, state, key, jnp.int32(0), self.settings.horizon,
            record=lambda info: None,
        )  # fmt: skip
        return state.net_worth


def played_today(action: Action, base: Callable, today) -> Callable:
    """The policy of a future: ``action`` on the morning of day ``today`` (the store's day, ``obs.day``), the
    ``base`` policy's action on every later day (``as_candidate``, cast to the candidates' dtypes). One day
    program for all the days: today's base action is made and dropped (a program of one step, not two, compiles
    in about 3/4 of the time). A store whose day stays ``today`` after the first step had ended before it: no
    action changes it (``Env.step``)."""

    def policy(base_params, obs: Observation, privileged: Privileged, key) -> Action:
        planned = as_candidate(base(base_params, obs, privileged, key), obs)
        first = obs.day == today
        return jax.tree.map(lambda c, b: jnp.where(first, c, b.astype(c.dtype)), action, planned)

    return policy


def as_candidate(action: Action, obs: Observation) -> Action:
    """``action`` with ``set_price`` written out as ``candidate_actions`` writes it (a price call where the price
    differs from today's, as the step reads an unset one), so that it shares the candidates' structure."""
    if action.set_price is not None:
        return action
    return action.replace(set_price=action.price.astype(obs.prices.dtype) != obs.prices)


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
    env: Model, settings: PlanSettings = PlanSettings(), base_params: Any = None, **moves
) -> tuple[Planner, PlannerParams]:
    """(Planner, its default PlannerParams) for ``env`` with ``settings``; ``base_params`` the base's params
    (None: a named base's defaults); ``moves`` go to ``default_params`` (price_moves, order_moves)."""
    if base_params is None:
        if not isinstance(settings.base, str):
            raise ValueError("make_planner: give base_params for a base policy that is not named")
        base_params = POLICIES[settings.base].default_params()
    return Planner(env, settings), default_params(base_params, **moves)

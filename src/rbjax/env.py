"""The store as a gymnax-style environment: ``reset(key, params)`` and ``step(key, state, action, params)``.

One ``step`` is one RetailBench day: the agent's action (prices, shelf, orders, paid at once), then the
reference's ``end_today`` in its exact order (``rbjax.model.day``, ``docs/model.md``). All functions are
pure and jittable; ``vmap`` them over keys and params for a batch of stores.
"""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.arguments import ArgumentError
from rbjax.checks import check_params, is_concrete
from rbjax.config import EPISODE_DAYS, EnvConfig
from rbjax.data.catalog import Catalog, load_catalog
from rbjax.kernels import rng
from rbjax.kernels.xla import fsum
from rbjax.model import (
    day,
    inventory,
    news,
    orders,
    preopening,
    reviews,
    sales,
    supplier_log,
    supplier_world,
    suppliers,
)
from rbjax.params import EnvParams, default_params
from rbjax.state import (
    Action,
    DayDetail,
    DayInfo,
    EnvState,
    Lots,
    Observation,
    Pending,
    Privileged,
    Suppliers,
)


class Env:
    """RetailBench hard_v2 store.

    >>> env = Env()                               # shipped catalogue, 20 categories
    >>> params = env.default_params()
    >>> obs, state = env.reset(jax.random.key(0), params)
    >>> obs, state, reward, terminated, truncated, info = env.step(key, state, Action.noop(state), params)
    """

    def __init__(self, config: EnvConfig | None = None, catalog: Catalog | None = None):
        self.catalog = catalog if catalog is not None else load_catalog()
        self.config = config if config is not None else EnvConfig.from_catalog(self.catalog)
        if self.config.num_products != self.catalog.num_products:
            raise ValueError(
                f"EnvConfig has {self.config.num_products} products, the catalogue "
                f"{self.catalog.num_products}"
            )
        self._category_of = np.asarray(self.config.category_of, np.int32)
        self._checked = None  # the params ``step`` checked last: a loop of steps checks them once

    def default_params(self) -> EnvParams:
        return default_params(self.catalog, self.config)

    def check_params(self, params: EnvParams) -> EnvParams:
        """Validate concrete params (Python boundary); returns them for chaining."""
        check_params(params, self.config)
        return params

    # ------------------------------------------------------------------ reset
    def reset(self, key: jax.Array, params: EnvParams) -> tuple[Observation, EnvState]:
        """The store on its opening morning: pre-opening history played, random prices, empty shelf and stock."""
        return self._reset(key, params, records=False)

    def reset_detailed(self, key: jax.Array, params: EnvParams):
        """``reset`` plus the pre-opening days the agent tools show: (obs, state, OpeningRecords)."""
        return self._reset(key, params, records=True)

    def _reset(self, key: jax.Array, params: EnvParams, records: bool):
        if is_concrete(params):  # called outside jit: the values can be checked
            check_params(params, self.config)
        params = opaque(params, key)
        cfg, f = self.config, self.config.float_dtype
        J, K, C, D = cfg.num_products, cfg.num_suppliers, cfg.lot_slots, cfg.pending_slots
        k_world, k_hist, k_price = jax.random.split(key, 3)
        world = params.world if params.world is not None else supplier_world.make_world(k_world, params, cfg)
        opening = preopening.simulate(k_hist, cfg, params, world, records)
        if records:
            opening, history = opening
        todays_news = news.sample(
            news.key(world, params.open_day), params, cfg.news_slots, J, cfg.num_categories
        )
        no_quotes = Suppliers(
            quality_tier=opening.quality_tier,
            price_tier=opening.price_tier,
            quote_price=jnp.zeros((J, K), f),
            quote_quality=jnp.zeros((J, K), f),
            log=jnp.zeros((4, J, K), f),
            opening_share=opening.supplier_share.astype(f),
        )
        supply = news.effect(params, params.supply_category, todays_news, False)
        zeros_jc = jnp.zeros((J, C), jnp.int32)
        u = rng.uniform(k_price, (J,), f)
        state = EnvState(
            day=jnp.zeros((), jnp.int32),
            funds=params.initial_funds.astype(f),
            net_worth=params.initial_funds.astype(f),
            prices=(params.price_min + (params.price_max - params.price_min) * u).astype(f),
            shelf=jnp.zeros(J, bool),
            lots=Lots(
                store=zeros_jc,
                wait=zeros_jc,
                arrival=zeros_jc,
                cost=jnp.zeros((J, C), f),
                quality=jnp.zeros((J, C), f),
                supplier=jnp.zeros((J, C), jnp.int8),
            ),
            pending=Pending(
                qty=jnp.zeros((D, J), jnp.int32),
                cost=jnp.zeros((D, J), f),
                quality=jnp.zeros((D, J), f),
                supplier=jnp.zeros((D, J), jnp.int8),
            ),
            reviews=opening.reviews,
            sales=opening.sales,
            history_profit=opening.profit,
            suppliers=suppliers.advance(no_quotes, world, params, params.open_day, supply),
            news=todays_news,
            neg_days=jnp.zeros((), jnp.int32),
            done=jnp.zeros((), bool),
            world=world,
        )
        if records:
            return self.observe(state, params), state, history
        return self.observe(state, params), state

    # ------------------------------------------------------------------ step
    def check_action(self, action: Action) -> None:
        """Shape and dtype checks (run at trace time, so free inside jit); raise ValueError naming the field."""
        J, K = self.config.num_products, self.config.num_suppliers
        for name, shape in (
            ("price", (J,)),
            ("shelf", (J,)),
            ("order", (J, K)),
            ("set_price", (J,)),
            ("order_rank", (J,)),
        ):
            x = getattr(action, name)
            if x is None and name in ("set_price", "order_rank"):
                continue
            if x is None:
                raise ValueError(f"Action.{name} is required")
            if not hasattr(x, "shape") or tuple(x.shape) != shape:
                raise ValueError(f"Action.{name} must have shape {shape}, got {getattr(x, 'shape', type(x))}")
            if not (jnp.issubdtype(x.dtype, jnp.number) or x.dtype == jnp.bool_):
                raise ValueError(f"Action.{name} must be numeric, got dtype {x.dtype}")
            if jnp.issubdtype(x.dtype, jnp.complexfloating):
                raise ValueError(f"Action.{name} must be real, got dtype {x.dtype}")
        if action.lines is not None:
            fields = ("product", "supplier", "units", "lead", "order", "live")
            shapes = {k: getattr(getattr(action.lines, k), "shape", None) for k in fields}
            if len(set(shapes.values())) != 1 or len(next(iter(shapes.values())) or ()) != 1:
                raise ValueError(f"Action.lines fields must be 1-D of one length [L], got shapes {shapes}")
            for name in ("product", "supplier", "units", "lead", "order"):
                dtype = getattr(action.lines, name).dtype
                if not jnp.issubdtype(dtype, jnp.integer) or jnp.dtype(dtype).itemsize > 4:
                    raise ValueError(
                        f"Action.lines.{name} must be int32 (or a narrower integer), got {dtype}"
                    )
            if action.lines.live.dtype != jnp.bool_:
                raise ValueError(f"Action.lines.live must be bool, got {action.lines.live.dtype}")
            for name in ("per_product", "per_order"):
                bound = getattr(action.lines, name)
                if not isinstance(bound, int | np.integer) or bound < 0:
                    raise ValueError(f"Action.lines.{name} must be an int >= 0 (0: L), got {bound!r}")

    def step(self, key: jax.Array, state: EnvState, action: Action, params: EnvParams):
        """One day. Returns (obs, state, reward, terminated, truncated, info: DayInfo).

        reward = change in net worth. After the episode ended (``state.done``) the state is returned
        unchanged, reward 0 and info.alive False.
        """
        *out, _ = self.step_detailed(key, state, action, params)
        return tuple(out)

    def step_detailed(self, key: jax.Array, state: EnvState, action: Action, params: EnvParams):
        """``step`` plus the per-supplier records the agent tools keep: (..., info, detail: DayDetail)."""
        self.check_action(action)
        if params is not self._checked and is_concrete(params):  # outside jit: the values can be checked
            self._checked = self.check_params(params)
        params = opaque(params, key, state)
        k_lead, k_attr, k_demand, k_reviews = step_keys(key)
        new, acted = day.act(state, action, params, k_lead, self.config)
        new, sold = day.sell(new, params, (k_attr, k_demand, k_reviews), self.config)
        new, expired = day.expire(new, params)
        new, closed = day.close(new, params, self.config)
        alive = ~state.done
        new = jax.tree.map(lambda n, o: jnp.where(alive, n, o), new, state)
        terminated, truncated = closed.pop("terminated") & alive, closed.pop("truncated") & alive
        records = {k: _masked(v, alive) for k, v in (acted | sold | expired | closed).items()}
        detail = DayDetail(**{k: records.pop(k) for k in _DETAIL_FIELDS})
        info = DayInfo(**records, funds=new.funds, net_worth=new.net_worth, alive=alive)
        reward = (new.net_worth - state.net_worth) * alive
        return self.observe(new, params), new, reward, terminated, truncated, info, detail

    def lead_days(self, key: jax.Array, state: EnvState) -> jax.Array:
        """[J, K] int32 the lead times single-line orders get in ``step(key, state, ...)``."""
        return orders.lead_table(step_keys(key)[0], state.world).astype(jnp.int32)

    # ------------------------------------------------------------------ views
    def observe(self, state: EnvState, params: EnvParams) -> Observation:
        """What the RetailBench tools show an agent on the morning of ``state.day``."""
        history = sales.chronological(state.sales, params.open_day + state.day)
        sup_return, sup_rating, return_rate = supplier_log.view(state.suppliers.log)
        return Observation(
            day=state.day,
            funds=state.funds,
            capacity=params.capacity,
            shelf_capacity=params.shelf_capacity,
            category=jnp.asarray(self._category_of),
            net_worth=state.net_worth,
            prices=state.prices,
            shelf=state.shelf,
            on_hand=inventory.on_hand(state.lots),
            waiting=fsum(state.lots.wait, -1),
            incoming=fsum(state.pending.qty, 0),
            capacity_used=jnp.sum(state.lots.store, dtype=jnp.int32) / params.capacity,
            quote_price=state.suppliers.quote_price,
            transport_min=state.world.transport_min,
            transport_max=state.world.transport_max,
            sales_price=history.price,
            sales_units=history.units,
            rating_mean=reviews.window_rating(state.reviews),
            rating_count=state.reviews.window_count,
            return_rate=return_rate,
            supplier_return_rate=sup_return,
            supplier_rating=sup_rating,
            news_mentions=news.mentions(self._category_of, state.news),
            history_profit=state.history_profit,
        )

    def privileged(self, state: EnvState, params: EnvParams) -> Privileged:
        """Hidden supplier quality, today's news effects, and the true state and params (for planners):
        for oracle policies only."""
        return Privileged(
            quote_quality=state.suppliers.quote_quality,
            news_need=news.effect(params, self._category_of, state.news, True),
            news_supply=news.effect(params, params.supply_category, state.news, False),
            state=state,
            params=params,
        )

    def state_bytes(self, state: EnvState) -> int:
        """Bytes of one store's state."""
        return int(sum(x.nbytes for x in jax.tree.leaves(state) if hasattr(x, "nbytes")))


_DETAIL_FIELDS = tuple(f.name for f in dataclasses.fields(DayDetail))


def opaque(params: EnvParams, *inputs) -> EnvParams:
    """``params`` behind an optimization barrier when the call is traced (any of ``params`` or ``inputs`` is
    a tracer). A jitted loop that closes over concrete params (the natural way to write one) makes them
    compile-time constants, and XLA then spends seconds constant-folding tables built from them (its
    "Constant folding an instruction is taking > 1s" alarms); behind the barrier they stay runtime values,
    as if passed as arguments."""
    if is_concrete((params, inputs)):
        return params
    return jax.lax.optimization_barrier(params)


def step_keys(key: jax.Array) -> jax.Array:
    """The step's keys: lead times, attraction, demand, reviews (``lead_days`` reads the first)."""
    return jax.random.split(key, 4)


def _masked(x: jax.Array, alive: jax.Array) -> jax.Array:
    """A record of a day that was not played: False, 0 or 0.0 (ints as int32)."""
    if x.dtype == jnp.bool_:
        return x & alive
    if jnp.issubdtype(x.dtype, jnp.floating):
        return x * alive
    return jnp.where(alive, x, 0).astype(jnp.int32)


class OptionError(ArgumentError):
    """A bad value of one of ``make_env``'s options: ``option`` (its name), ``value`` and what is wrong with it
    (``message``). Worded ``days 0: ...`` (``data: ...``); the CLI shows its flag (``--days 0: ...``)."""

    def __init__(self, option: str, value, message: str):
        shown = f"{{{option}}}" if option == "data" else f"{{{option}}} {value}"
        super().__init__(f"{shown}: {message}", option)
        self.option, self.value, self.message = option, value, message


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """The options every command's env is made from, declared once (the CLI's env flags, the faces' task
    parameters and ``rbjax.programs.env_and_params`` read their defaults here).

    data: the catalogue folder (None: the shipped one); grouping: the categories, "20" (rbjax) or "ref19" (the
    reference's 19 labels); supplier_attempts: supplier worlds drawn per product at reset, one kept by the
    reference's selection rule; days: days per store (the params' horizon; the paper's episode by default).
    """

    data: str | None = None
    grouping: str = "20"
    supplier_attempts: int = 50
    days: int = EPISODE_DAYS

    def env_key(self) -> tuple:
        """What fixes the Env (not the days, a param): the data folder however it is named, the grouping and the
        supplier attempts."""
        folder = None if self.data is None else os.path.realpath(self.data)
        return folder, self.grouping, self.supplier_attempts

    def make_env(self) -> Env:
        """A new Env for these options (``rbjax.programs.env_and_params`` keeps one per process). Raises
        ``OptionError`` naming the option."""
        from rbjax.data import CatalogError

        try:
            catalog = load_catalog(self.data)
        except CatalogError as e:
            raise OptionError("data", self.data, str(e)) from None
        try:
            config = EnvConfig.from_catalog(
                catalog, grouping=self.grouping, supplier_attempts=self.supplier_attempts
            )
        except ValueError as e:
            raise OptionError("supplier_attempts", self.supplier_attempts, str(e)) from None
        return Env(config, catalog)


def make_env(options: EnvOptions | None = None, **fields) -> tuple[Env, EnvParams]:
    """(a new Env, its default ``EnvParams`` with ``horizon = days``, checked) for ``options`` (None: the
    defaults; ``fields`` replace some: ``make_env(days=30)``). Raises ``OptionError`` (a ValueError) naming the
    option."""
    options = dataclasses.replace(options or EnvOptions(), **fields)
    env = options.make_env()
    return env, params_for_days(env, options.days)


def params_for_days(env: Env, days: int) -> EnvParams:
    """``env``'s default params with ``horizon = days``, checked; an ``OptionError`` names ``days``."""
    try:
        if not 1 <= days <= np.iinfo(np.int32).max:
            raise ValueError(f"must be a positive int32, got {days}")
        return env.check_params(env.default_params().replace(horizon=np.int32(days)))
    except ValueError as e:
        raise OptionError("days", days, str(e)) from None

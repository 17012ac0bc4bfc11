"""Pytrees of one store: the state by model part, the action, the observation, the day's records.

Shapes: J products, K suppliers, C lot slots, D pending ring, R review window (60), W sales window (30),
N news slots. Calendar day c = open_day + day. Floats are ``EnvConfig.float_dtype`` (float32 by default).
Each part of the state is owned by one module of ``rbjax.model``, whose functions take and return it.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rbjax.params import World


@struct.dataclass
class Lots:
    """Inventory lots in delivery order (``rbjax.model.inventory``), each [J, C].

    A lot's units are in the store or in the global capacity-waiting queue.
    """

    store: jax.Array  # int32 units in the store
    wait: jax.Array  # int32 units in the capacity-waiting queue
    arrival: jax.Array  # int32 calendar day of arrival A (expiry E = A + L)
    cost: jax.Array  # float unit cost
    quality: jax.Array  # float supplier quality of the lot
    supplier: jax.Array  # int8 supplier of the lot (``rbjax.model.supplier_log``)


@struct.dataclass
class Pending:
    """Orders not yet delivered: a ring over the arrival day, index c % D (``rbjax.model.orders``), each [D, J]."""

    qty: jax.Array  # int32 units
    cost: jax.Array  # float total cost paid
    quality: jax.Array  # float quantity-weighted quality sum
    supplier: jax.Array  # int8 supplier of the last line placed for that arrival day


@struct.dataclass
class Reviews:
    """Exact daily review counts over the rating window, older ones aggregated (``rbjax.model.reviews``)."""

    count: jax.Array  # [R, J] int16 reviews per day (ring index c % R)
    sum: jax.Array  # [R, J] int16 sum of star ratings per day
    window_count: jax.Array  # [J] int32 running totals over the ring
    window_sum: jax.Array  # [J] int32
    old_count: jax.Array  # [J] int32 totals of everything older than the window
    old_sum: jax.Array  # [J] int32
    rating0: jax.Array  # [J] float initial rating r0


@struct.dataclass
class Sales:
    """Sales history, a ring over the day, index c % W (``rbjax.model.sales``); units 0 means "no record"."""

    price: jax.Array  # [W, J] float
    units: jax.Array  # [W, J] int32


@struct.dataclass
class Suppliers:
    """Today's supplier tiers and quotes, and the per-supplier records (``rbjax.model.suppliers``)."""

    quality_tier: jax.Array  # [J, K] int8 0..6 (Q1..Q7)
    price_tier: jax.Array  # [J, K] int8 0..4 (P1..P5)
    quote_price: jax.Array  # [J, K] float today's news-adjusted quote
    quote_quality: jax.Array  # [J, K] float today's hidden quality score
    log: jax.Array  # [4, J, K] float 30-day averages of sold, returned, reviews, stars
    opening_share: jax.Array  # [J, K] float share of the last 30 pre-opening days each supplier supplied


@struct.dataclass
class News:
    """Today's news list (``rbjax.model.news``), each [N]."""

    mode: jax.Array  # int32 index into NEWS_MODES
    target: jax.Array  # int32 product (sku_level) or category (single_category)
    need: jax.Array  # bool factor "need" (else "supply")
    signed: jax.Array  # float signed strength (0 for neutral)
    remain: jax.Array  # int32 business days left (-1: shown today only)


@struct.dataclass
class EnvState:
    day: jax.Array  # [] int32 days completed since opening (t)
    funds: jax.Array  # [] float
    net_worth: jax.Array  # [] float, as logged after the last transition
    prices: jax.Array  # [J] float retail prices
    shelf: jax.Array  # [J] bool
    lots: Lots
    pending: Pending
    reviews: Reviews
    sales: Sales
    history_profit: jax.Array  # [J] float pre-opening profit score (the oracle's ranking)
    suppliers: Suppliers
    news: News
    neg_days: jax.Array  # [] int32 consecutive end-of-day negative funds
    done: jax.Array  # [] bool terminated or truncated; later steps leave the state unchanged
    world: World  # the episode's supplier world (from params, or drawn at reset)


@struct.dataclass
class OrderLines:
    """A day's ``place_order`` calls as lines in call order, each [L] (``rbjax.model.orders``).

    The lines of one order are contiguous and share ``order``; the order is paid whole or refused whole
    when its cost exceeds the funds left (the reference's "Insufficient funds"). ``lead`` is the order's
    days to arrival (the reference's max over its lines), known when the order is placed.

    ``per_product`` and ``per_order`` (static; 0: L) bound a day's lines of one product and of one order:
    the layout the step pays and places them in (``orders.from_lines``) holds J x per_product lines, so
    small bounds make a cheap step. Lines past a bound are invalid and counted. ``OrderLines.sized``
    sets the smallest bounds that hold the given lines.
    """

    product: jax.Array  # int32
    supplier: jax.Array  # int32
    units: jax.Array  # int32 units (>= 1)
    lead: jax.Array  # int32 days from today to arrival, 1 .. pending_slots - 1
    order: jax.Array  # int32 the order the line belongs to
    live: jax.Array  # bool False: padding
    per_product: int = struct.field(pytree_node=False, default=0)
    per_order: int = struct.field(pytree_node=False, default=0)

    @classmethod
    def sized(cls, **fields) -> OrderLines:
        """Lines from concrete [..., L] fields with bounds that hold them: the most lines of one product
        and of one order in any row, rounded up to a power of two from 8 (a few shapes, a few compilations)."""
        product, order, live = (
            np.asarray(fields[k]).reshape(-1, np.shape(fields[k])[-1]) for k in ("product", "order", "live")
        )
        L = product.shape[-1]
        most_product = most_order = 1
        for p, o, alive in zip(product, order, live):
            if alive.any():
                most_product = max(most_product, np.unique(p[alive], return_counts=True)[1].max())
                idx = np.arange(L)
                start = np.maximum.accumulate(np.where(np.r_[True, o[1:] != o[:-1]], idx, 0))
                most_order = max(most_order, (idx - start + 1)[alive].max())  # as orders.from_lines counts
        bound = lambda n: int(min(L, max(8, 1 << int(n - 1).bit_length())))
        return cls(**fields, per_product=bound(most_product), per_order=bound(most_order))

    @classmethod
    def empty(cls, n: int) -> OrderLines:
        zeros = jnp.zeros(n, jnp.int32)
        return cls(
            product=zeros, supplier=zeros, units=zeros, lead=zeros, order=zeros, live=jnp.zeros(n, bool)
        )


@struct.dataclass
class Action:
    """One day's decisions, as the agent's calls of that day.

    price: [J] new retail prices.
    shelf: [J] bool shelf membership (more than shelf_capacity products: the whole change is refused, as
           the reference refuses the call, counted).
    order: [J, K] units per (product, supplier); each nonzero entry is one single-line order (see
           ``rbjax.model.orders``).
    set_price: [J] bool, which products get a price call today. ``None``: the products whose ``price``
           differs from the current one. A call with a non-finite or non-positive price is ignored and
           counted. Accepted calls count as actions in the metrics even when the price is unchanged.
    order_rank: [J] int, the position of product j's order lines in the day's sequence of calls (funds
           are checked line by line in that sequence). ``None``: product index order.
    lines: ``OrderLines`` [L], the orders as placed through the agent tools (several orders of one
           product and supplier, multi-line orders, lead times chosen at call time). When given, ``order``
           must be zero (its nonzero entries are ignored and counted as invalid orders).
    """

    price: jax.Array
    shelf: jax.Array
    order: jax.Array
    set_price: jax.Array | None = None
    order_rank: jax.Array | None = None
    lines: OrderLines | None = None

    @classmethod
    def noop(cls, state: EnvState) -> Action:
        return cls(
            price=state.prices,
            shelf=state.shelf,
            order=jnp.zeros(state.suppliers.quote_price.shape, state.suppliers.quote_price.dtype),
        )


@struct.dataclass
class Observation:
    """What the RetailBench tools show an agent (no hidden quality, no news metadata)."""

    day: jax.Array  # [] int32
    funds: jax.Array  # []
    capacity: jax.Array  # [] int32 store capacity in units
    shelf_capacity: jax.Array  # [] int32 shelf slots (products)
    category: jax.Array  # [J] int32 the product's category (alphabetical index)
    net_worth: jax.Array  # []
    prices: jax.Array  # [J]
    shelf: jax.Array  # [J] bool
    on_hand: jax.Array  # [J] store units
    waiting: jax.Array  # [J] capacity-waiting units
    incoming: jax.Array  # [J] undelivered ordered units
    capacity_used: jax.Array  # [] store units / capacity
    quote_price: jax.Array  # [J, K]
    transport_min: jax.Array  # [J, K]
    transport_max: jax.Array  # [J, K]
    sales_price: jax.Array  # [W, J] oldest first; the last row is yesterday
    sales_units: jax.Array  # [W, J] 0 = no record that day
    rating_mean: jax.Array  # [J] mean rating in the demand window (r-bar)
    rating_count: jax.Array  # [J] reviews in the last 60 days
    return_rate: jax.Array  # [J] returned / sold over about the last 30 days (0 without sales)
    supplier_return_rate: jax.Array  # [J, K] the same per supplier (``rbjax.model.supplier_log``)
    supplier_rating: jax.Array  # [J, K] mean rating of the supplier's units (0 without reviews)
    news_mentions: jax.Array  # [J] active non-neutral news items naming the product or its category
    history_profit: jax.Array  # [J] pre-opening profit at the cheapest daily quote


@struct.dataclass
class Privileged:
    """Hidden fields only an oracle may read (``Env.privileged``).

    ``state`` and ``params`` are the store's whole true state and its parameters, for policies that plan by
    simulating the store (``rbjax.policies.planner``); the rest are what the paper's oracle reads.
    """

    quote_quality: jax.Array  # [J, K]
    news_need: jax.Array  # [J] capped demand-side news effect today
    news_supply: jax.Array  # [J] capped supply-side news effect today
    state: Any = None  # EnvState of this morning (None where a caller builds the view by hand)
    params: Any = None  # the store's EnvParams


@struct.dataclass
class DayInfo:
    """The day's records (everything the metrics need)."""

    sold: jax.Array  # [J] units sold (before returns)
    returned: jax.Array  # [J]
    expired: jax.Array  # [J] store + waiting units destroyed at expiry
    demand: jax.Array  # [J] demand drawn
    stockout: jax.Array  # [J] bool demand > on-hand > 0
    revenue: jax.Array  # [] sales at today's prices
    refunds: jax.Array  # []
    reviews: jax.Array  # [J] int32 reviews written today
    stars: jax.Array  # [J] int32 sum of their star ratings
    order_cost: jax.Array  # [] paid for accepted orders
    ordered: jax.Array  # [J] units ordered (accepted)
    delivered: jax.Array  # [J] units delivered at the end of the day
    order_lines: jax.Array  # [] int32 accepted order lines
    quality_rank_sum: (
        jax.Array
    )  # [] int32 sum over lines of the supplier's rank by (-quality, price, id), 1 = best
    quality_first: jax.Array  # [] int32 lines from the rank-1 quality supplier
    price_first: jax.Array  # [] int32 lines from the cheapest supplier (ties: lower id)
    price_changed: jax.Array  # [J] bool an accepted price action (a valid price was given)
    funds: jax.Array  # [] after the transition
    net_worth: jax.Array  # []
    invalid_prices: jax.Array  # [] int32 non-finite or non-positive prices ignored
    shelf_refused: jax.Array  # [] bool the shelf change exceeded capacity and was refused
    invalid_orders: jax.Array  # [] int32 lines with negative/non-finite units or over the per-order cap
    refused_orders: jax.Array  # [] int32 lines refused for lack of funds
    invalid_ranks: (
        jax.Array
    )  # [] int32 NaN entries of Action.order_rank (those lines go last, by product index)
    merged_lots: jax.Array  # [] int32 deliveries merged into a product's newest lot (lot slots full)
    alive: jax.Array  # [] bool this day was played (False after the episode ended)


@struct.dataclass
class DayDetail:
    """Per-supplier records of the day that the agent tools' ledgers keep (``Env.step_detailed``)."""

    cogs: jax.Array  # [J] float cost of the units sold (their lots' unit costs)
    sold_by_supplier: jax.Array  # [J, K] int32 units sold from each supplier's lots
    returned_by_supplier: jax.Array  # [J, K] float returns split by each supplier's share of the sales
    reviews_by_supplier: jax.Array  # [J, K] float reviews, split the same way
    stars_by_supplier: jax.Array  # [J, K] float their star sums, split the same way
    line_accepted: jax.Array  # [L] bool order lines paid (L = 0 without ``Action.lines``)

"""A store's records on the host: what the tools can show beyond today's observation.

``StoreLedger`` keeps every day from the first pre-opening day on (row ``cal - first_cal``): prices, units,
returns, cost of goods sold, per-supplier sales, returns and ordered units, reviews, quotes, expiries and
stockouts; the store's orders; its news items; its notes. It is filled from ``Env.reset_detailed`` and
from every step's ``DayInfo``/``DayDetail``. ``Today`` is the engine's view of the store this morning.

Pre-opening days (rbjax decisions, ``docs/agents.md``): units come from the day's chosen supplier, their
cost of goods is that day's cheapest quote, and no returns are recorded.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rbjax.params import World
from rbjax.state import Lots, News, Suppliers


@dataclasses.dataclass
class Order:
    """One ``place_order`` call that was paid."""

    order_id: str
    supplier: int
    created: int  # calendar day placed
    arrival: int  # calendar day the units are in the store (morning)
    lines: list[dict]  # {product, units, unit_price, line_cost, quality}
    cost: float
    call: int  # the call index of the day (links the order to its engine lines)

    @property
    def units(self) -> int:
        return sum(line["units"] for line in self.lines)


@dataclasses.dataclass
class Today:
    """One store this morning, as the engine left it: numpy, the engine's own state types for its parts (J
    products, K suppliers, C lots, N news)."""

    day: int  # days since opening
    cal: int  # calendar day
    funds: float
    net_worth: float
    prices: np.ndarray  # [J] float32
    shelf: np.ndarray  # [J] bool
    on_hand: np.ndarray  # [J] int
    waiting: np.ndarray  # [J] int
    lead: np.ndarray  # [J, K] today's lead times of single-line orders (the engine's draw)
    lots: Lots  # [J, C] each
    news: News  # [N] each
    suppliers: (
        Suppliers  # quotes [J, K]; quote_quality is hidden: written to place_order's trace payload only
    )
    world: World  # transport ranges [J, K], the key of the store's supplier world
    capacity: int
    shelf_capacity: int
    done: bool


class StoreLedger:
    """Daily records of one store, indexed by calendar day. Shapes: T = history + horizon days."""

    def __init__(self, first_cal: int, days: int, J: int, K: int):
        self.first_cal, self.J, self.K = first_cal, J, K
        z = lambda *shape, dtype=np.int32: np.zeros((days, *shape), dtype)
        self.price = z(J, dtype=np.float32)
        self.units = z(J)
        self.returned = z(J)
        self.cogs = z(J, dtype=np.float32)
        self.sold_k = z(J, K)
        self.returned_k = z(J, K, dtype=np.float32)
        self.ordered_k = z(J, K)
        self.reviews = z(J)
        self.stars = z(J)
        self.quotes = z(J, K, dtype=np.float32)
        self.expired = z(J)
        self.stockout = z(J, dtype=bool)
        self.filled = 0  # days with records: calendar days first_cal .. first_cal + filled - 1
        self.quotes_filled = 0  # days with logged quotes
        self.orders: list[Order] = []
        self.news_ids: list[str] = []  # today's items, by slot
        self.news_log: list[dict] = []  # every item shown, {record_id, id, title, content, date, cal}
        self.notes: list[dict] = []

    def __getstate__(self) -> dict:
        """Pickled without the rows not yet filled (a checkpoint of an early day is small)."""
        state = dict(vars(self))
        state["_days"] = len(self.price)
        for k, v in vars(self).items():
            if isinstance(v, np.ndarray):
                state[k] = v[: self.filled]
        return state

    def __setstate__(self, state: dict) -> None:
        days = state.pop("_days")
        for k, v in state.items():
            if isinstance(v, np.ndarray):
                full = np.zeros((days, *v.shape[1:]), v.dtype)
                full[: len(v)] = v
                state[k] = full
        vars(self).update(state)

    def rows(self, first: int, last: int) -> range:
        """Rows of the calendar days first..last (inclusive) that have records."""
        lo = max(first - self.first_cal, 0)
        hi = min(last - self.first_cal + 1, self.filled)
        return range(lo, max(lo, hi))

    def add_opening(self, rec) -> None:
        """The pre-opening days (``OpeningRecords`` of one store, numpy)."""
        H = rec.price.shape[0]
        units, supplier = np.asarray(rec.units), np.asarray(rec.supplier)
        self.price[:H], self.units[:H] = rec.price, units
        self.reviews[:H], self.stars[:H] = rec.reviews, rec.stars
        self.quotes[:H] = rec.quote_price
        onehot = supplier[..., None] == np.arange(self.K)
        self.sold_k[:H] = np.where(onehot, units[..., None], 0)
        self.ordered_k[:H] = self.sold_k[:H]
        self.cogs[:H] = units * np.asarray(rec.quote_price).min(-1)
        self.filled = self.quotes_filled = H

    def add_day(self, cal: int, prices, quotes, info, detail) -> None:
        """One played day: the prices it sold at, its quotes, its ``DayInfo`` and ``DayDetail`` (numpy)."""
        i = cal - self.first_cal
        self.price[i], self.quotes[i] = prices, quotes
        self.units[i], self.returned[i] = info.sold, info.returned
        self.reviews[i], self.stars[i] = info.reviews, info.stars
        self.expired[i], self.stockout[i] = info.expired, info.stockout
        self.cogs[i] = detail.cogs
        self.sold_k[i], self.returned_k[i] = detail.sold_by_supplier, detail.returned_by_supplier
        self.filled = self.quotes_filled = i + 1

    def add_orders(self, orders: list[Order]) -> None:
        for order in orders:
            self.orders.append(order)
            for line in order.lines:
                self.ordered_k[order.created - self.first_cal, line["product"], order.supplier] += line[
                    "units"
                ]

    def pending(self, cal: int) -> list[Order]:
        """Orders not yet in the store on the morning of ``cal``, by (arrival, supplier, id)."""
        return sorted(
            (o for o in self.orders if o.arrival > cal), key=lambda o: (o.arrival, o.supplier, o.order_id)
        )

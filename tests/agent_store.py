"""A small hand-made store for the agent tools' tests, and the golden texts of every tool on it.

Regenerate the golden texts (only for a deliberate change of a tool's text, in its own commit):

    python tests/agent_store.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np

GOLDEN = Path(__file__).parent / "assets" / "tool_texts.json"
J, K, C, N = 96, 5, 8, 3
CAL = 93  # 1991-09-07, the default opening
FIRST = 90  # the ledger's first day: three recorded days before today


def make_store(env, empty: bool = False, funds: float = 1000.0):
    """StoreTools over a hand-made Today and ledger (``empty``: no stock, no shelf, no records)."""
    from rbjax.agents.engine.ledger import StoreLedger, Today
    from rbjax.agents.formats import Names
    from rbjax.agents.tools.store import StoreTools
    from rbjax.model import orders
    from rbjax.params import World
    from rbjax.state import Lots, News, Suppliers

    names = Names(env.catalog, K)
    zeros = lambda *s, dtype=np.int32: np.zeros(s, dtype)
    today = Today(
        day=0,
        cal=CAL,
        funds=funds,
        net_worth=funds + 200.0,
        prices=np.full(J, 1.5, np.float32),
        shelf=zeros(J, dtype=bool),
        on_hand=zeros(J),
        waiting=zeros(J),
        lead=np.full((J, K), 3, np.int32),
        lots=Lots(
            store=zeros(J, C),
            wait=zeros(J, C),
            arrival=zeros(J, C),
            cost=zeros(J, C, dtype=np.float32),
            quality=zeros(J, C, dtype=np.float32),
            supplier=zeros(J, C, dtype=np.int8),
        ),
        news=News(
            mode=np.array([0, 3, 1], np.int32),
            target=np.array([0, 0, 2], np.int32),
            need=np.array([False, True, False]),
            signed=np.array([0.0, 0.4, -0.7], np.float32),
            remain=np.array([-1, 3, 4], np.int32),
        ),
        suppliers=Suppliers(
            quality_tier=zeros(J, K, dtype=np.int8),
            price_tier=zeros(J, K, dtype=np.int8),
            quote_price=(0.5 + 0.01 * np.arange(J)[:, None] + 0.1 * np.arange(K)[None, :]).astype(np.float32),
            quote_quality=np.full((J, K), 0.8, np.float32),
            log=zeros(4, J, K, dtype=np.float32),
            opening_share=zeros(J, K, dtype=np.float32),
        ),
        world=World(
            key=np.zeros(2, np.uint32),
            cycle_len=np.full((J, K), 150, np.int16),
            transport_min=np.full((J, K), 2, np.int8),
            transport_max=np.full((J, K), 4, np.int8),
            first_cycle=zeros(J, K, dtype=np.int16),
            cycle_quality=zeros(4, J, K, dtype=np.int8),
            cycle_price=zeros(4, J, K, dtype=np.int8),
        ),
        capacity=15000,
        shelf_capacity=40,
        done=False,
    )
    ledger = StoreLedger(FIRST, 40, J, K)
    if not empty:
        today.prices[0] = 2.39
        today.shelf[[0, 1]] = True
        today.on_hand[[0, 2]] = 10, 5
        today.waiting[2] = 3
        today.lots.store[0, :2], today.lots.cost[0, :2], today.lots.arrival[0, :2] = (
            (6, 4),
            (0.5, 0.75),
            (90, 92),
        )
        today.lots.store[2, 0], today.lots.cost[2, 0], today.lots.arrival[2, 0] = 5, 1.0, 93
        for i, (units, ret) in enumerate(((12, 1), (0, 0), (7, 0))):
            ledger.price[i, 0], ledger.units[i, 0], ledger.returned[i, 0] = 2.0, units, ret
            ledger.cogs[i, 0] = 0.5 * units
            ledger.sold_k[i, 0, 1], ledger.returned_k[i, 0, 1] = units, ret
            ledger.reviews[i, 0], ledger.stars[i, 0] = 2, 7 + i
            ledger.quotes[i] = today.suppliers.quote_price + 0.01 * i
        ledger.ordered_k[0, 0, 1] = 40
        ledger.filled = ledger.quotes_filled = 3
    pay = jax.jit(orders.check_lines, static_argnums=(4,))

    def pay_fn(lines, quote_price, funds0):
        from rbjax.state import OrderLines

        accepted, spent, _, _ = pay(OrderLines(**lines), quote_price, np.float32(funds0), np.int32(15000), 8)
        return np.asarray(accepted), np.float32(spent)

    store = StoreTools(
        0, names, ledger, seed=11, pay=pay_fn, rent=600.0, capacity=15000, max_lines=8, news_seed=5
    )
    store.begin_day(today)
    return store


def calls(store) -> list[tuple[str, dict]]:
    """Every tool, its error strings and empty cases, in an order whose writes the later views show."""
    s0, s1, s2 = store.names.skus[:3]
    news_id = store.news_today[1]["id"]
    d0, d1 = "1991-09-04", "1991-09-06"
    return [
        ("view_funds_and_date", {}),
        ("view_inventory", {}),
        ("view_shelf_status", {}),
        ("view_sku_prices", {"sku_ids": [s0, s1, s0]}),
        ("view_sku_prices", {"sku_ids": []}),
        ("view_sku_prices", {"sku_ids": s0}),
        ("view_sku_prices", {"sku_ids": [""]}),
        ("view_sku_prices", {"sku_ids": ["999"]}),
        ("view_sku_prices", {}),
        ("view_sku_inventory_cost", {"sku_ids": [s0, s1, s2]}),
        ("view_sales_profit_history", {"sku_ids": [s0], "start_date": d0, "end_date": "09/06/91"}),
        (
            "view_sales_profit_history",
            {"sku_ids": [s0], "start_date": d0, "end_date": d1, "supplier_id": "supplier_2"},
        ),
        ("view_sales_profit_history", {"sku_ids": [s0], "start_date": d0, "end_date": d1, "supplier_id": ""}),
        ("view_sales_profit_history", {"sku_ids": [s0], "start_date": "yesterday", "end_date": d1}),
        ("view_sales_profit_history", {"sku_ids": [s0], "start_date": d1, "end_date": "bad"}),
        ("view_sales_profit_history", {"sku_ids": [s0], "start_date": d1, "end_date": d0}),
        ("view_sales_profit_history", {"sku_ids": [s0], "start_date": d1}),
        ("view_current_date_supplier_prices", {"sku_ids": [s0, s1]}),
        (
            "view_supplier_price_history",
            {"sku_id": s0, "start_date": d0, "end_date": d1, "supplier_id": "supplier_1"},
        ),
        (
            "view_supplier_price_history",
            {"sku_id": s0, "start_date": d0, "end_date": d1, "supplier_id": "supplier_9"},
        ),
        ("view_sku_avg_ratings", {"sku_ids": [s0, s1]}),
        ("view_sku_avg_ratings", {"sku_ids": [s0], "start_date": "1991-09-05", "end_date": d1}),
        (
            "view_supplier_returns_avg_rate",
            {"supplier_id": "supplier_2", "start_date": d0, "end_date": d1, "sku_ids": [s0, s1]},
        ),
        ("view_supplier_returns_avg_rate", {"start_date": d0, "end_date": d1}),
        ("view_today_news", {}),
        ("view_news_detail", {"news_id": news_id}),
        ("view_news_detail", {"news_id": "nope"}),
        ("view_news_detail", {}),
        ("view_news_history", {"start_date": "1991-09-07", "end_date": "1991-09-07"}),
        ("view_notes", {}),
        ("add_note", {"content": "  reorder soup next week "}),
        ("add_note", {"content": " "}),
        ("view_notes", {}),
        ("remove_note", {"note_id": "missing"}),
        ("remove_note", {}),
        ("set_shelf_skus", {"sku_ids": [s1, s2, s2]}),
        ("set_shelf_skus", {"sku_ids": store.names.skus[:41]}),
        ("modify_sku_price", {"sku_id": s2, "new_price": 3.25}),
        ("modify_sku_price", {"sku_id": s2, "new_price": "3"}),
        ("modify_sku_price", {"sku_id": s2, "new_price": 0}),
        ("modify_sku_price", {"sku_id": "999", "new_price": 1.0}),
        ("modify_sku_price", {"sku_id": s2}),
        ("place_order", {"items": [{"sku_id": s0, "quantity": 100}], "supplier_id": "supplier_1"}),
        (
            "place_order",
            {
                "items": [{"sku_id": s0, "quantity": 50}, {"sku_id": s1, "quantity": 20}],
                "supplier_id": "supplier_1",
            },
        ),
        ("place_order", {"items": [{"sku_id": s1, "quantity": 5000}], "supplier_id": "supplier_3"}),
        ("place_order", {"items": {}, "supplier_id": "supplier_1"}),
        ("place_order", {"items": [], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": s0, "quantity": 1}]}),
        ("place_order", {"items": [5], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": s0}], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": 7, "quantity": 1}], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": s0, "quantity": 5.0}], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": s0, "quantity": 0}], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": "999", "quantity": 1}], "supplier_id": "supplier_1"}),
        ("place_order", {"items": [{"sku_id": s0, "quantity": 1}], "supplier_id": "supplier_9"}),
        ("place_order", {"items": [{"sku_id": s0, "quantity": 15001}], "supplier_id": "supplier_1"}),
        (
            "place_order",
            {"items": [{"sku_id": s0, "quantity": 1}], "supplier_id": "supplier_1", "rush": True},
        ),
        ("view_inventory", {}),
        ("view_shelf_status", {}),
        ("view_funds_and_date", {}),
        ("no_such_tool", {}),
    ]


def end_day(store, busy: bool = True):
    """``end_today`` on the hand-made store with made-up day records; returns its ToolResult."""
    import dataclasses
    from types import SimpleNamespace

    t = store.today
    sold, returned, expired, stockout = (np.zeros(J, np.int32) for _ in range(4))
    stockout = np.zeros(J, bool)
    if busy:
        sold[[0, 2]], returned[0], expired[2] = (4, 2), 1, 3
        stockout[[0, 2]] = True
    info = SimpleNamespace(
        sold=sold, returned=returned, expired=expired, stockout=stockout, reviews=sold // 2, stars=sold * 2,
        revenue=np.float32(12.5), refunds=np.float32(2.39), funds=np.float32(t.funds - 600 + 10.11),
        net_worth=np.float32(t.net_worth - 580),
    )  # fmt: skip
    detail = SimpleNamespace(
        cogs=sold * np.float32(0.5),
        sold_by_supplier=np.zeros((J, K), np.int32),
        returned_by_supplier=np.zeros((J, K), np.float32),
        line_accepted=np.ones(8, bool),
    )
    after = dataclasses.replace(
        t, day=t.day + 1, cal=t.cal + 1, on_hand=t.on_hand - sold, funds=float(info.funds)
    )
    return store.finish_day(info, detail, after)


def texts(env) -> list[dict]:
    """[{store, call, args, text}] for the full store and the empty one."""
    out = []
    for label, empty in (("full", False), ("empty", True)):
        store = make_store(env, empty=empty)
        cases = (
            calls(store)
            if not empty
            else [(n, {}) for n in ("view_inventory", "view_shelf_status", "view_notes")]
        )
        if empty:
            cases.append(("view_sku_avg_ratings", {"sku_ids": [store.names.skus[0]]}))
        for name, args in cases:
            out.append({"store": label, "call": name, "args": args, "text": store.call(name, args).text})
        out.append({"store": label, "call": "end_today", "args": {}, "text": end_day(store, not empty).text})
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from rbjax.env import Env

    GOLDEN.write_text(json.dumps(texts(Env()), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}")

"""The 21 tools as a model sees them: name, description (our own words), JSON-schema parameters and the
shape of the payload, rendered to OpenAI function JSON by ``openai_functions``.

As in the reference, the schemas are shown, not enforced: arguments reach the tool as keyword arguments
and the tool's own checks decide (``tools.StoreTools.call``). ``PAPER_NAMES`` maps the paper's names of
five tools to the code names the model sees.
"""

from __future__ import annotations

_SKUS = {"type": "array", "items": {"type": "string"}, "description": "product ids (10-digit UPC strings)"}
_DATE = {"type": "string", "description": "YYYY-MM-DD or MM/DD/YY"}
_SUPPLIER = {"type": "string", "description": "supplier_1 .. supplier_5"}


def _tool(name, description, returns, properties=None, required=()):
    return {
        "name": name,
        "description": description,
        "returns": returns,
        "parameters": {"type": "object", "properties": properties or {}, "required": list(required)},
    }


TOOL_SPECS = [
    _tool("view_funds_and_date", "Today's date and the cash balance.", "{funds, current_date}"),
    _tool(
        "view_inventory",
        "Units in the store, waiting for capacity and on their way, per product, and the pending supplier orders.",
        "{inventory{sku: {quantity, waiting, incoming, on_shelf}}, total_items, pending_orders[...], shelf{...}}",
    ),
    _tool(
        "view_shelf_status",
        "Shelf capacity and the products on the shelf with stock and price.",
        "{capacity, used, available, shelf_skus, on_shelf}",
    ),
    _tool(
        "set_shelf_skus",
        "Replace the whole shelf with these products (at most the shelf capacity). Only shelved products sell; "
        "deliveries are not shelved automatically.",
        "{capacity, used, shelf_skus, added, removed}",
        {"sku_ids": _SKUS},
        ["sku_ids"],
    ),
    _tool(
        "view_sku_prices",
        "Current retail prices of the products.",
        "{sku: price}",
        {"sku_ids": _SKUS},
        ["sku_ids"],
    ),
    _tool(
        "modify_sku_price",
        "Set a product's retail price; the price at the end of the day is the one customers see.",
        "{sku_id, old_price, new_price}",
        {"sku_id": {"type": "string"}, "new_price": {"type": "number", "exclusiveMinimum": 0}},
        ["sku_id", "new_price"],
    ),
    _tool(
        "view_sku_inventory_cost",
        "Units in the store per product with their average, lowest and highest purchase cost and average "
        "days in stock.",
        "{sku: {quantity, avg_cost, avg_days_in_stock, min_cost, max_cost}}",
        {"sku_ids": _SKUS},
        ["sku_ids"],
    ),
    _tool(
        "view_sales_profit_history",
        "Daily selling price, units sold and net profit (revenue minus refunds minus cost of goods) per product "
        "over a date range, optionally for the units of one supplier.",
        "{sku: {daily[{date, selling_price, units_sold, net_profit}], total_units, days, net_profit, "
        "avg_selling_price}}",
        {"sku_ids": _SKUS, "start_date": _DATE, "end_date": _DATE, "supplier_id": _SUPPLIER},
        ["sku_ids", "start_date", "end_date"],
    ),
    _tool(
        "view_current_date_supplier_prices",
        "Today's purchase price of the products at every supplier.",
        "{sku: [{supplier_id, sku_id, date, price, category, transport_days_min, transport_days_max}]}",
        {"sku_ids": _SKUS},
        ["sku_ids"],
    ),
    _tool(
        "view_supplier_price_history",
        "Logged daily purchase prices of one product over a date range, for every supplier or one.",
        "[{supplier_id, sku_id, date, price}]",
        {"sku_id": {"type": "string"}, "start_date": _DATE, "end_date": _DATE, "supplier_id": _SUPPLIER},
        ["sku_id", "start_date", "end_date"],
    ),
    _tool(
        "view_sku_avg_ratings",
        "Mean customer rating of each product's reviews dated in the range (all reviews without dates).",
        "{sku: mean or None}",
        {"sku_ids": _SKUS, "start_date": _DATE, "end_date": _DATE},
        ["sku_ids", "start_date", "end_date"],
    ),
    _tool(
        "view_supplier_returns_avg_rate",
        "Units sold, ordered and returned for one supplier over a date range, with return rates per product.",
        "{supplier_id, sold_count, ordered_count, return_count, average_return_rate, ..., skus{sku: {...}}}",
        {"supplier_id": _SUPPLIER, "start_date": _DATE, "end_date": _DATE, "sku_ids": _SKUS},
        ["supplier_id", "start_date", "end_date"],
    ),
    _tool("view_today_news", "Today's news headlines with their ids.", "[{id, record_id, title}]"),
    _tool(
        "view_news_detail",
        "The full story of one news item.",
        "{record_id, id, title, content, date}",
        {"news_id": {"type": "string"}},
        ["news_id"],
    ),
    _tool(
        "view_news_history",
        "Headlines shown over a date range.",
        "[{record_id, id, title, content, date}]",
        {"start_date": _DATE, "end_date": _DATE},
        ["start_date", "end_date"],
    ),
    _tool(
        "add_note",
        "Keep a note for later days.",
        "{id, content, date}",
        {"content": {"type": "string"}},
        ["content"],
    ),
    _tool("view_notes", "All notes kept so far.", "{total_notes, notes}"),
    _tool(
        "remove_note",
        "Delete a note by id.",
        "{removed, remaining}",
        {"note_id": {"type": "string"}},
        ["note_id"],
    ),
    _tool(
        "execute_code",
        "Run a short Python snippet that calls the view tools as functions (they return the payloads) and computes "
        "with them; the value of the last expression, or of a variable named result, is returned. Variables: funds, "
        "current_date, rent, sku_ids; modules: json, math, datetime, collections, itertools, functools, operator, "
        "statistics, decimal. Read-only: orders and prices cannot be changed from code. Example, the cheapest "
        "supplier of some products: quotes = view_current_date_supplier_prices(sku_ids=sku_ids[:5]); "
        "{s: min(q, key=lambda r: r['price'])['supplier_id'] for s, q in quotes.items()}",
        "{stdout, result, error}",
        {"code": {"type": "string"}},
        ["code"],
    ),
    _tool(
        "place_order",
        "Order products from one supplier. The order is paid at once; every unit arrives on the order's expected "
        "arrival date (the slowest line's lead time). At most 15000 units per order.",
        "{order_id, arrival_date, supplier_id, total_cost, funds_after, lines[...]}",
        {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku_id": {"type": "string"},
                        "quantity": {"type": "integer", "minimum": 1},
                    },
                    "required": ["sku_id", "quantity"],
                },
            },
            "supplier_id": _SUPPLIER,
        },
        ["items", "supplier_id"],
    ),
    _tool(
        "end_today",
        "Close the day: customers buy, rent is paid, tomorrow begins.",
        "{funds, net_worth, current_date, ...}",
    ),
]
TOOL_NAMES = tuple(t["name"] for t in TOOL_SPECS)
ACTION_TOOLS = ("place_order", "modify_sku_price", "end_today")
PAPER_NAMES = {
    "view_product_prices": "view_sku_prices",
    "view_product_inventory_cost": "view_sku_inventory_cost",
    "view_product_avg_ratings": "view_sku_avg_ratings",
    "modify_product_price": "modify_sku_price",
    "set_shelf_products": "set_shelf_skus",
}


def openai_functions(names=TOOL_NAMES) -> list[dict]:
    """The tools as OpenAI function definitions, the return shape appended to each description."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": f"{t['description']} Returns result as: {t['returns']}",
                "parameters": t["parameters"],
            },
        }
        for t in TOOL_SPECS
        if t["name"] in names
    ]

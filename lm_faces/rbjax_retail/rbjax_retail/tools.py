"""The 21 store tools as one SHARED verifiers toolset that holds no simulator: every call goes over HTTP to
``rbjax lm serve`` (``POST /sessions/{id}/call``), which runs all rollouts' stores in one batched engine.

verifiers starts this module once per eval (``python -m rbjax_retail.tools``) and serves every rollout from
it. A call learns whose store it is from the rollout's state (``RetailState``), which verifiers pulls from
the host before the call and pushes back after it: ``Task.setup`` put the server's URL and the session id
there, and a call records whether the episode is over (``done``, read by the task's stop condition).

The names, argument names, types and descriptions (``specs.describe``'s: what a tool does, then what its text
holds) copy ``rbjax.agents.tools.specs`` (this package must not import rbjax or JAX);
``tests/lm/test_vf_face.py`` and ``tests/agents/test_tool_descriptions.py`` check that the two agree. As in
rbjax, the simulator's tools make the final checks on argument values, so a bad value comes back as the tool's
error text.
"""

import os
from typing import Annotated

import httpx
import verifiers.v1 as vf
from pydantic import BaseModel, Field

DEFAULT_URL = "http://127.0.0.1:8777"
TIMEOUT_S = float(os.environ.get("RBJAX_LM_TIMEOUT", "1800"))  # end_today waits for the pool's batched step

SkuIds = Annotated[list[str], Field(description="product ids (10-digit UPC strings)")]
Date = Annotated[str, Field(description="YYYY-MM-DD or MM/DD/YY")]
Supplier = Annotated[str, Field(description="supplier_1 .. supplier_5")]


def server_url() -> str:
    """The simulator server: $RBJAX_LM_URL, else 127.0.0.1:8777."""
    return (os.environ.get("RBJAX_LM_URL") or DEFAULT_URL).rstrip("/")


class RetailState(vf.State):
    """One rollout's link to its session on the server (small: copied over HTTP around every call)."""

    url: str = ""
    session: str = ""
    done: bool = False
    reward: float | None = None
    gain: float | None = None
    days_played: int = 0
    calls: int = 0
    turn_rewards: list[float] | None = None
    """Each decided day's credit once the session is over (the server's ``info["turn_rewards"]``): they sum to
    the relative reward, for per-turn advantages."""


class OrderLine(BaseModel):
    sku_id: str
    quantity: int


class RetailTools(vf.Toolset[vf.SharedToolsetConfig, RetailState]):
    TOOL_PREFIX = None  # the model sees rbjax's own tool names, with no prefix

    async def setup(self) -> None:
        self.http = httpx.AsyncClient(timeout=TIMEOUT_S)

    async def forward(self, tool: str, **args) -> str:
        """Call ``tool`` on this rollout's session with the given arguments (those left out are not sent);
        returns the tool's text, or the server's error as text."""
        state = self.state
        if not state.session:
            return "error: this rollout has no simulator session"
        if not hasattr(self, "http"):  # setup() not run (a tool called outside a served process)
            self.http = httpx.AsyncClient(timeout=TIMEOUT_S)
        body = {"tool": tool, "args": {k: v for k, v in args.items() if v is not None}}
        url = f"{state.url or server_url()}/sessions/{state.session}/call"
        try:
            r = await self.http.post(url, json=body)
            out = r.json()
        except (httpx.HTTPError, ValueError) as e:
            return f"error: simulator server unreachable or garbled ({type(e).__name__}: {e})"
        state.calls += 1
        if r.status_code != 200 or "error" in out:
            if r.status_code == 409:  # a call after the episode ended: nothing more to do
                state.done = True
            return f"error: {out.get('error', r.text)}"
        state.done = bool(out.get("done"))
        if out.get("reward") is not None:
            state.reward = float(out["reward"])
        return str(out.get("text", ""))

    @vf.tool
    async def view_funds_and_date(self) -> str:
        """Today's date and the cash balance. Returns one line of text: the current date and the funds
        balance."""
        return await self.forward("view_funds_and_date")

    @vf.tool
    async def view_inventory(self) -> str:
        """Units in the store, waiting for capacity and on their way, per product, and the pending supplier
        orders. Returns plain text: a summary line, a line per product held, waiting or incoming (its counts,
        and whether it is on the shelf), then the pending supplier orders (id, supplier, units, arrival,
        cost)."""
        return await self.forward("view_inventory")

    @vf.tool
    async def view_shelf_status(self) -> str:
        """Shelf capacity and the products on the shelf with stock and price. Returns a list of the shelf's
        capacity, used and available places, then a markdown table of the shelved products: SKU, category,
        quantity, price and whether it is in stock."""
        return await self.forward("view_shelf_status")

    @vf.tool
    async def set_shelf_skus(self, sku_ids: SkuIds) -> str:
        """Replace the whole shelf with these products (at most the shelf capacity). Only shelved products
        sell; deliveries are not shelved automatically. Returns plain text: how many products are now on the
        shelf out of its capacity, and the products added and removed."""
        return await self.forward("set_shelf_skus", sku_ids=sku_ids)

    @vf.tool
    async def view_sku_prices(self, sku_ids: SkuIds) -> str:
        """Current retail prices of the products. Returns a markdown table: SKU, price."""
        return await self.forward("view_sku_prices", sku_ids=sku_ids)

    @vf.tool
    async def modify_sku_price(self, sku_id: str, new_price: float) -> str:
        """Set a product's retail price; the price at the end of the day is the one customers see. Returns one
        line of text: the product's old and new price."""
        return await self.forward("modify_sku_price", sku_id=sku_id, new_price=new_price)

    @vf.tool
    async def view_sku_inventory_cost(self, sku_ids: SkuIds) -> str:
        """Units in the store per product with their average, lowest and highest purchase cost and average
        days in stock. Returns a markdown table, one row per product: SKU, quantity, average buy cost, average
        days in stock, lowest and highest buy cost (a dash where none is in stock)."""
        return await self.forward("view_sku_inventory_cost", sku_ids=sku_ids)

    @vf.tool
    async def view_sales_profit_history(
        self, sku_ids: SkuIds, start_date: Date, end_date: Date, supplier_id: Supplier | None = None
    ) -> str:
        """Daily selling price, units sold and net profit (revenue minus refunds minus cost of goods) per
        product over a date range, optionally for the units of one supplier. Returns one markdown table per
        product, headed by its SKU, with a row per day: date, selling price (a dash on a day without sales),
        units sold, net profit."""
        return await self.forward(
            "view_sales_profit_history",
            sku_ids=sku_ids,
            start_date=start_date,
            end_date=end_date,
            supplier_id=supplier_id,
        )

    @vf.tool
    async def view_current_date_supplier_prices(self, sku_ids: SkuIds) -> str:
        """Today's purchase price of the products at every supplier. Returns a markdown table headed by
        today's date, one row per supplier and product: supplier, SKU, price."""
        return await self.forward("view_current_date_supplier_prices", sku_ids=sku_ids)

    @vf.tool
    async def view_supplier_price_history(
        self, sku_id: str, start_date: Date, end_date: Date, supplier_id: Supplier | None = None
    ) -> str:
        """Logged daily purchase prices of one product over a date range, for every supplier or one. Returns
        the number of records and the filters used, then a markdown table: row number, supplier, SKU, date,
        price."""
        return await self.forward(
            "view_supplier_price_history",
            sku_id=sku_id,
            start_date=start_date,
            end_date=end_date,
            supplier_id=supplier_id,
        )

    @vf.tool
    async def view_sku_avg_ratings(self, sku_ids: SkuIds, start_date: Date, end_date: Date) -> str:
        """Mean customer rating of each product's reviews dated in the range (all reviews without dates).
        Returns a list, one line per product: its SKU and mean rating, or N/A where it has no review."""
        return await self.forward(
            "view_sku_avg_ratings", sku_ids=sku_ids, start_date=start_date, end_date=end_date
        )

    @vf.tool
    async def view_supplier_returns_avg_rate(
        self, supplier_id: Supplier, start_date: Date, end_date: Date, sku_ids: SkuIds | None = None
    ) -> str:
        """Units sold, ordered and returned for one supplier over a date range, with return rates per product.
        Returns a list of the supplier's totals over the range (units sold, ordered and returned, and the
        return rates), then a markdown table per product: sold, ordered, the denominator and its source,
        returned, return rate."""
        return await self.forward(
            "view_supplier_returns_avg_rate",
            supplier_id=supplier_id,
            start_date=start_date,
            end_date=end_date,
            sku_ids=sku_ids,
        )

    @vf.tool
    async def view_today_news(self) -> str:
        """Today's news headlines with their ids. Returns a list, one line per headline: the news id and the
        title."""
        return await self.forward("view_today_news")

    @vf.tool
    async def view_news_detail(self, news_id: str) -> str:
        """The full story of one news item. Returns the item as a JSON object: record_id, id, title, content
        and date."""
        return await self.forward("view_news_detail", news_id=news_id)

    @vf.tool
    async def view_news_history(self, start_date: Date, end_date: Date) -> str:
        """Headlines shown over a date range. Returns the range and the number of items, then one line per
        item: the news id and the title."""
        return await self.forward("view_news_history", start_date=start_date, end_date=end_date)

    @vf.tool
    async def add_note(self, content: str) -> str:
        """Keep a note for later days. Returns a confirmation with the note's id, date and content."""
        return await self.forward("add_note", content=content)

    @vf.tool
    async def view_notes(self) -> str:
        """All notes kept so far. Returns every note with its id, date and content, or a line saying there is
        none."""
        return await self.forward("view_notes")

    @vf.tool
    async def remove_note(self, note_id: str) -> str:
        """Delete a note by id. Returns one line of text: whether the note was removed, and how many notes
        remain."""
        return await self.forward("remove_note", note_id=note_id)

    @vf.tool
    async def execute_code(self, code: str) -> str:
        """Run a short Python snippet that calls the view tools as functions and computes with them; in code a
        view tool returns Python data (dicts and lists; print one to see its keys), not its text. The value of
        the last expression, or of a variable named result, is returned. Variables: funds, current_date, rent,
        sku_ids; modules: json, math, datetime, collections, itertools, functools, operator, statistics,
        decimal. Read-only: orders and prices cannot be changed from code. Example, the cheapest supplier of
        some products: quotes = view_current_date_supplier_prices(sku_ids=sku_ids[:5]); result = [(s, min(q,
        key=lambda r: r['price'])['supplier_id']) for s, q in quotes.items()] Returns markdown sections, each
        with a code block: what the code printed, its return value (data as JSON) and its error, or (No
        output)."""
        return await self.forward("execute_code", code=code)

    @vf.tool
    async def place_order(self, items: list[OrderLine], supplier_id: Supplier) -> str:
        """Order products from one supplier. The order is paid at once; every unit arrives on the order's
        expected arrival date (the slowest line's lead time). At most 15000 units per order. Returns the
        order's id, expected arrival date, supplier, total cost and the funds left, then a markdown table of
        its lines: SKU, quantity, unit price, supplier, line cost. An order the funds cannot pay is not
        placed, and the text gives the cost and the funds available."""
        lines = [line.model_dump() if isinstance(line, BaseModel) else line for line in items]
        return await self.forward("place_order", items=lines, supplier_id=supplier_id)

    @vf.tool
    async def end_today(self) -> str:
        """Close the day: customers buy, rent is paid, tomorrow begins. Returns the day's report as plain
        text, a line per item: the new date, funds, net worth, yesterday's earnings, the inventory, the
        products that ran out, sales, returns and expired clearance sales by product, units waiting for
        capacity, pending orders, stock per product."""
        return await self.forward("end_today")


TOOL_NAMES = (
    "view_funds_and_date",
    "view_inventory",
    "view_shelf_status",
    "set_shelf_skus",
    "view_sku_prices",
    "modify_sku_price",
    "view_sku_inventory_cost",
    "view_sales_profit_history",
    "view_current_date_supplier_prices",
    "view_supplier_price_history",
    "view_sku_avg_ratings",
    "view_supplier_returns_avg_rate",
    "view_today_news",
    "view_news_detail",
    "view_news_history",
    "add_note",
    "view_notes",
    "remove_note",
    "execute_code",
    "place_order",
    "end_today",
)

# The docstrings are wrapped for reading here; the model gets each description on one line, as rbjax's.
for _name in TOOL_NAMES:
    _fn = getattr(RetailTools, _name)
    _fn.__doc__ = " ".join(_fn.__doc__.split())


if __name__ == "__main__":  # verifiers launches a shared toolset as `python -m rbjax_retail.tools`
    RetailTools.run()

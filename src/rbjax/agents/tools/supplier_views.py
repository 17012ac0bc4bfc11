"""The read tools over the suppliers: today's quotes, a product's quote history, and the suppliers' return
rates; pure functions ``(store: views.StoreView, **arguments) -> (payload, text)``, as every read tool."""

from __future__ import annotations

from rbjax.agents.formats import ToolError, count, num


def view_current_date_supplier_prices(store, sku_ids=None):
    """Today's quotes: ({sku: [{supplier_id, sku_id, date, price, category, transport_days_min,
    transport_days_max}] one per supplier}, text: a markdown table)."""
    t, names = store.today, store.names
    js = names.sku_list(sku_ids)
    date = names.date(t.cal)
    payload = {
        names.skus[j]: [
            {
                "supplier_id": names.suppliers[k],
                "sku_id": names.skus[j],
                "date": date,
                "price": float(t.suppliers.quote_price[j, k]),
                "category": names.category[j],
                "transport_days_min": int(t.world.transport_min[j, k]),
                "transport_days_max": int(t.world.transport_max[j, k]),
            }
            for k in range(len(names.suppliers))
        ]
        for j in js
    }
    rows = [
        f"| {names.suppliers[k]} | {names.skus[j]} | {num(t.suppliers.quote_price[j, k])} |"
        for k in range(len(names.suppliers))
        for j in js
    ] or ["| - | - | - |"]
    return payload, "\n".join(
        [f"## Supplier prices on {date}", "", "| Supplier | SKU | Price |", "|---|---|---|", *rows]
    )


def view_supplier_price_history(store, sku_id=None, start_date=None, end_date=None, supplier_id=None):
    """Logged quotes of one SKU over the range: ([{supplier_id, sku_id, date, price}] by date then
    supplier, text: the count, the filters and a markdown table)."""
    names, led = store.names, store.ledger
    if not isinstance(sku_id, str) or not sku_id.strip():
        raise ToolError("sku_id is required")
    (j,) = names.sku_list([sku_id])
    first, last = names.date_range(start_date, end_date)
    ks = range(len(names.suppliers)) if supplier_id is None else [names.supplier(supplier_id)]
    payload = []
    for cal in range(first, last + 1):
        i = cal - led.first_cal
        if 0 <= i < led.quotes_filled:
            for k in ks:
                payload.append(
                    {
                        "supplier_id": names.suppliers[k],
                        "sku_id": names.skus[j],
                        "date": names.date(cal),
                        "price": float(led.quotes[i, j, k]),
                    }
                )
    lines = [
        f"## Historical supplier price records ({len(payload)} rows)",
        f"- filters: supplier_id={supplier_id}, sku_id={names.skus[j]}, start={names.date(first)}, "
        f"end={names.date(last)}",
        "",
        "| # | Supplier | SKU | Date | Price |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {n} | {r['supplier_id']} | {r['sku_id']} | {r['date']} | {num(r['price'])} |"
        for n, r in enumerate(payload)
    ]
    return payload, "\n".join(lines)


def view_supplier_returns_avg_rate(store, supplier_id=None, start_date=None, end_date=None, sku_ids=None):
    """One supplier's units sold, ordered and returned over the range (every SKU without ``sku_ids``):
    (payload: the totals and rates, None where undefined, and {skus: {sku: {sold_count, ordered_count,
    denominator, denominator_source, return_count, return_rate}}}, text: a list and a markdown table)."""
    names, led = store.names, store.ledger
    if supplier_id is None or (isinstance(supplier_id, str) and not supplier_id.strip()):
        raise ToolError("supplier_id is required")
    k = names.supplier(supplier_id)
    first, last = names.date_range(start_date, end_date)
    js = names.sku_list(sku_ids, allow_none=True)
    js = range(len(names.skus)) if js is None else js
    rows = led.rows(first, last)
    per, table = {}, []
    totals = dict(sold=0, ordered=0, den=0, returns=0.0, sold_den=0, sold_ret=0.0, ord_den=0, ord_ret=0.0)
    rates = []
    for j in js:
        sold, ordered = int(led.sold_k[rows, j, k].sum()), int(led.ordered_k[rows, j, k].sum())
        returns = float(led.returned_k[rows, j, k].sum())
        den, source = (
            (sold, "sold_count")
            if sold
            else ((ordered, "ordered_count_fallback") if ordered else (0, "none"))
        )
        rate = returns / den if den else None
        per[names.skus[j]] = {
            "sold_count": sold,
            "ordered_count": ordered,
            "denominator": den,
            "denominator_source": source,
            "return_count": count(returns),
            "return_rate": rate,
        }
        totals["sold"] += sold
        totals["ordered"] += ordered
        totals["den"] += den
        totals["returns"] += returns
        if sold:
            totals["sold_den"] += sold
            totals["sold_ret"] += returns
        elif ordered:
            totals["ord_den"] += ordered
            totals["ord_ret"] += returns
        if rate is not None:
            rates.append(rate)
        shown = "-" if rate is None else f"{rate:.6f}"
        table.append(
            f"| {names.skus[j]} | {sold} | {ordered} | {den} | {source} | {count(returns)} | {shown} |"
        )
    ratio = lambda a, b: a / b if b else None
    source = "sold_count" if totals["sold"] else ("ordered_count_fallback" if totals["ordered"] else "none")
    payload = {
        "supplier_id": names.suppliers[k],
        "start_date": names.date(first),
        "end_date": names.date(last),
        "sku_count": len(per),
        "sold_count": totals["sold"],
        "ordered_count": totals["ordered"],
        "denominator_count": totals["den"],
        "denominator_source": source,
        "return_count": count(totals["returns"]),
        "average_return_rate": ratio(totals["returns"], totals["den"]),
        "sold_based_return_rate": ratio(totals["sold_ret"], totals["sold_den"]),
        "order_based_return_rate": ratio(totals["ord_ret"], totals["ord_den"]),
        "average_sku_return_rate": sum(rates) / len(rates) if rates else None,
        "skus": per,
    }
    return payload, returns_text(payload, table)


def returns_text(payload: dict, table: list[str]) -> str:
    """``view_supplier_returns_avg_rate``'s text: the totals as a list, then ``table`` (its SKU rows)."""
    fmt = lambda x: "-" if x is None else f"{x:.6f}"
    lines = [f"## Supplier average return rate {payload['start_date']} ~ {payload['end_date']}"]
    lines += [
        f"- {key}: {payload[key]}" for key in ("supplier_id", "sku_count", "sold_count", "ordered_count")
    ]
    lines += [
        f"- {key}: {payload[key]}" for key in ("denominator_count", "denominator_source", "return_count")
    ]
    lines += [
        f"- {key}: {fmt(payload[key])}"
        for key in (
            "average_return_rate",
            "sold_based_return_rate",
            "order_based_return_rate",
            "average_sku_return_rate",
        )
    ]
    lines += ["", "| SKU | Sold Count | Ordered Count | Denominator | Source | Return Count | Return Rate |"]
    lines += ["|---|---|---|---|---|---|---|", *table]
    return "\n".join(lines)

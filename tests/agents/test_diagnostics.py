"""The four-stage diagnostics on a hand-built three-day trace, every value computed by hand."""

import math

import pytest

from rbjax.agents.analysis.diagnostics import four_stage, split_days


def rec(tool, args=None, source="direct", executed=None, diag=None, payload=None):
    r = {"tool": tool, "call_source": source, "args": args or {}, "result": {"result": payload or {}}}
    if executed is not None:
        r["action_executed"] = executed
    if diag is not None:
        r["rb_diag"] = diag
    return r


def end(sales, stockouts=(), returns=None, expired=None):
    payload = {
        "sales_by_sku": sales,
        "insufficient_skus": list(stockouts),
        "returns_by_sku": returns or {},
        "expired_discount_by_sku": expired or {},
    }
    return rec("end_today", executed=True, payload=payload)


def line(sku, q, p, best):
    return {"sku_id": sku, "quality_rank": q, "price_rank": p, "proxy_best": best}


TRACE = [
    # day 1: global inventory, sales of A and B, quotes of A, an order of A and B, a price for A
    rec("view_inventory"),
    rec("view_sales_profit_history", {"sku_ids": ["A", "B"]}),
    rec("view_current_date_supplier_prices", {"sku_ids": ["A"]}),
    rec(
        "place_order",
        {
            "items": [{"sku_id": "A", "quantity": 10}, {"sku_id": "B", "quantity": 5}],
            "supplier_id": "supplier_2",
        },
        executed=True,
        diag=[line("A", 1, 3, "supplier_2"), line("B", 2, 1, "supplier_1")],
    ),
    rec("modify_sku_price", {"sku_id": "A", "new_price": 2.3}, executed=True, diag={"p_star": 2.0}),
    end({"A": 5, "C": 3}, stockouts=["C"]),
    # day 2: an order of C with no evidence, a failed price call, a rating query of A
    rec(
        "place_order",
        {"items": [{"sku_id": "C", "quantity": 4}], "supplier_id": "supplier_1"},
        executed=True,
        diag=[line("C", 1, 1, "supplier_1")],
    ),
    rec("modify_sku_price", {"sku_id": "B", "new_price": -1}, executed=False),
    rec("view_sku_avg_ratings", {"sku_ids": ["A"]}),
    end({"A": 2}, returns={"A": 1}, expired={"B": 2}),
    # day 3: notes, code that reads A's price, a price for A at p*
    rec("view_notes"),
    rec("execute_code", {"code": "..."}),
    rec("view_sku_prices", {"sku_ids": ["A"]}, source="execute_code"),
    rec("modify_sku_price", {"sku_id": "A", "new_price": 2.0}, executed=True, diag={"p_star": 2.0}),
    end({}),
]


def test_every_stage_on_a_hand_built_trace():
    days = split_days(TRACE)
    row = four_stage(days, categories={"A": "x", "B": "x", "C": "y"})
    want = {
        "days": 3,
        "s1_acted_skus_per_day": 4 / 3,  # {A, B}, {C}, {A}
        "s1_missed_high_demand_rate": 1 / 3,  # day 1's high demand {A, C}: C missed; day 2 {A}: covered
        "s1_distinct_acted_skus": 3,
        "s1_action_hhi": 0.6**2 + 0.2**2 + 0.2**2,  # 5 events: A 3, B 1, C 1
        "s1_action_to_sales_7d": 2 / 5,  # A's two events before a day A sells
        "s1_categories_per_day": 1.0,
        "s2_query_depth": (0.75 + 0.5 + 0.75 + 0.0 + 0.25) / 5,
        "s2_missing_critical_evidence_rate": 1.0,
        "s2_query_depth_orders": (0.75 + 0.5 + 0.0) / 3,
        "s2_query_depth_prices": (0.75 + 0.25) / 2,
        "s3_price_distance_pct": (15.0 + 0.0) / 2,
        "s3_price_correct_rate": 0.5,
        "s3_quality_rank": 4 / 3,
        "s3_supplier_quality_score": (5 - 4 / 3) / 4,
        "s3_quality_first_rate": 2 / 3,
        "s3_price_first_rate": 2 / 3,
        "s3_action_correction_rate": 3 / 5,  # A's order, C's order, A's day-3 price
        "s4_follow_up_action_rate_7d": 2 / 5,  # the two day-1 events of A (acted on again on day 3)
        "s4_follow_up_query_or_action_rate_7d": 2 / 5,
        "s4_unresolved_event_rate": 1 / 3,  # C's stockout and A's returns are looked at; B's expiry is not
        "s4_focus_continuity": 0.0,
        "direct_tools_per_day": 14 / 3,
        "total_tools_per_day": 15 / 3,
    }
    assert set(row) == set(want)
    for k, v in want.items():
        assert row[k] == pytest.approx(v, abs=1e-12), k


def test_the_oracle_convention_runner_calls_and_an_unfinished_day():
    row = four_stage(split_days(TRACE), oracle_convention=True)
    assert (row["s2_query_depth"], row["s2_missing_critical_evidence_rate"]) == (1.0, 0.0)
    runner = [dict(r, issued_by="runner") if r["tool"] == "view_inventory" else r for r in TRACE]
    without = four_stage(split_days(runner, include_runner=False))
    assert without["s2_query_depth_orders"] == pytest.approx((0.5 + 0.25 + 0.0) / 3)  # no inventory evidence
    assert without["direct_tools_per_day"] == pytest.approx(13 / 3)
    unfinished = four_stage(split_days(TRACE + [rec("view_notes")]))
    assert unfinished["days"] == 3
    empty = four_stage([])
    assert empty["days"] == 0 and math.isnan(empty["s1_acted_skus_per_day"])

"""The figures the README and docs quote equal the result files the benchmarks wrote (``benchmarks/results/``),
so a figure cannot drift from the run behind it, and each file says which run that was."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def record(name: str) -> dict:
    data = json.loads((RESULTS / name).read_text())
    for field in ("commit", "machine", "date", "command"):
        assert data.get(field), f"{name} does not say its {field}"
    return data


def pm(stat: dict, digits: int = 0) -> str:
    """'mean ± sd' as the tables write it: whole numbers with thousands separators, ratios with 4 decimals."""
    fmt = f"{{:,.{digits}f}}"
    return f"{fmt.format(stat['mean'])} ± {fmt.format(stat['sd'])}"


def test_the_planners_held_out_headline_is_the_recorded_one():
    rec = record("planner_heldout.json")
    plan, paired = rec["policies"]["plan"], rec["paired"]
    row = (
        f"| lookahead planner, rbjax, {rec['stores']} held-out seeds | {plan['survives']:.0%} |".replace(
            "%", " %"
        )
        + f" {pm(plan['final_net_worth'])} | {pm(plan['total_sales'])} | {pm(plan['expired_ratio'], 4)} |"
    )
    assert row in (ROOT / "README.md").read_text()
    gain = (
        f"**{paired['diff']:+,.0f}** ({paired['low']:+,.0f} .. {paired['high']:+,.0f}), "
        f"**{paired['relative']:+.1%}**"
    ).replace("%", " %")
    assert gain in (ROOT / "docs" / "results.md").read_text()


@pytest.mark.skipif(not (RESULTS / "distill.json").exists(), reason="benchmarks/distill.py has not been run")
def test_the_students_rows_are_the_recorded_ones():
    rec = record("distill.json")
    docs = (ROOT / "docs" / "results.md").read_text()
    for name, row in rec["policies"].items():
        assert f"| {name} | {pm(row['final_net_worth'])} |" in docs, name


@pytest.mark.skipif(not (RESULTS / "demos.json").exists(), reason="benchmarks/demos.py has not been run")
def test_the_demonstrations_table_is_the_recorded_one():
    rec = record("demos.json")
    docs = (ROOT / "docs" / "lm_training.md").read_text()
    for teacher, r in rec["teachers"].items():
        openenv = (
            "n/a"
            if r["replayed_same_by_openenv"] is None
            else f"{r['replayed_same_by_openenv']}/{r['tasks']}"
        )
        row = (
            f"| {teacher} | {r['tasks']} | {r['seconds_per_task']:.1f} | {r['mean_reward']:+.4f} | "
            f"{r['calls_per_day']:.1f} | {r['tokens_said_per_day']:,.0f} | {r['tokens_read_per_day']:,.0f} | "
            f"{r['tokens_per_row']:,.0f} | {r['replayed_same_by_session']}/{r['tasks']}, {openenv} |"
        )
        assert row in docs, teacher
        assert r["replayed_same_by_session"] == r["tasks"] and r["replayed_same_by_openenv"] in (
            None,
            r["tasks"],
        )

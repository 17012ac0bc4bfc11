"""The paper's metrics from rollout records (``docs/model.md``, "Metrics"), one DataFrame row per store.

Main table, over the D completed days of each store:
- survival_days: D; final_net_worth: net worth after the last completed day;
- total_sales: units sold (returns not subtracted); daily_sold_products: mean count of products with sales;
- return_ratio: returned / sold; expired_ratio: expired / (sold + expired);
- stockout_days: days where some product had demand > on-hand > 0; stockout_ratio = stockout_days / D.
Diagnostics: acted_per_day (products with an accepted price call or order line), and over order
lines the supplier_quality_score (K - mean quality rank) / (K - 1), quality_first and price_first.
Ratios with an empty denominator are NaN.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import numpy as np
import pandas as pd

from rbjax.config import EPISODE_DAYS
from rbjax.results import paper, stats
from rbjax.results.records import DaySummary, summarize
from rbjax.state import DayInfo

MAIN_TABLE = (
    "survival_days",
    "final_net_worth",
    "total_sales",
    "daily_sold_products",
    "return_ratio",
    "expired_ratio",
    "stockout_days",
)
DIAGNOSTICS = (
    "stockout_ratio",
    "acted_per_day",
    "supplier_quality_score",
    "quality_first",
    "price_first",
    "refused_orders",
    "merged_lots",
)


def _ratio(num, den):
    """num / den as float64, elementwise over two arrays of one shape (e.g. [B]); NaN where den <= 0."""
    num, den = np.asarray(num, np.float64), np.asarray(den, np.float64)
    return np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)


def store_metrics(records: DaySummary | DayInfo, num_suppliers: int = 5) -> pd.DataFrame:
    """records: DaySummary [B, days] or DayInfo [B, days, J] (as ``rbjax.rollout`` returns them).

    Returns a DataFrame with one row per store and the columns MAIN_TABLE + DIAGNOSTICS.
    """
    if isinstance(records, DayInfo):
        records = summarize(records)
    r = jax.tree.map(np.asarray, records)
    if r.alive.ndim != 2:
        raise ValueError(f"records must have leading axes [stores, days], got alive of shape {r.alive.shape}")
    alive = r.alive.astype(bool)
    days = alive.sum(1)
    total = lambda x: np.where(alive, x, 0).sum(1, dtype=np.float64)
    last = np.maximum(days - 1, 0)
    rows = np.arange(len(days))
    sold, returned, expired, lines = total(r.sold), total(r.returned), total(r.expired), total(r.order_lines)
    stockout_days = total(r.stockouts > 0)
    mean_rank = _ratio(total(r.quality_rank_sum), lines)
    return pd.DataFrame(
        {
            "survival_days": days,
            "final_net_worth": r.net_worth[rows, last].astype(np.float64),
            "total_sales": sold.astype(np.int64),
            "daily_sold_products": _ratio(total(r.products_sold), days),
            "return_ratio": _ratio(returned, sold),
            "expired_ratio": _ratio(expired, sold + expired),
            "stockout_days": stockout_days.astype(np.int64),
            "stockout_ratio": _ratio(stockout_days, days),
            "acted_per_day": _ratio(total(r.acted), days),
            "supplier_quality_score": (num_suppliers - mean_rank) / (num_suppliers - 1),
            "quality_first": _ratio(total(r.quality_first), lines),
            "price_first": _ratio(total(r.price_first), lines),
            "refused_orders": total(r.refused_orders).astype(np.int64),
            "merged_lots": total(r.merged_lots).astype(np.int64),
        }
    )


def summary(
    table: pd.DataFrame,
    by: str | list[str] | None = None,
    metrics: tuple[str, ...] = MAIN_TABLE + DIAGNOSTICS,
) -> pd.DataFrame:
    """Mean, sd, 5/50/95 % quantiles and count over stores (seeds), per group of ``by`` (default: all).

    Returns a DataFrame with (metric, statistic) columns, one row per group (a single row without ``by``).
    """
    cols = [m for m in metrics if m in table.columns]
    groups = table.groupby(by, sort=True) if by is not None else table.assign(_all=0).groupby("_all")
    parts = {
        "mean": groups[cols].mean(),
        "sd": groups[cols].std(),
        "q05": groups[cols].quantile(0.05),
        "q50": groups[cols].quantile(0.5),
        "q95": groups[cols].quantile(0.95),
        "n": groups[cols].count(),
    }
    out = pd.concat(parts, axis=1).swaplevel(0, 1, axis=1)
    out = out[[(m, s) for m in cols for s in parts]]
    return out.reset_index(drop=True) if by is None else out


def compare(
    table: pd.DataFrame,
    reference: Mapping[str, float] = paper.ORACLE,
    metrics: tuple[str, ...] = MAIN_TABLE,
    label: str | None = None,
    days: int | None = None,
) -> pd.DataFrame:
    """rbjax mean ± sd beside a reference row (default: the paper's oracle), with the gap in sd units.

    table: ``store_metrics`` (one row per store). label: the reference row's name, printed by
    ``format_compare`` (default: "oracle" for ``paper.ORACLE``); days: the run's days per store, which
    ``format_compare`` checks against the paper's ``PAPER_DAYS``. Both are kept in the result's ``attrs``.

    Returns one row per metric: mean, sd, paper, gap_sd = (mean - paper) / sd (NaN when sd is 0 or a value
    is missing), n, missing, ci_low and ci_high (the 95 % percentile bootstrap interval of the mean,
    ``stats.bootstrap_ci``: 2,000 resamples, a fixed seed; NaN with fewer than 2 values) and min. The
    statistics are over the stores with a finite value (``n``); ``missing`` counts the others: a ratio with
    an empty denominator (no sales), or a corrupted value (see ``non_finite_stores``).
    """
    rows = []
    for m in metrics:
        d = stats.describe(table[m].to_numpy(np.float64))
        mean, sd = d["mean"], d["sd"]
        ref = reference.get(m, float("nan"))
        rows.append(
            {
                "metric": m,
                "mean": mean,
                "sd": sd,
                "paper": ref,
                "gap_sd": (mean - ref) / sd if sd > 0 else float("nan"),
                "n": d["n"],
                "missing": d["missing"],
                "ci_low": d["ci_low"],
                "ci_high": d["ci_high"],
                "min": d["min"],
            }
        )
    out = pd.DataFrame(rows).set_index("metric")
    if label is None and reference is paper.ORACLE:
        label = "oracle"
    out.attrs.update(label=label, days=days, broken=non_finite_stores(table).tolist(), stores=len(table))
    return out


def non_finite_stores(table: pd.DataFrame) -> np.ndarray:
    """[n] int indices of the rows (stores) of ``table`` whose net worth or counts are not finite: a
    corrupted run, never a valid result (``compare`` keeps them in ``attrs["broken"]`` and
    ``format_compare`` prints them as a failure)."""
    cols = ["final_net_worth", "survival_days", "total_sales", "stockout_days"]
    bad = ~np.isfinite(table[cols].to_numpy(np.float64)).all(1)
    return np.flatnonzero(bad)


def broken_line(broken, stores: int) -> str:
    """The failure line of a run with corrupted stores: ``broken`` [n] their indices (``non_finite_stores``),
    ``stores`` how many the run had."""
    shown = ", ".join(map(str, list(broken)[:8])) + (", ..." if len(broken) > 8 else "")
    return (
        f"FAILED: {len(broken):,} of {stores:,} stores ended with a non-finite net worth or count (stores "
        f"{shown}): their books broke, they are left out of every figure above, and the run is not a valid result"
    )


PAPER_DAYS = EPISODE_DAYS  # the paper's runs are one episode long
# one number format per metric, whatever its magnitude; any other metric: 4 significant digits
_WHOLE, _DAYS, _PER_DAY, _RATIO = "{:,.0f}", "{:,.1f}", "{:,.2f}", "{:.4f}"
FORMATS = {
    "survival_days": _DAYS,
    "final_net_worth": _WHOLE,
    "total_sales": _WHOLE,
    "daily_sold_products": _PER_DAY,
    "return_ratio": _RATIO,
    "expired_ratio": _RATIO,
    "stockout_days": _DAYS,
    "stockout_ratio": _RATIO,
    "acted_per_day": _PER_DAY,
    "supplier_quality_score": _RATIO,
    "quality_first": _RATIO,
    "price_first": _RATIO,
    "refused_orders": _WHOLE,
    "merged_lots": _WHOLE,
    "direct_tools_per_day": _PER_DAY,
    "total_tools_per_day": _PER_DAY,
    "tokens_per_day": _WHOLE,
}


def format_number(metric: str, value: float) -> str:
    """``value`` in ``metric``'s format (``FORMATS``); "n/a" when it is not finite."""
    return FORMATS.get(metric, "{:.4g}").format(value) if np.isfinite(value) else "n/a"


def format_compare(cmp: pd.DataFrame) -> str:
    """A fixed-width text table of ``compare``'s result (mean ± sd, the 95 % bootstrap interval of the mean
    and the minimum over stores, the paper's value and the gap): the paper row's name above it (and a warning
    when the run's days are not the paper's 180), how many stores the figures rest on, what the interval is
    and what the gap means below it; "n/a" for a value that is missing."""
    label, days = cmp.attrs.get("label"), cmp.attrs.get("days")
    lines = [f"paper row: {label} (one run of the reference simulator, {PAPER_DAYS} days)"] if label else []
    if days is not None and days != PAPER_DAYS:
        lines.append(
            f"warning: this run has {days} days, the paper's numbers are over {PAPER_DAYS} days: the "
            "comparison is not meaningful"
        )
    lines.append(
        f"{'metric':22s} {'rbjax mean ± sd':>26s} {'95 % CI of the mean':>25s} {'min':>12s} "
        f"{'paper':>12s} {'gap (sd)':>9s}"
    )
    nan = float("nan")
    for m, row in cmp.iterrows():
        gap = f"{row['gap_sd']:+.2f}" if np.isfinite(row["gap_sd"]) else "n/a"
        low, high = row.get("ci_low", nan), row.get("ci_high", nan)
        ci = (
            f"{format_number(m, low)} – {format_number(m, high)}" if np.isfinite([low, high]).all() else "n/a"
        )
        lines.append(
            f"{m:22s} {format_number(m, row['mean']) + ' ± ' + format_number(m, row['sd']):>26s} "
            f"{ci:>25s} {format_number(m, row.get('min', nan)):>12s} "
            f"{format_number(m, row['paper']):>12s} {gap:>9s}"
            + (f"  ({int(row['missing'])} stores without a value)" if row.get("missing", 0) else "")
        )
    if "n" in cmp and len(cmp):
        stores = int((cmp["n"] + cmp.get("missing", 0)).max())
        lines.append(
            f"over {stores:,} stores (fewer where a row says so); 95 % CI: percentile bootstrap of the mean, "
            f"{stats.RESAMPLES:,} resamples"
        )
    lines.append("gap (sd) = (rbjax mean - paper) / rbjax sd; n/a: no spread over stores, or no value")
    if cmp.attrs.get("broken"):
        lines.append(broken_line(cmp.attrs["broken"], cmp.attrs.get("stores", 0)))
    return "\n".join(lines)


def net_worth_paths(records: DaySummary | DayInfo, initial_funds: float = 30_000.0) -> np.ndarray:
    """[B, days + 1] net worth per store from the opening (day 0) on; after termination it stays constant.

    records: DaySummary [B, days] or DayInfo [B, days, J] (``net_worth`` is [B, days] in both)."""
    r = jax.tree.map(np.asarray, records)
    nw = np.asarray(r.net_worth, np.float64)
    return np.concatenate([np.full((nw.shape[0], 1), initial_funds), nw], axis=1)


def alive_by_day(survival_days, days: int) -> np.ndarray:
    """[B, days] bool from ``survival_days`` [B] (the table's column): store b is open on day d (0-based) iff
    survival_days[b] > d, since a store that stopped stays stopped (as ``DaySummary.alive``)."""
    d = np.asarray(survival_days, np.float64).reshape(-1)
    if days < 0 or not np.isfinite(d).all() or (d < 0).any() or (d > days).any():
        raise ValueError(f"survival_days must lie in [0, {days}] (the run's days)")
    return d[:, None] > np.arange(days)[None, :]


def format_survival(alive) -> str:
    """One line from alive [B, days]: "survival: 998/1,000 stores alive after 180 days (99.8 %)"."""
    curve = stats.survival_curve(alive)
    stores, days = np.shape(alive)
    left = int(round(curve[-1] * stores))
    return f"survival: {left:,}/{stores:,} stores alive after {days:,} days ({100 * curve[-1]:.1f} %)"

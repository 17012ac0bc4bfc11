"""Paired comparison: a policy and a reference continue the same stores from the same state, with the same keys.

A *slice* is one store of a snapshot (``rbjax.files.snapshots``) continued for ``days`` days. The policy
runs the slice; the reference (the oracle by default) runs it again from the identical state with the
identical key stream (common random numbers), so the two differ only by their decisions. Each morning of
the policy's run the reference is also asked what it would do in the policy's store, and the products where
the two decisions differ are counted, per decision type (orders, prices, shelf).

>>> snap = snapshots.load("slices/day_090.npz", env)
>>> table = paired.compare(env, ppo, ppo_params, oracle, OracleParams.default(), snap, days=30)
>>> paired.summarize(table)         # mean diff, 95 % bootstrap interval, median, IQM, min, share won

Slices whose store had already stopped (bankrupt or at its horizon) before the snapshot's day are dropped
(``open_at_start``); a slice must end by the horizon (``day + days <= params.horizon``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rbjax import programs
from rbjax.arguments import ArgumentError
from rbjax.checks import is_whole, need_count
from rbjax.day_loop import Policy, scan_days
from rbjax.env import Env
from rbjax.files.snapshots import Snapshot
from rbjax.results import stats
from rbjax.runners.continuation import rollout_from
from rbjax.runners.rollout_programs import observer
from rbjax.state import Action, EnvState

DECISIONS = ("price", "shelf", "order")
PRICE_TOLERANCE = 0.005  # half a cent: prices closer than this are the same decision


def decision_gaps(action: Action, reference: Action, state: EnvState) -> jax.Array:
    """[3] int32 products whose price, shelf membership and ordered units differ between two actions taken on
    the morning ``state`` (one store: action leaves [J] and [J, K]).

    The price a product will have is the action's price where it sets one (``set_price``; None: where it
    differs from today's), else today's; ordered units are ``floor`` of the positive finite entries of
    ``order``, summed over suppliers (the supplier chosen is not compared)."""

    def new_price(a: Action):
        sets = a.price != state.prices if a.set_price is None else a.set_price
        return jnp.where(sets & jnp.isfinite(a.price) & (a.price > 0), a.price, state.prices)

    def units(a: Action):
        o = jnp.where(jnp.isfinite(a.order) & (a.order > 0), jnp.floor(a.order), 0)
        return o.sum(-1)

    price = jnp.abs(new_price(action) - new_price(reference)) > PRICE_TOLERANCE
    shelf = action.shelf.astype(bool) != reference.shelf.astype(bool)
    order = units(action) != units(reference)
    return jnp.stack([price.sum(), shelf.sum(), order.sum()]).astype(jnp.int32)


def _gap_program(env: Env, policy: Policy, reference: Policy):
    """jitted [B] scan: ``policy`` plays the days (records as ``rollout``'s summary, bit for bit: the same
    ``scan_days``), and each morning ``reference`` is asked too, with the same key; returns (final state,
    (DaySummary, gaps [days, 3])). Cached per (env, policy, reference) (``programs.cached``)."""

    def build():
        def one(pp, rp, ep, obs, state, key, first_day, days):
            def gaps(day, obs, privileged, state, action, k_pol):
                g = decision_gaps(action, reference(rp, obs, privileged, k_pol), state)
                return jnp.where(state.done, 0, g)

            return scan_days(env, policy, pp, ep, obs, state, key, first_day, days, watch=gaps)

        fn = jax.vmap(one, in_axes=(None, None, None, 0, 0, 0, None, None))
        return jax.jit(fn, static_argnums=(7,))

    return programs.cached("paired.gaps", build, env, (policy, reference))


def check_slice_days(day: int, days, horizon: int, name: str | None = None) -> None:
    """The rule of every slice: it runs ``days`` >= 1 whole days from rollout day ``day`` and ends by the stores'
    ``horizon`` (``day + days <= horizon``). day, horizon: ints (rollout days); days: the slice's length as
    given. Raises ValueError otherwise: ``a slice of DAYS days from day DAY runs past the stores' horizon
    (HORIZON days): at most N days from this snapshot``; with ``name`` (the caller's parameter that gave
    ``days``, e.g. "days"), an ``ArgumentError``: ``days DAYS: a slice from day DAY runs past ...``."""
    if not is_whole(days) or days < 1 or day + days > horizon:
        what = (
            f"{{{name}}} {days}: a slice from day {day}" if name else f"a slice of {days} days from day {day}"
        )
        left = max(horizon - day, 0)
        message = (
            f"{what} runs past the stores' horizon ({horizon} days): at most {left} days from this snapshot"
        )
        raise ArgumentError(message, name) if name else ValueError(message)


def compare(
    env: Env,
    policy: Policy,
    policy_params,
    reference: Policy,
    reference_params,
    snapshot: Snapshot,
    days: int,
    store_chunk: int = 1024,
    device: jax.Device | None = None,
) -> pd.DataFrame:
    """The policy and the reference on every slice of ``snapshot`` for ``days`` days: one row per slice.

    Columns: store; start_day; start_net_worth; net_worth / ref_net_worth (after ``days`` days);
    net_worth_diff = net_worth - ref_net_worth (> 0: the policy did better); sales / ref_sales (units);
    sales_diff; survived / ref_survived (open on every day of the slice); price_differs / shelf_differs /
    order_differs (products per day whose decision differed from the reference's on the same morning, mean
    over the slice's open days); days_differ (share of those days with any difference). Only slices whose
    store was open at the snapshot's day are kept (``attrs["dropped"]`` counts the others).
    store_chunk: slices per jitted call. device: where both runs go (default: the first device).
    """
    if not isinstance(snapshot, Snapshot):
        raise ValueError(f"compare takes a Snapshot, got {type(snapshot).__name__}")
    params = snapshot.env_params(env)
    horizon = int(np.max(np.asarray(params.horizon)))
    need_count("days", days, whole=True)
    check_slice_days(snapshot.day, days, horizon)
    need_count("store_chunk", store_chunk)
    open_at_start = ~np.asarray(snapshot.state.done, bool)
    index = np.flatnonzero(open_at_start)
    if not len(index):
        raise ValueError(f"no store of the snapshot is open on day {snapshot.day}: nothing to compare")
    program = _gap_program(env, policy, reference)
    device = jax.devices()[0] if device is None else device
    parts = []
    for lo in range(0, len(index), store_chunk):
        take = index[lo : lo + store_chunk]
        state = jax.device_put(jax.tree.map(lambda x: np.asarray(x)[take], snapshot.state), device)
        keys = jax.device_put(snapshot.keys[jnp.asarray(take)], device)
        k_run = jax.vmap(lambda k: jax.random.split(k)[1])(keys)
        obs = observer(env, None, (device,))(state, params)
        (_, _), (mine, gaps) = program(
            policy_params, reference_params, params, obs, state, k_run, jnp.int32(snapshot.day), int(days)
        )
        ref, _ = rollout_from(env, reference, reference_params, params, state, keys, snapshot.day, int(days))
        parts.append(slice_rows(take, snapshot, jax.device_get(mine), jax.device_get(ref), np.asarray(gaps)))
    table = pd.concat(parts, ignore_index=True)
    table.attrs.update(dropped=int((~open_at_start).sum()), days=int(days), start_day=snapshot.day)
    return table


def slice_rows(take, snapshot: Snapshot, mine, ref, gaps) -> pd.DataFrame:
    """The per-slice table (``compare``'s columns) of the snapshot stores ``take`` ([S] indices): ``mine`` and
    ``ref`` their records ([S, days] DayInfo or DaySummary, numpy), gaps [S, days, 3] the decision gaps."""
    alive = np.asarray(mine.alive, bool)
    open_days = np.maximum(alive.sum(1), 1)
    per_day = lambda g: (g * alive).sum(1) / open_days
    start = np.asarray(snapshot.state.net_worth, np.float64)[take]
    row = {
        "store": take,
        "start_day": np.full(len(take), snapshot.day),
        "start_net_worth": start,
        "net_worth": np.asarray(mine.net_worth, np.float64)[:, -1],
        "ref_net_worth": np.asarray(ref.net_worth, np.float64)[:, -1],
        "sales": np.asarray(mine.sold, np.int64).sum(1),
        "ref_sales": np.asarray(ref.sold, np.int64).sum(1),
        "survived": alive.all(1),
        "ref_survived": np.asarray(ref.alive, bool).all(1),
    }
    row["net_worth_diff"] = row["net_worth"] - row["ref_net_worth"]
    row["sales_diff"] = row["sales"] - row["ref_sales"]
    for i, name in enumerate(DECISIONS):
        row[f"{name}_differs"] = per_day(gaps[..., i])
    row["days_differ"] = ((gaps.sum(-1) > 0) & alive).sum(1) / open_days
    return pd.DataFrame(row)


SUMMARY_COLUMNS = ("net_worth_diff", "sales_diff", "price_differs", "shelf_differs", "order_differs")


def summarize(table: pd.DataFrame, by: str | None = "start_day", seed: int = 0) -> pd.DataFrame:
    """Per group of ``by`` (default: the start day; None: all slices) and metric: n, mean, 95 % bootstrap
    interval of the mean (ci_low, ci_high), median, IQM, min, and for the differences the share of slices
    where the policy beat the reference (``won``: diff > 0) and tied (``tied``); plus the survival of both.
    """
    groups = [("all", table)] if by is None else list(table.groupby(by, sort=True))
    rows = []
    for key, part in groups:
        for metric in SUMMARY_COLUMNS:
            d = stats.describe(part[metric], seed=seed)
            x = part[metric].to_numpy(np.float64)
            row = {"group": key, "metric": metric, **{k: d[k] for k in _STATS}}
            if metric.endswith("_diff"):
                row["won"], row["tied"] = float(np.mean(x > 0)), float(np.mean(x == 0))
            rows.append(row)
        rows.append(
            {"group": key, "metric": "survived", "n": len(part), "mean": float(part["survived"].mean())}
        )
        rows.append(
            {
                "group": key,
                "metric": "ref_survived",
                "n": len(part),
                "mean": float(part["ref_survived"].mean()),
            }
        )
    out = pd.DataFrame(rows).set_index(["group", "metric"])
    out.attrs.update(broken=broken_slices(table), slices=len(table))
    return out


def broken_slices(table: pd.DataFrame) -> list[tuple[int, int]]:
    """(store, start_day) of the slices whose net worth (the policy's or the reference's) is not finite: books
    that broke, never a result (``format_summary`` prints them as a failure)."""
    if not {"store", "start_day", "net_worth", "ref_net_worth"} <= set(table):  # a table of diffs only
        return []
    bad = ~np.isfinite(table[["net_worth", "ref_net_worth"]].to_numpy(np.float64)).all(1)
    return [(int(s), int(d)) for s, d in zip(table["store"][bad], table["start_day"][bad])]


_STATS = ("n", "mean", "ci_low", "ci_high", "median", "iqm", "min")


def format_summary(summary: pd.DataFrame, policy: str, reference: str, days: int) -> str:
    """A text table of ``summarize``'s result: one block per group."""
    lines = [
        f"{policy} against {reference} on {days}-day slices, same state and same random numbers per slice "
        f"(diff = {policy} - {reference}; 95 % CI: bootstrap of the mean)"
    ]
    head = (
        f"  {'metric':16s} {'n':>6s} {'mean':>11s} {'95 % CI':>24s} {'median':>10s} {'IQM':>10s} {'min':>11s}"
    )
    for group, part in summary.groupby(level=0, sort=False):
        lines.append(f"start day {group}:" if group != "all" else "all slices:")
        lines.append(head + f" {'won':>6s}")
        for (_, metric), r in part.iterrows():
            if metric.endswith("survived"):
                continue
            fmt = "{:,.0f}" if metric.endswith("_diff") else "{:.2f}"
            f = lambda v: fmt.format(v) if np.isfinite(v) else "n/a"
            ci = f"[{f(r['ci_low'])}, {f(r['ci_high'])}]"
            won = f"{r['won']:.0%}" if metric.endswith("_diff") else ""
            lines.append(
                f"  {metric:16s} {int(r['n']):6d} {f(r['mean']):>11s} {ci:>24s} {f(r['median']):>10s} "
                f"{f(r['iqm']):>10s} {f(r['min']):>11s} {won:>6s}"
            )
        surv, ref = (
            part.xs("survived", level=1)["mean"].iloc[0],
            part.xs("ref_survived", level=1)["mean"].iloc[0],
        )
        lines.append(f"  survived the slice: {policy} {surv:.1%}, {reference} {ref:.1%}")
    lines.append("price/shelf/order_differs: products a day whose decision differed from the reference's")
    broken = summary.attrs.get("broken")
    if broken:
        shown = ", ".join(f"store {s} from day {d}" for s, d in broken[:4]) + (
            ", ..." if len(broken) > 4 else ""
        )
        lines.append(
            f"FAILED: {len(broken):,} of {summary.attrs.get('slices', 0):,} slices ended with a non-finite net "
            f"worth ({shown}): their books broke, they are left out of every figure above"
        )
    return "\n".join(lines)


def plot(
    table: pd.DataFrame,
    policy: str = "policy",
    reference: str = "reference",
    days: int | None = None,
    seed: int = 0,
):
    """Two panels over the start days: the net-worth difference of every slice (dots) with its mean and 95 %
    bootstrap interval, and the share of slices the policy won. Returns the matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    days = sorted(table["start_day"].unique())
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [2, 1]})
    rng = np.random.default_rng(seed)
    for i, d in enumerate(days):
        x = table.loc[table["start_day"] == d, "net_worth_diff"].to_numpy(np.float64)
        left.scatter(i + rng.uniform(-0.25, 0.25, len(x)), x, s=8, alpha=0.5, color="tab:blue", lw=0)
        low, high = stats.bootstrap_ci(x, seed=seed)
        left.errorbar(
            i, x.mean(), yerr=[[x.mean() - low], [high - x.mean()]], fmt="o", color="black", capsize=6
        )
    left.axhline(0, color="grey", lw=0.8)
    left.set_xticks(range(len(days)), [f"day {d}\n({(table['start_day'] == d).sum()} slices)" for d in days])
    left.set_ylabel(f"net worth: {policy} - {reference}")
    left.set_title("paired difference per slice (mean, 95 % CI)")
    won = [float((table.loc[table["start_day"] == d, "net_worth_diff"] > 0).mean()) for d in days]
    right.bar(range(len(days)), won, color="tab:green")
    right.set_xticks(range(len(days)), [f"day {d}" for d in days])
    right.set_ylim(0, 1)
    right.set_ylabel(f"share of slices {policy} won")
    right.set_title(f"{days}-day slices" if days else "slices")
    fig.tight_layout()
    return fig

"""Matplotlib figures for sweeps and trajectories (``matplotlib.figure.Figure``: no pyplot state, headless)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _figure(ncols: int = 1, width: float = 5.5, height: float = 4.0):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    return fig, fig.subplots(1, ncols, squeeze=False)[0]


def plot_sweep(summary: pd.DataFrame, metric: str, x: str, y: str | None = None):
    """Mean ± sd of ``metric`` against parameter ``x`` (one line per value of the other parameters), or with
    ``y`` a heat map of the mean over (x, y), one panel per value of the remaining parameters.

    summary: ``SweepResult.summary`` (index: parameter values; columns: (metric, statistic)).
    """
    if metric not in summary.columns.get_level_values(0):
        raise ValueError(
            f"unknown metric {metric!r}; the summary has {sorted(set(summary.columns.get_level_values(0)))}"
        )
    df = summary[metric].reset_index()
    names = [n for n in summary.index.names if n is not None]
    for name in (x, y):
        if name is not None and name not in names:
            raise ValueError(f"{name!r} is not a swept parameter; swept: {names}")
    others = [n for n in names if n not in (x, y)]
    groups = list(df.groupby(others)) if others else [((), df)]
    label = lambda key: ", ".join(f"{n}={v}" for n, v in zip(others, np.atleast_1d(key)))
    if y is None:
        fig, (ax,) = _figure()
        for key, g in groups:
            g = g.sort_values(x)
            ax.errorbar(g[x], g["mean"], yerr=g["sd"], marker="o", capsize=3, label=label(key) or None)
        ax.set_xlabel(x)
        ax.set_ylabel(f"{metric} (mean ± sd over seeds)")
        if others:
            ax.legend(fontsize="small")
        return fig
    fig, axes = _figure(len(groups), width=4.5)
    lo, hi = df["mean"].min(), df["mean"].max()
    for ax, (key, g) in zip(axes, groups):
        table = g.pivot(index=y, columns=x, values="mean").sort_index(ascending=False)
        im = ax.imshow(table.to_numpy(), cmap="viridis", vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(range(table.shape[1]), [str(v) for v in table.columns])
        ax.set_yticks(range(table.shape[0]), [str(v) for v in table.index])
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.set_title(label(key) or metric, fontsize="small")
        for (i, j), v in np.ndenumerate(table.to_numpy()):
            ax.text(
                j,
                i,
                f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}",
                ha="center",
                va="center",
                color="k" if hi > lo and (v - lo) / (hi - lo) > 0.6 else "w",
                fontsize="x-small",
            )
    fig.colorbar(im, ax=list(axes), label=f"{metric} (mean over seeds)")
    return fig


def plot_net_worth(paths: np.ndarray, reference: np.ndarray | None = None, label: str = "rbjax"):
    """Mean, ±1 sd band and 5-95 % band of net-worth paths [B, days + 1], beside a reference path."""
    fig, (ax,) = _figure(width=7.0)
    days = np.arange(paths.shape[1])
    mean, sd = paths.mean(0), paths.std(0)
    ax.fill_between(days, *np.percentile(paths, [5, 95], axis=0), alpha=0.15, label=f"{label} 5-95 %")
    ax.fill_between(days, mean - sd, mean + sd, alpha=0.3, label=f"{label} mean ± sd")
    ax.plot(days, mean, lw=2, label=f"{label} mean ({len(paths):,} stores)")
    if reference is not None:
        ax.plot(np.arange(len(reference)), reference, "k--", lw=1.5, label="paper (one run)")
    ax.set_xlabel("day")
    ax.set_ylabel("net worth")
    ax.legend()
    return fig


def plot_learning_curve(curve: pd.DataFrame):
    """PPO learning curve: mean final net worth and survival of the episodes ending in each update, and the
    policy entropy, against store-days of experience.

    curve: ``TrainResult.curve`` or curve.csv, one row per update. Net worth and survival are drawn only where
    an episode ended and their value is known (NaN: none yet, ``rl.train.learning_curve``); a dashed line marks
    where a run continued from a checkpoint (a ``stage`` column, ``rbjax train ppo --init``).
    """
    fig, axes = _figure(ncols=2, width=10.0)
    x = curve["store_days"]
    ended = curve["episodes"] > 0
    known = lambda column: np.where(ended, curve[column], np.nan)
    axes[0].plot(x, known("episode_net_worth"), marker=".", lw=1, label="final net worth (left axis)")
    axes[0].set_ylabel("final net worth of ended episodes")
    ax2 = axes[0].twinx()
    ax2.plot(x, known("survival"), color="C1", lw=1, alpha=0.7, label="share surviving (right axis)")
    ax2.set_ylabel("share of ended episodes surviving all days", color="C1")
    axes[1].plot(x, curve["entropy"], color="C2", label="entropy")
    axes[1].set_ylabel("entropy per product")
    starts = x[curve["stage"].diff().fillna(0) != 0] if "stage" in curve else []
    for ax in axes:
        ax.set_xlabel("store-days")
        for i, start in enumerate(starts):
            ax.axvline(start, color="grey", ls="--", lw=1, label=None if i else "continued from a checkpoint")
    handles = [h for ax in (axes[0], ax2) for h in ax.get_legend_handles_labels()[0]]
    ax2.legend(handles=handles, fontsize="small")
    axes[1].legend(fontsize="small")
    return fig


def plot_finetune_curve(curve: pd.DataFrame, start: float | None = None):
    """A fine-tune's curve (``rbjax.rl.finetune``): the greedy policy's mean final net worth on the validation
    stores and the sampled episodes' against store-days, and the KL to the start with its weight.

    curve: ``finetune``'s curve or its curve.csv; start: a reference line (the student's own evaluation, the
    first row's when None). A dotted line marks where the critic's warm-up ends and the actor starts."""
    fig, axes = _figure(ncols=2, width=10.0)
    x = curve["store_days"]
    known = curve["eval_net_worth"].notna()
    axes[0].plot(
        x[known], curve["eval_net_worth"][known], marker="o", lw=1.5, label="greedy, validation stores"
    )
    axes[0].plot(x, curve["episode_net_worth"], lw=1, alpha=0.6, label="sampled, training episodes")
    start = curve["eval_net_worth"].iloc[0] if start is None else start
    axes[0].axhline(start, color="grey", ls="--", lw=1, label="the start (the student)")
    axes[0].set_ylabel("mean final net worth")
    axes[1].plot(x, curve["kl_to_start"], color="C2", label="KL(start || now)")
    ax2 = axes[1].twinx()
    ax2.plot(x, curve["kl_coef"], color="C3", lw=1, alpha=0.7, label="its weight (right axis)")
    on = curve.index[curve["actor_on"].fillna(False).astype(bool)]
    for ax in axes:
        ax.set_xlabel("store-days")
        if len(on):
            ax.axvline(x[on[0]], color="black", ls=":", lw=1, label="the actor starts")
    axes[0].legend(fontsize="small")
    handles = [h for ax in (axes[1], ax2) for h in ax.get_legend_handles_labels()[0]]
    ax2.legend(handles=handles, fontsize="small")
    return fig


def plot_survival(
    curves: dict[str, np.ndarray], stores: dict[str, int] | None = None, title: str | None = None
):
    """Share of stores alive by day, one line per label (a step: a store stops at the end of a day).

    curves: {label: ``stats.survival_curve`` [days + 1]} or {label: alive [stores, days]} (``DaySummary.alive``;
    its curve is taken and its store count known). stores: {label: store count} for the legend of a curve
    given as shares (an alive array's count is its own).
    """
    from rbjax.results.stats import survival_curve

    if not curves:
        raise ValueError("plot_survival needs at least one curve")
    stores = dict(stores or {})
    fig, (ax,) = _figure(width=7.0)
    for label, values in curves.items():
        values = np.asarray(values)
        if values.ndim == 2:
            stores.setdefault(label, values.shape[0])
            values = survival_curve(values)
        if values.ndim != 1 or not len(values):
            raise ValueError(f"{label}: expected a survival curve [days + 1] or alive [stores, days]")
        n = stores.get(label)
        name = f"{label} ({n:,} stores)" if n is not None else label
        ax.step(np.arange(len(values)), values, where="post", lw=2, label=name)
    ax.set_xlabel("day")
    ax.set_ylabel("share of stores alive")
    ax.set_ylim(0, 1.02)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize="small")
    ax.legend(loc="lower left")
    return fig

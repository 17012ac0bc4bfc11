"""``rbjax info``, ``rbjax oracle``, ``rbjax run`` and ``rbjax eval``: a policy on a batch of stores."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import time

from rbjax.cli.common import fail, make_env, make_policy, said


def info(args) -> None:
    from rbjax.data import CatalogError, load_catalog

    try:
        print(load_catalog(args.data))
    except (CatalogError, OSError, ValueError) as e:
        raise fail(f"--data {args.data}: {said(e)}") from None


def main(args) -> None:
    """Roll out --stores stores for --days days, chunk by chunk, and print the main table beside the paper's
    row. Memory stays bounded whatever --stores: each chunk is reduced to per-store metrics (and, with
    --records, streamed to disk) before the next one runs."""
    import jax
    import numpy as np
    import pandas as pd

    from rbjax.files.record_files import RecordsWriter
    from rbjax.results import metrics
    from rbjax.runners.rollout import rollout_chunks

    env, params = make_env(args)
    if getattr(args, "from_states", None):
        from rbjax.cli.slices import main_from_states

        return main_from_states(args, env)
    if getattr(args, "save_states", None):
        from rbjax.cli.slices import check_save_states

        check_save_states(args, env)
    policy, policy_params = make_policy(args, env)
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    records = "full" if args.records else "summary"
    path = os.path.join(args.out, "records.npz") if args.records and args.out else None
    if args.out:
        clear_outputs(args.out, outputs(args, path))
    tables, paths, opening, running = [], [], 0.0, 0.0
    start = time.perf_counter()
    # the writer's scratch files go, whatever happens; the file exists only once every store is in it
    with RecordsWriter(path, args.stores) if path else contextlib.nullcontext() as writer:
        for chunk in _chunks(args, env, params, policy, policy_params, keys, records) or rollout_chunks(
            env,
            policy,
            policy_params,
            params,
            keys,
            days=args.days,
            progress=args.progress,
            records=records,
            store_chunk=args.store_chunk,
            to_host=True,
        ):
            opening, running = opening + chunk.opening_seconds, running + chunk.days_seconds
            tables.append(metrics.store_metrics(chunk.records))
            paths.append(
                metrics.net_worth_paths(chunk.records, float(params.initial_funds)).astype(np.float32)
            )
            if writer:
                writer.write(chunk.start, chunk.records)
    elapsed = time.perf_counter() - start
    print(
        f"{args.policy} policy, {args.stores} stores x {args.days} days, categories {env.config.grouping}: "
        + run_times(elapsed, opening, running, args.stores * args.days)
    )
    report(args, pd.concat(tables, ignore_index=True), np.concatenate(paths))


def run_times(elapsed: float, opening: float, days: float, store_days: int) -> str:
    """The run's header times: the days' rate apart from the opening (the reset and compiling: a first run
    compiles, a later one loads the programs from the cache) and the wall time in all. A run of chunks
    without their times (``opening`` and ``days`` 0) gives the wall time's rate."""
    if days <= 0:
        return (
            f"{elapsed:.1f} s in all, {store_days / elapsed:,.0f} store-days/s with the compiling, the opening and "
            "the snapshots included"
        )
    return (
        f"{store_days / days:,.0f} store-days/s over the days ({days:.1f} s), {opening:.1f} s opening the stores "
        f"(compiling the programs, or loading them from the cache), {elapsed:.1f} s in all"
    )


def _chunks(args, env, params, policy, policy_params, keys, records):
    """With --save-states: the whole run as one chunk, run in segments with a snapshot after each; else None."""
    if not getattr(args, "save_states", None):
        return None
    from rbjax.cli.slices import run_saving_states
    from rbjax.runners.rollout import Chunk

    rec = run_saving_states(args, env, params, policy, policy_params, keys, records)
    return [Chunk(0, args.stores, rec, None)]


def outputs(args, records: str | None) -> list[str]:
    """The files a run of ``args`` writes into --out."""
    files = [
        os.path.join(args.out, f"{args.policy}_stores.csv"),
        os.path.join(args.out, f"{args.policy}_survival.png"),
        records,
    ]
    if args.policy == "oracle":
        files.append(os.path.join(args.out, "oracle_net_worth.png"))
    return [f for f in files if f]


def clear_outputs(out: str, files: list[str]) -> None:
    """Remove the previous run's ``files`` (and the scratch folders of a killed ``RecordsWriter``) before a
    run starts, so a run killed part-way leaves none of its outputs rather than the old ones looking new."""
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(f)
    for scratch in glob.glob(os.path.join(out, ".records-*")):
        shutil.rmtree(scratch, ignore_errors=True)


def write_survival(path: str, curves: dict, title: str | None = None) -> None:
    """The survival figure (``plots.plot_survival``: share of stores alive by day, one line per entry of
    ``curves``, {label: alive [stores, days]}) as a png at ``path``, written atomically."""
    from rbjax.files.record_files import atomic_file
    from rbjax.results.plots import plot_survival

    fig = plot_survival(curves, title=title)
    with atomic_file(path, "wb") as f:
        fig.savefig(f, dpi=120, format="png")


def report(args, table, net_worth_paths, alive=None, survival_png: str | None = None) -> None:
    """The main table beside the paper's row and the share of stores alive at the end; with --out the
    per-store CSV, the survival figure (and the oracle's plot); a non-zero exit when a store's results are
    not finite.

    table: ``metrics.store_metrics`` [stores rows]; net_worth_paths: [stores, days + 1]; alive: [stores, days]
    (default: from the table's survival_days, a stopped store staying stopped); survival_png: the figure's
    file name in --out (default ``{policy}_survival.png``).
    """
    from rbjax.results import metrics, paper

    label, reference = paper.reference_row(f"policy:{args.policy}", "policy")
    print(metrics.format_compare(metrics.compare(table, reference, label=label, days=args.days)))
    if alive is None:
        alive = metrics.alive_by_day(table["survival_days"], net_worth_paths.shape[1] - 1)
    print(metrics.format_survival(alive))
    if args.out:
        from rbjax.files.record_files import atomic_file

        with atomic_file(os.path.join(args.out, f"{args.policy}_stores.csv")) as f:
            table.to_csv(f, index_label="store")
        write_survival(
            os.path.join(args.out, survival_png or f"{args.policy}_survival.png"), {args.policy: alive}
        )
        if args.policy == "oracle":
            from rbjax.results.plots import plot_net_worth

            fig = plot_net_worth(net_worth_paths, paper.ORACLE_NET_WORTH)
            with atomic_file(os.path.join(args.out, "oracle_net_worth.png"), "wb") as f:
                fig.savefig(f, dpi=120, format="png")
        print(f"wrote {args.out}")
    bad = metrics.non_finite_stores(table)
    if len(bad):
        raise fail(
            f"{len(bad)} of {args.stores} stores ended with a non-finite net worth or count "
            f"(stores {bad[:8].tolist()}): the results above are not valid"
        )

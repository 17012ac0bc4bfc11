"""Task slices on the command line: ``rbjax run ... --save-states DIR --every D`` writes snapshots along a
run; ``rbjax run ... --from-states DIR --days N`` continues every store of them for N days beside a reference
policy (the oracle by default) from the same state with the same keys, and reports the paired differences.

A slices folder holds ``day_{D:03d}.npz`` (``rbjax.files.snapshots``: every store after D days, with the
run's params) and ``slices.json`` (the run that made them): ``rbjax.files.slices_folder`` reads and writes it.
"""

from __future__ import annotations

import os

from rbjax.cli.common import check_snapshot_flags, fail, plan_settings, plural, said
from rbjax.files.slices_folder import slice_files, snapshot_name, write_manifest
from rbjax.policies.registry import PLANNING


def check_save_states(args, env) -> None:
    """Before any work: --every is valid, the folder is writable, and every store's state fits in half the
    host's available memory (--save-states holds the whole batch between segments)."""
    from rbjax.runners.memory import FREE_SHARE, host_available_bytes, store_bytes

    check_snapshot_flags(args.save_states, args.every, args.days)
    need = args.stores * store_bytes(env) * 2
    if need > FREE_SHARE * host_available_bytes():
        raise fail(
            f"--save-states keeps every store's state between segments: {args.stores:,} stores need about "
            f"{need / 1e9:.1f} GB, more than half this host's available memory; use fewer --stores"
        )


def run_saving_states(args, env, params, policy, policy_params, keys, records: str):
    """The run in segments of --every days, a snapshot after each but the last. Returns the records of all
    days ([stores, days], host arrays), which are the uninterrupted run's bit for bit."""
    import jax
    import numpy as np

    from rbjax.files import snapshots
    from rbjax.runners.rollout import rollout

    state, day, parts, files = None, 0, [], {}
    while day < args.days:
        length = min(args.every, args.days - day)
        rec, state = jax.device_get(
            rollout(
                env,
                policy,
                policy_params,
                params,
                keys,
                length,
                records=records,
                progress=args.progress,
                store_chunk=args.store_chunk,
                state=state,
                first_day=day,
            )
        )
        parts.append(rec)
        day += length
        if day < args.days:
            name = snapshot_name(day)
            snapshots.save(os.path.join(args.save_states, name), env, state, keys, day, params=params)
            files[day] = name
    write_manifest(
        args.save_states,
        policy=args.policy,
        checkpoint=getattr(args, "checkpoint", None),
        greedy=getattr(args, "greedy", False),
        plan=plan_settings(args).as_dict() if args.policy in PLANNING else None,
        seed=args.seed,
        stores=args.stores,
        days=args.days,
        every=args.every,
        grouping=args.grouping,
        supplier_attempts=args.supplier_attempts,
        data=args.data,
        files=files,
    )
    print(f"wrote {plural(len(files), 'snapshot')} (days {', '.join(map(str, files))}) in {args.save_states}")
    return jax.tree.map(lambda *x: np.concatenate(x, axis=1), *parts)


def main_from_states(args, env) -> None:
    """Every slice of --from-states for --days days, policy and reference; prints the paired summary and,
    with --out, writes slices.csv and paired.png."""
    import pandas as pd

    from rbjax import policies
    from rbjax.cli.common import make_policy
    from rbjax.files import snapshots
    from rbjax.files.record_files import atomic_file
    from rbjax.runners import paired

    try:
        files = slice_files(args.from_states, args.at)
    except ValueError as e:
        raise fail(e) from None
    policy, policy_params = make_policy(args, env)
    try:
        plan = plan_settings(args) if args.reference in PLANNING else None
        reference, reference_params = policies.make(args.reference, env, greedy=True, plan=plan)
    except ValueError as e:
        shipped = (
            ""
            if not policies.registry.needs_checkpoint(args.reference)
            else " (a reference plays a shipped one)"
        )
        raise fail(f"--reference {args.reference}: {said(e)}{shipped}") from None
    tables = []
    for day, path in files:
        try:
            snap = snapshots.load(path, env)
            tables.append(
                paired.compare(
                    env,
                    policy,
                    policy_params,
                    reference,
                    reference_params,
                    snap,
                    args.days,
                    store_chunk=args.store_chunk or 1024,
                )
            )
        except ValueError as e:
            raise fail(e) from None
        print(f"day {day}: {len(tables[-1])} slices ({tables[-1].attrs['dropped']} stores closed before it)")
    table = pd.concat(tables, ignore_index=True)
    summary = paired.summarize(table)
    if len(files) > 1:
        summary = pd.concat([summary, paired.summarize(table, by=None)])
    broken = paired.broken_slices(table)
    summary.attrs.update(broken=broken, slices=len(table))
    print(paired.format_summary(summary, args.policy, args.reference, args.days))
    if args.out:
        with atomic_file(os.path.join(args.out, "slices.csv")) as f:
            table.to_csv(f, index=False)
        with atomic_file(os.path.join(args.out, "paired.png"), "wb") as f:
            paired.plot(table, args.policy, args.reference, args.days).savefig(f, dpi=110, format="png")
        print(f"wrote slices.csv and paired.png in {args.out}")
    if broken:
        raise fail(f"{len(broken)} slices ended with a non-finite net worth: the results above are not valid")

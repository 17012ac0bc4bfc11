"""Task slices on the command line: ``rbjax run ... --save-states DIR --every D`` writes snapshots along a
run; ``rbjax run ... --from-states DIR --days N`` continues every store of them for N days beside a reference
policy (the oracle by default) from the same state with the same keys, and reports the paired differences.

A slices folder holds ``day_{D:03d}.npz`` (``rbjax.runners.snapshots``: every store after D days, with the
run's params) and ``slices.json`` (the run that made them: policy, checkpoint, seed, stores, days, every,
grouping, supplier attempts, and the files by day).
"""

from __future__ import annotations

import json
import os
import re

from rbjax.cli.common import fail

SLICES = "slices.json"


def snapshot_name(day: int) -> str:
    return f"day_{day:03d}.npz"


def check_save_states(args, env) -> None:
    """Before any work: --every is valid, the folder is writable, and every store's state fits in half the
    host's available memory (--save-states holds the whole batch between segments)."""
    from rbjax.runners.rollout import FREE_SHARE, host_available_bytes, store_bytes

    if args.every < 1 or args.every >= args.days:
        raise fail(f"--every must be between 1 and --days - 1 ({args.days - 1}), got {args.every}")
    try:
        os.makedirs(args.save_states, exist_ok=True)
    except OSError as e:
        raise fail(f"--save-states {args.save_states}: not a writable folder ({e.strerror or e})") from None
    if not os.access(args.save_states, os.W_OK):
        raise fail(f"--save-states {args.save_states}: not a writable folder")
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

    from rbjax.runners import snapshots
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
    manifest = {
        "policy": args.policy,
        "checkpoint": os.path.abspath(args.checkpoint) if getattr(args, "checkpoint", None) else None,
        "greedy": bool(getattr(args, "greedy", False)),
        "seed": args.seed,
        "stores": args.stores,
        "days": args.days,
        "every": args.every,
        "grouping": args.grouping,
        "supplier_attempts": args.supplier_attempts,
        "data": args.data,
        "files": {str(d): f for d, f in files.items()},
    }
    from rbjax.runners.record_files import atomic_file

    with atomic_file(os.path.join(args.save_states, SLICES)) as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {len(files)} snapshots (days {', '.join(map(str, files))}) in {args.save_states}")
    return jax.tree.map(lambda *x: np.concatenate(x, axis=1), *parts)


def read_manifest(folder: str) -> dict:
    """``slices.json`` of a slices folder (read from anyone: data, every field the agents read checked);
    ValueError (one line) naming the file and the field."""
    from rbjax.policies import NAMES
    from rbjax.runners.untrusted import DAYS_MAX, MAX_STORES, bad, is_int, read_json

    path = os.path.join(folder, SLICES)
    manifest = read_json(path, "slices manifest")
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: not a readable slices manifest (not a JSON object)")
    required = ("policy", "grouping", "supplier_attempts", "seed")
    checks = {
        "policy": (lambda v: v in NAMES, f"a policy name ({', '.join(NAMES)})"),
        "grouping": (lambda v: v in ("20", "ref19"), "'20' or 'ref19'"),
        "supplier_attempts": (lambda v: is_int(v) and 1 <= v <= 10_000, "an int in 1..10,000"),
        "seed": (lambda v: is_int(v) and 0 <= v < 2**32, "an int in 0..2**32 - 1"),
        "checkpoint": (lambda v: v is None or isinstance(v, str), "a path or null"),
        "greedy": (lambda v: isinstance(v, bool), "true or false"),
        "stores": (lambda v: is_int(v) and 1 <= v <= MAX_STORES, f"an int in 1..{MAX_STORES:,}"),
        "days": (lambda v: is_int(v) and 1 <= v <= DAYS_MAX, f"an int in 1..{DAYS_MAX:,}"),
        "every": (lambda v: is_int(v) and 1 <= v <= DAYS_MAX, f"an int in 1..{DAYS_MAX:,}"),
        "data": (lambda v: v is None or isinstance(v, str), "a path or null"),
        "files": (lambda v: isinstance(v, dict), "a JSON object"),
    }
    for name, (ok, want) in checks.items():
        if name in required and name not in manifest:
            raise ValueError(f"{path}: field {name!r} is missing")
        if name in manifest and not ok(manifest[name]):
            raise bad(path, name, want, manifest[name])
    return manifest


def slice_files(folder: str, at: str | None) -> list[tuple[int, str]]:
    """[(day, path)] of the snapshots in ``folder`` (all, or the days of --at), by day; one-line errors."""
    if not os.path.isdir(folder):
        raise fail(f"--from-states {folder}: not a folder")
    found = {}
    for name in os.listdir(folder):
        m = re.fullmatch(r"day_(\d+)\.npz", name)
        if m:
            found[int(m.group(1))] = os.path.join(folder, name)
    if not found:
        raise fail(f"--from-states {folder}: no snapshots (day_DDD.npz, written by --save-states)")
    if at:
        try:
            days = [int(x) for x in at.split(",") if x.strip()]
        except ValueError:
            raise fail(f"--at {at}: expected comma-separated days") from None
        missing = [d for d in days if d not in found]
        if missing:
            raise fail(
                f"--at: no snapshot of day {missing[0]} in {folder} (it has days {', '.join(map(str, sorted(found)))})"
            )
        found = {d: found[d] for d in days}
    return sorted(found.items())


def main_from_states(args, env) -> None:
    """Every slice of --from-states for --days days, policy and reference; prints the paired summary and,
    with --out, writes slices.csv and paired.png."""
    import pandas as pd

    from rbjax import policies
    from rbjax.cli.common import make_policy
    from rbjax.runners import paired, snapshots
    from rbjax.runners.record_files import atomic_file

    files = slice_files(args.from_states, args.at)
    policy, policy_params = make_policy(args, env)
    try:
        reference, reference_params = policies.make(args.reference, env)
    except ValueError as e:
        raise fail(f"--reference {args.reference}: {e}") from None
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
            raise fail(str(e)) from None
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

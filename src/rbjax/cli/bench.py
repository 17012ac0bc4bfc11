"""``rbjax bench``: the throughput profiler (``rbjax.perf.bench``)."""

from __future__ import annotations

from pathlib import Path

from rbjax.config import EPISODE_DAYS


def check_batches(text: str, error) -> None:
    """``--batches``: comma-separated whole numbers >= 1 (``error(message)`` otherwise)."""
    try:
        batches = [int(b) for b in text.split(",")]
    except ValueError:
        return error(f"--batches needs comma-separated whole numbers, got {text!r}")
    if any(b < 1 for b in batches):
        error(f"--batches must all be >= 1, got {text}")


def main(args) -> None:
    import jax

    from rbjax.perf import bench as profiler

    if args.profile:
        return profile(args)
    if args.program:
        return program(args)
    n = len(jax.devices())
    if args.quick:
        return quick(args, n)
    policies, batches = list(profiler.POLICIES), [int(b) for b in args.batches.split(",")]
    days, counts, substep_batch, drift = args.days, sorted({1, n}), 1024, (16, EPISODE_DAYS)
    print(profiler.run(policies, batches, days, counts, substep_batch, drift, Path(args.out)))
    print(f"wrote {args.out}/bench.md, bench.csv, substeps.csv, bench.png")


def quick(args, n: int) -> None:
    """``rbjax bench --quick``: the oracle on every device at the README machines' size (or ``--stores``), its
    first call and day rate, set beside the README's machines (``rbjax.perf.reference.compare``)."""
    from rbjax.perf import bench as profiler
    from rbjax.perf import reference

    stores = args.stores or reference.QUICK_STORES
    print(profiler.quick(stores, reference.QUICK_DAYS, n, Path(args.out)))
    print(f"wrote {args.out}/bench.md, bench.csv")


DEFAULT_STORES = 1024  # --profile, --program without --stores
PROFILE_DAYS_BEFORE, PROFILE_REPEATS = 20, 5  # the day profiled: the oracle's state after 20 days


def profile(args) -> None:
    """``rbjax bench --profile``: the op-level profile of one oracle day (``rbjax.perf.op_profile``)."""
    from rbjax.env import Env
    from rbjax.perf import op_profile

    out = Path(args.out)
    env = Env()
    stores = args.stores or DEFAULT_STORES
    table = op_profile.profile_day(
        env, env.default_params(), stores, PROFILE_DAYS_BEFORE, PROFILE_REPEATS, out
    )
    print(op_profile.write(table, out, stores, PROFILE_DAYS_BEFORE))
    print(f"wrote {out}/profile.md, profile.csv and the trace {out}/trace")


def program(args) -> None:
    """``rbjax bench --program``: the size of the reset, the day and the oracle's action, and the seconds
    tracing, lowering and compiling each take (``rbjax.perf.program``; program.md, program.csv)."""
    from rbjax.perf import program as programs

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stores = args.stores or DEFAULT_STORES
    table = programs.program_table(stores=stores)
    text = programs.format_table(table, stores)
    table.to_csv(out / "program.csv", index=False)
    (out / "program.md").write_text(text + "\n")
    print(text)
    print(f"wrote {out}/program.md, program.csv")

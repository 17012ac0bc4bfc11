"""``rbjax lm``: language models learn on rbjax. ``tasks`` writes a tasks file from a slices folder; ``serve``
serves sessions on such tasks to trainers and evaluators (``rbjax.cli.lm_serve``); ``demos``, ``corrections``
and ``replay`` make and check a teacher's rows for supervised fine-tuning (``rbjax.cli.lm_demos``)."""

from __future__ import annotations

import os
import sys

from rbjax.cli.common import check_writable_file, command, day_list, fail, plural, said
from rbjax.cli.lm_demos import add_demos_commands
from rbjax.cli.lm_serve import add_serve_arguments
from rbjax.lm.tasks import DEFAULT_TAIL


def add(sub) -> None:
    """``rbjax lm`` and its subcommands."""
    p = sub.add_parser("lm", help="tasks and sessions for training and evaluating language models")
    cmd = p.add_subparsers(dest="lm_command", required=True)
    doc = "lm tasks: one row per (snapshot, store, start day, horizon), with the reference's gain"
    t = command(cmd, "tasks", help=doc, description=doc)
    t.add_argument(
        "--from-states",
        nargs="+",
        required=True,
        metavar="DIR",
        help="slices folders (rbjax run|agents run ... --save-states DIR), one or more: their tasks together",
    )
    t.add_argument("--at", default=None, help="snapshot days, comma-separated (default: every one)")
    t.add_argument(
        "--days",
        dest="horizons",
        required=True,
        help="days each task plays; several horizons comma-separated",
    )
    t.add_argument(
        "--stores", type=int, default=None, help="the first N stores of each snapshot (default: all)"
    )
    t.add_argument("--reference", default="oracle", help="the policy each task's reward is measured against")
    t.add_argument(
        "--tail",
        type=int,
        default=None,
        help="days the reference plays on after each task's days, counted in the reward "
        f"(default: {DEFAULT_TAIL}; 0: the task's days alone; see docs/lm_training.md)",
    )
    t.add_argument(
        "--no-panel",
        action="store_true",
        help="skip the headroom panel (the reference, doing nothing, ... played on every task: rbjax.lm.panel)",
    )
    t.add_argument(
        "--min-headroom",
        type=float,
        default=None,
        help="keep the tasks where the reference beats doing nothing by at least this relative reward "
        "(default: keep all; docs/lm_training.md's example keeps 0.1)",
    )
    t.add_argument("--out", dest="tasks_out", required=True, help="the tasks file written (JSON Lines)")
    t.set_defaults(func=tasks)
    doc = "lm serve: sessions on a tasks file for trainers and evaluators, on 127.0.0.1"
    s = command(cmd, "serve", help=doc, description=doc)
    add_serve_arguments(s)
    s.set_defaults(func=serve)
    add_demos_commands(cmd)


def serve(args) -> None:
    """``rbjax lm serve`` (``rbjax.cli.lm_serve``)."""
    from rbjax.cli.lm_serve import serve_command

    serve_command(args)


def tasks(args) -> None:
    """``rbjax lm tasks``: the tasks file of one or more slices folders, for one or more horizons."""
    import time

    from rbjax import policies
    from rbjax.lm.tasks import make_tasks, with_headroom, write_tasks

    at = day_list(args.at)
    horizons = day_list(args.horizons, "--days", "days such as 7, or horizons such as 3,7")
    if min(horizons) < 1:
        raise fail(f"--days {args.horizons}: expected 1 or more days")
    check_writable_file(args.tasks_out)
    if args.reference not in policies.NAMES:
        raise fail(f"--reference {args.reference}: expected one of {', '.join(policies.NAMES)}")
    tail = DEFAULT_TAIL if args.tail is None else args.tail
    if tail < 0:
        raise fail(f"--tail {tail}: expected 0 or more days")
    if args.min_headroom is not None and args.no_panel:
        raise fail("--min-headroom needs the panel: leave --no-panel out")
    note = lambda line: print(line, file=sys.stderr)  # noqa: E731
    made, start = [], time.perf_counter()
    folders = list({os.path.abspath(f): f for f in reversed(args.from_states)}.values())[::-1]  # each once
    for folder in folders:
        for days in dict.fromkeys(horizons):
            try:
                made += make_tasks(
                    folder,
                    days,
                    at=at,
                    stores=args.stores,
                    reference=args.reference,
                    tail=tail,
                    note=note,
                    panel=not args.no_panel,
                )
            except ValueError as e:
                default = args.tail is None and getattr(e, "arguments", ())[:1] == ("tail",)
                raise fail(
                    said(e) + (f", and --tail is {DEFAULT_TAIL} by default" if default else "")
                ) from None
    seen = {}
    for t in made:
        if t.id in seen and seen[t.id] != t.from_states:
            raise fail(
                f"--from-states: {seen[t.id]} and {t.from_states} give the same task id {t.id} (one policy and "
                "seed): give one of them"
            )
        seen[t.id] = t.from_states
    kept = made
    if args.min_headroom is not None:
        try:
            kept = with_headroom(made, args.min_headroom)
        except ValueError as e:
            raise fail(e) from None
        if not kept:
            raise fail(
                f"--min-headroom {args.min_headroom}: none of the {len(made)} tasks has that much headroom"
            )
    write_tasks(kept, args.tasks_out)
    took = time.perf_counter() - start
    among = f" (of {len(made)}: those with headroom >= {args.min_headroom})" if kept is not made else ""
    print(f"wrote {plural(len(kept), 'task')} to {args.tasks_out} in {took:.0f} s{among}")
    print(summary_table(kept, args.reference, tail))


def summary_table(made, reference: str, tail: int) -> str:
    """Per source policy and horizon: the tasks, the reference's mean gain and, with the panel, the median
    headroom and spread."""
    import pandas as pd

    table = pd.DataFrame(
        {
            "source": [t.source_policy for t in made],
            "days": [t.days for t in made],
            "gain": [t.reference_gain for t in made],
            "headroom": [t.headroom for t in made],
            "spread": [t.spread for t in made],
        }
    )
    then = f" + {tail} days of {reference}" if tail else ""
    lines = [
        f"{'source':<12} {'days':>4} {'tasks':>6} {reference + ' gain':>14} {'headroom':>9} {'spread':>8}"
    ]
    for (source, days), g in table.groupby(["source", "days"]):
        panel = g.headroom.notna().all()
        lines.append(
            f"{source:<12} {days:>4} {len(g):>6} {g.gain.mean():>14,.2f} "
            + (f"{g.headroom.median():>9.3f} {g.spread.median():>8.3f}" if panel else f"{'-':>9} {'-':>8}")
        )
    lines.append(f"(each task: its days{then}; headroom and spread: medians, relative rewards)")
    return "\n".join(lines)

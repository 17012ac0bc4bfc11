"""``rbjax lm``: language models learn on rbjax. ``tasks`` writes a tasks file from a slices folder; ``serve``
serves sessions on such tasks to trainers and evaluators (``rbjax.cli.lm_serve``)."""

from __future__ import annotations

import os
import sys

from rbjax.cli.common import command, fail, said
from rbjax.cli.lm_serve import add_serve_arguments
from rbjax.lm.tasks import DEFAULT_TAIL


def add(sub) -> None:
    """``rbjax lm`` and its subcommands."""
    p = sub.add_parser("lm", help="tasks and sessions for training and evaluating language models")
    cmd = p.add_subparsers(dest="lm_command", required=True)
    doc = "lm tasks: one row per (snapshot, store, start day, horizon), with the reference's gain"
    t = command(cmd, "tasks", help=doc, description=doc)
    t.add_argument("--from-states", required=True, help="a slices folder (rbjax run ... --save-states DIR)")
    t.add_argument("--at", default=None, help="snapshot days, comma-separated (default: every one)")
    t.add_argument("--days", type=int, required=True, help="days each task plays")
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
    t.add_argument("--out", dest="tasks_out", required=True, help="the tasks file written (JSON Lines)")
    t.set_defaults(func=tasks)
    doc = "lm serve: sessions on a tasks file for trainers and evaluators, on 127.0.0.1"
    s = command(cmd, "serve", help=doc, description=doc)
    add_serve_arguments(s)
    s.set_defaults(func=serve)


def serve(args) -> None:
    """``rbjax lm serve`` (``rbjax.cli.lm_serve``)."""
    from rbjax.cli.lm_serve import serve_command

    serve_command(args)


def _days(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        days = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(f"--at {text}: expected snapshot days such as 30,90") from None
    if not days:
        raise fail(f"--at {text}: expected snapshot days such as 30,90")
    return days


def _check_writable(path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK) or os.path.isdir(path):
        raise fail(f"--out {path}: cannot write a file there")


def tasks(args) -> None:
    """``rbjax lm tasks``: the tasks file of a slices folder."""
    from rbjax import policies
    from rbjax.lm.tasks import make_tasks, write_tasks

    at = _days(args.at)
    _check_writable(args.tasks_out)
    if args.reference not in policies.NAMES:
        raise fail(f"--reference {args.reference}: expected one of {', '.join(policies.NAMES)}")
    tail = DEFAULT_TAIL if args.tail is None else args.tail
    if tail < 0:
        raise fail(f"--tail {tail}: expected 0 or more days")
    note = lambda line: print(line, file=sys.stderr)  # noqa: E731
    try:
        made = make_tasks(
            args.from_states,
            args.days,
            at=at,
            stores=args.stores,
            reference=args.reference,
            tail=tail,
            note=note,
        )
    except ValueError as e:
        default = args.tail is None and getattr(e, "arguments", ())[:1] == ("tail",)
        raise fail(said(e) + (f", and --tail is {DEFAULT_TAIL} by default" if default else "")) from None
    write_tasks(made, args.tasks_out)
    gains = [t.reference_gain for t in made]
    days = sorted({t.day for t in made})
    then = f" + {tail} days of {args.reference}" if tail else ""
    print(
        f"wrote {len(made)} tasks (days {','.join(map(str, days))}, {args.days}-day slices{then}; "
        f"{args.reference}'s mean gain {sum(gains) / len(gains):,.2f}) to {args.tasks_out}"
    )

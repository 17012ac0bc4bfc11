"""``rbjax lm``: language models learn on rbjax. ``tasks`` writes a tasks file from a slices folder; ``serve``
serves sessions on such tasks to trainers and evaluators (``rbjax.cli.lm_serve``)."""

from __future__ import annotations

import os
import sys

from rbjax.cli.common import command, fail


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
    t.add_argument("--out", dest="tasks_out", required=True, help="the tasks file written (JSON Lines)")
    t.set_defaults(func=tasks)
    doc = "lm serve: sessions on a tasks file for trainers and evaluators, on 127.0.0.1"
    s = command(cmd, "serve", help=doc, description=doc)
    s.add_argument("--tasks", required=True, help="a tasks file (rbjax lm tasks)")
    s.add_argument("--host", default="127.0.0.1", help="the address listened on")
    s.add_argument("--port", type=int, default=8777, help="the port listened on")
    s.add_argument("--slots", type=int, default=256, help="store slots: sessions open at once")
    s.add_argument(
        "--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed"
    )
    s.add_argument("--face", choices=["json", "openenv"], default="json", help="the protocol served")
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
    note = lambda line: print(line, file=sys.stderr)  # noqa: E731
    try:
        made = make_tasks(
            args.from_states, args.days, at=at, stores=args.stores, reference=args.reference, note=note
        )
    except ValueError as e:
        raise fail(str(e)) from None
    write_tasks(made, args.tasks_out)
    gains = [t.reference_gain for t in made]
    days = sorted({t.day for t in made})
    print(
        f"wrote {len(made)} tasks (days {','.join(map(str, days))}, {args.days}-day slices; {args.reference}'s "
        f"mean gain {sum(gains) / len(gains):,.2f}) to {args.tasks_out}"
    )

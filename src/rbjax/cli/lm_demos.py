"""``rbjax lm demos``, ``lm corrections``, ``lm replay``: a teacher's days through the tools as chat rows a
trainer takes (``rbjax.lm.demos``, ``rbjax.lm.corrections``), and the check that a file replays."""

from __future__ import annotations

import sys
import time

from rbjax.cli.common import check_writable_file, command, day_list, fail, plural, said
from rbjax.lm.conversation import FORMATS
from rbjax.lm.tasks import DEFAULT_TAIL


def add_demos_commands(cmd) -> None:
    """The three subcommands, on ``rbjax lm``'s subparsers ``cmd``."""
    doc = "lm demos: a teacher policy plays each task through the 21 tools; one chat row per task"
    d = command(cmd, "demos", help=doc, description=doc)
    d.add_argument("--tasks", required=True, help="a tasks file (rbjax lm tasks --out)")
    _teacher_arguments(d)
    d.set_defaults(func=demos)
    doc = "lm corrections: what a teacher would have done from the mornings a model's saved run reached"
    c = command(cmd, "corrections", help=doc, description=doc)
    c.add_argument(
        "--from-states", required=True, metavar="DIR", help="the model's run (agents run --save-states)"
    )
    c.add_argument("--at", default=None, help="mornings to correct, comma-separated (default: every one)")
    c.add_argument(
        "--days", type=int, default=None, help="decided days a correction (default: the run's --every)"
    )
    c.add_argument("--stores", type=int, default=None, help="the first N stores (default: all)")
    c.add_argument("--reference", default="oracle", help="the policy the rewards are measured against")
    c.add_argument(
        "--tail", type=int, default=DEFAULT_TAIL, help="days the reference plays on, in the reward"
    )
    _teacher_arguments(c)
    c.set_defaults(func=corrections)
    doc = "lm replay: make a demonstrations file's calls again through sessions; every answer and reward compared"
    r = command(cmd, "replay", help=doc, description=doc)
    r.add_argument(
        "--demos", required=True, metavar="FILE", help="a file of rbjax lm demos or lm corrections"
    )
    r.add_argument("--slots", type=int, default=64, help="stores replayed at once")
    r.set_defaults(func=replay)


def _teacher_arguments(p) -> None:
    p.add_argument("--teacher", default="plan", help="the policy that plays (default: plan, the planner)")
    p.add_argument(
        "--format", dest="form", choices=FORMATS, default="trl", help="trl: SFTTrainer's rows; openai"
    )
    p.add_argument("--slots", type=int, default=64, help="stores played at once")
    p.add_argument(
        "--tokenizer", default=None, help="a Hugging Face tokenizer to count tokens (default: estimate)"
    )
    p.add_argument("--out", dest="demos_out", required=True, help="the rows written (JSON Lines)")


def _note(line: str) -> None:
    print(line, file=sys.stderr)


def _write(rows, args, start: float) -> None:
    from statistics import mean

    from rbjax.lm.demos import write_rows

    write_rows(rows, args.demos_out)
    calls = [c for r in rows for c in r["calls_per_day"]]
    said_tokens = [c for r in rows for c in r["call_tokens_per_day"]]
    read_tokens = [c for r in rows for c in r["result_tokens_per_day"]]
    print(f"wrote {plural(len(rows), 'row')} to {args.demos_out} in {time.perf_counter() - start:.0f} s")
    if rows:
        print(
            f"teacher {args.teacher}: mean reward {mean(r['reward'] for r in rows):+.4f}; a day: "
            f"{mean(calls):.1f} calls, {mean(said_tokens):.0f} tokens said, {mean(read_tokens):.0f} read "
            f"({rows[0]['tokens']})"
        )


def _check(args) -> None:
    check_writable_file(args.demos_out)
    if args.slots < 1:
        raise fail(f"--slots {args.slots}: expected 1 or more")


def demos(args) -> None:
    """``rbjax lm demos``."""
    from rbjax.lm.demos import demonstrate
    from rbjax.lm.tasks import read_tasks

    _check(args)
    start = time.perf_counter()
    try:
        tasks = read_tasks(args.tasks)
    except ValueError as e:
        raise fail(f"--tasks {e}") from None
    try:
        rows = demonstrate(tasks, args.teacher, args.form, args.slots, args.tokenizer, note=_note)
    except ValueError as e:
        raise fail(said(e)) from None
    _write(rows, args, start)


def corrections(args) -> None:
    """``rbjax lm corrections``."""
    from rbjax.lm.corrections import correct

    _check(args)
    start = time.perf_counter()
    try:
        rows = correct(
            args.from_states, args.teacher, args.days, day_list(args.at), args.stores, args.tail, args.reference,
            args.form, args.slots, args.tokenizer, note=_note,
        )  # fmt: skip
    except ValueError as e:
        raise fail(said(e)) from None
    _write(rows, args, start)
    if rows:
        gaps = sorted(r["gap"] for r in rows)
        print(f"the teacher's days over the model's: median gap {gaps[len(gaps) // 2]:+.4f} (reward units)")


def replay(args) -> None:
    """``rbjax lm replay``: exit status 1 when any row differs."""
    from rbjax.lm.demos import read_rows
    from rbjax.lm.replay_demos import replay as replay_rows

    try:
        rows = read_rows(args.demos)
        report = replay_rows(rows, args.slots, note=_note)
    except ValueError as e:
        raise fail(said(e)) from None
    bad = [r for r in report if not r["same"]]
    print(f"replayed {plural(len(report), 'row')}: {len(report) - len(bad)} the same, {len(bad)} differ")
    if bad:
        r = bad[0]
        raise fail(
            f"{args.demos}: row {r['id']} differs (reward {r['reward']} against {r['recorded']}, first answer "
            f"that differs: {r['first_difference']})"
        )

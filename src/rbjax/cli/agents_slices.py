"""``rbjax agents run`` from snapshots: an rbjax policy from a --from-states slice (``main_policy_slice``; a
language model's slice run is ``rbjax.cli.agents_llm``), and ``--tasks FILE``, one slice run per task group
then tasks.csv."""

from __future__ import annotations

import argparse
import os
import time

from rbjax.cli.agents_common import open_from_states, prepare_out, slice_summary, tool_flags
from rbjax.cli.agents_llm import llm_settings, main_llm
from rbjax.cli.common import fail, make_policy, said
from rbjax.files.record_files import save_records


def main_policy_slice(args, opened=None):
    """``--model policy:NAME --from-states DIR``: the policy through the tools from the slice's day on.
    opened: ``open_from_states(args)``'s (env, slice, settings) when the caller opened the slice (--tasks).
    Returns the records [stores, days]."""
    from rbjax.agents.runs.folder import policy_run_settings, write_run_json
    from rbjax.agents.runs.from_states import slice_settings
    from rbjax.agents.runs.slices import run_policy_slice

    prepare_out(args)
    env, sl, states = opened or open_from_states(args)
    policy, policy_params = make_policy(args, env)
    start = time.perf_counter()
    rec = run_policy_slice(sl, policy, policy_params, out=args.out, progress=args.progress)
    elapsed = time.perf_counter() - start
    print(
        f"{args.model} through the tools, {args.stores} stores x {args.days} days from day {sl.day} "
        f"({elapsed:.1f} s including compilation)"
    )
    save_records(os.path.join(args.out, "records.npz"), rec)
    settings = policy_run_settings(
        args.model,
        args.seed,
        tool_flags(args),
        args.grouping,
        args.supplier_attempts,
        from_slice=slice_settings(states),
    )
    write_run_json(args.out, settings)
    from rbjax.agents.runs.folder import stores_csv

    slice_summary(args, rec, None, sl, stores_csv(args.model, "policy"))
    return rec


TASK_FLAGS = ("from_states", "at", "stores", "days", "reference", "grouping", "supplier_attempts")


def main_tasks(args) -> None:
    """``--tasks FILE``: the tasks' stores run by the model, one ``--from-states`` run per snapshot day and
    horizon in a folder of --out (``rbjax.lm.tasks_run``); then tasks.csv, one row per task."""
    from rbjax.lm import tasks_run
    from rbjax.lm.tasks import read_tasks

    given = [f"--{n.replace('_', '-')}" for n in TASK_FLAGS if getattr(args, n) is not None]
    given += ["--seed"] * bool(args.seed)
    if given:
        raise fail(
            f"--tasks cannot be combined with {given[0]}: each task names its slices folder, snapshot day, "
            "store, days, reference and env"
        )
    if args.resume:
        raise fail("--resume: a run of --tasks cannot be resumed; run it again (--overwrite)")
    try:
        tasks = read_tasks(args.tasks)
    except ValueError as e:
        raise fail(f"--tasks {said(e)}") from None
    try:
        groups = tasks_run.group_tasks(tasks)
    except ValueError as e:
        raise fail(f"--tasks {args.tasks}: {said(e)}") from None
    if args.policy is None:
        llm_settings(args)  # the model's flags, checked before any work
    try:
        tasks_run.prepare_out(args.out, groups, args.overwrite)
    except ValueError as e:
        raise fail(e) from None
    rows = {}
    for g in groups:
        run = argparse.Namespace(**vars(args))
        vars(run).update(
            from_states=g.folder,
            at=g.day,
            stores=g.stores,
            days=g.days,
            reference=g.reference,
            seed=g.shared("seed"),
            grouping=g.shared("grouping"),
            supplier_attempts=g.shared("supplier_attempts"),
            data=args.data if args.data is not None else g.shared("data"),
            out=os.path.join(args.out, g.name),
        )
        print(f"{g.name}: {len(g.tasks)} tasks, stores {g.stores}")
        opened = open_from_states(run)
        try:
            tasks_run.check_opened(g, opened[1])
        except ValueError as e:
            raise fail(f"--tasks {args.tasks}: {said(e)}") from None
        rec = (main_policy_slice if args.policy else main_llm)(run, opened)
        if g.tail:
            print(f"{g.name}: {g.reference}'s continuation, {g.tail} days")
        try:
            end = tasks_run.play_tail(g, opened[1])
        except ValueError as e:
            raise fail(e) from None
        rows |= tasks_run.score(g, opened[1], rec, end)
    path = os.path.join(args.out, tasks_run.TABLE)
    table = tasks_run.write_table(rows, path)
    print(tasks_run.summary(table))
    print(f"wrote {path}")

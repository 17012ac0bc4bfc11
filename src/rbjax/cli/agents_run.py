"""``rbjax agents run``: stores run through the RetailBench tools by an agent; traces and the main table.

``--model policy:NAME`` drives an rbjax policy through the tools (``rbjax.agents.runs.policy``); any other
``--model`` is a language model behind an OpenAI-compatible endpoint (``--base-url``, the key from
``--api-key-env`` or the usual variables), run by ``--framework`` (``rbjax.agents.runs.llm_agents``). Writes
``DIR/store_{s}/`` traces, ``DIR/records.npz`` (every ``DayInfo`` field, [stores, days]),
``DIR/{NAME}_stores.csv`` and ``DIR/survival.png``, and prints the main table beside the paper's row.

A fresh run refuses a folder that holds a run (``--overwrite`` replaces it); ``--resume`` continues one
with the same identity (``run.json``). An endpoint failure, or Ctrl-C, ends the run with one line and a
non-zero exit; nothing is scored and ``--resume`` continues from the last finished days.

``main`` checks the flags and dispatches; it runs a fresh policy's stores itself. Its helpers are in
``rbjax.cli.agents_common``, language models in ``rbjax.cli.agents_llm``, runs from snapshots (--from-states
with a policy, --tasks) in ``rbjax.cli.agents_slices``.
"""

from __future__ import annotations

import os
import time

from rbjax.cli.agents_common import (
    FRESH,
    finish_saving,
    fresh_defaults,
    model_policy,
    prepare_out,
    print_ceiling,
    state_saver,
    summary,
    tool_flags,
)
from rbjax.cli.agents_llm import main_llm
from rbjax.cli.agents_slices import main_policy_slice, main_tasks
from rbjax.cli.common import fail, make_env, make_policy
from rbjax.cli.run import report
from rbjax.files.record_files import save_records

__all__ = ["FRESH", "main", "model_policy", "summary"]


def main(args) -> None:
    if not args.code_timeout > 0:
        raise fail(f"--code-timeout must be > 0 seconds, got {args.code_timeout}")
    args.policy = model_policy(args.model)
    if args.save_states and (args.tasks or args.from_states or args.resume):
        given = "--tasks" if args.tasks else "--from-states" if args.from_states else "--resume"
        raise fail(
            f"--save-states saves the snapshots of a fresh run, not of one with {given} (see rbjax agents run --help)"
        )
    if args.tasks:
        return main_tasks(args)
    if args.from_states:
        if args.resume:
            raise fail("--resume: a run from --from-states cannot be resumed; run it again (--overwrite)")
    else:
        fresh_defaults(args)
    if args.policy is None:
        return main_llm(args)
    if args.resume:
        raise fail("--resume: only language-model runs keep checkpoints; run it again with --overwrite")
    if args.from_states:
        return main_policy_slice(args)
    import jax
    import numpy as np

    from rbjax.agents.runs.folder import policy_run_settings, write_run_json
    from rbjax.agents.runs.policy import run_policy_agents
    from rbjax.results import metrics

    env, params = make_env(args)
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    saver = state_saver(args, env, params, keys)  # its flags checked before --out is touched
    prepare_out(args)
    policy, policy_params = make_policy(args, env)
    start = time.perf_counter()
    rec, _, _ = run_policy_agents(
        env,
        params,
        policy,
        policy_params,
        keys,
        out=args.out,
        progress=args.progress,
        on_day=saver and saver.reached,
        **tool_flags(args),
    )
    finish_saving(saver)
    elapsed = time.perf_counter() - start
    print(
        f"{args.model} through the tools, {args.stores} stores x {args.days} days "
        f"({elapsed:.1f} s including compilation, {args.stores * args.days / elapsed:,.1f} agent-days/s)"
    )
    save_records(os.path.join(args.out, "records.npz"), rec)
    settings = policy_run_settings(
        args.model, args.seed, tool_flags(args), args.grouping, args.supplier_attempts, args.stores, args.days
    )
    write_run_json(args.out, settings)
    report(
        args,
        metrics.store_metrics(rec),
        metrics.net_worth_paths(rec, float(params.initial_funds)),
        alive=np.asarray(rec.alive, bool),
        survival_png="survival.png",
    )
    print_ceiling(args)

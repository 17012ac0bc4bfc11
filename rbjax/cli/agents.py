"""``rbjax agents run``: stores run through the RetailBench tools by an agent; traces and the main table.

``--model policy:NAME`` drives an rbjax policy through the tools (``rbjax.agents.policy_agent``). Writes
``DIR/store_{s}/tool_calls.jsonl``, ``DIR/records.npz`` (every ``DayInfo`` field, [stores, days]) and
``DIR/{NAME}_stores.csv``, and prints the main table as ``rbjax run`` does.
"""

from __future__ import annotations

import os
import time

from rbjax.cli.common import fail, make_env, make_policy
from rbjax.cli.run import report, save_records


def model_policy(model: str) -> str:
    """The policy name of ``policy:NAME``; a one-line error for anything else."""
    from rbjax.policies import NAMES

    kind, _, name = model.partition(":")
    if kind != "policy" or name not in NAMES:
        raise fail(
            f"--model {model}: expected policy:NAME with NAME one of {', '.join(NAMES)} "
            "(language models are not wired to the runner in this version)"
        )
    return name


def main(args) -> None:
    import jax

    from rbjax.agents.run import run_policy_agents

    args.policy = model_policy(args.model)
    if not args.code_timeout > 0:
        raise fail(f"--code-timeout must be > 0 seconds, got {args.code_timeout}")
    env, params = make_env(args)
    policy, policy_params = make_policy(args, env)
    keys = jax.random.split(jax.random.key(args.seed), args.stores)
    start = time.perf_counter()
    rec, _, _ = run_policy_agents(
        env,
        params,
        policy,
        policy_params,
        keys,
        out=args.out,
        explicit_news=args.news_text == "explicit",
        code_timeout=args.code_timeout,
        progress=args.progress,
    )
    elapsed = time.perf_counter() - start
    print(
        f"{args.model} through the tools, {args.stores} stores x {args.days} days "
        f"({elapsed:.1f} s including compilation, {args.stores * args.days / elapsed:,.1f} agent-days/s)"
    )
    save_records(os.path.join(args.out, "records.npz"), rec)
    report(args, rec, params)


def add(sub) -> None:
    from rbjax.cli.common import add_env_flags

    p = sub.add_parser("agents", help="run stores through the RetailBench agent tools")
    cmd = p.add_subparsers(dest="agents_command", required=True)
    r = cmd.add_parser("run", help="agents run the stores through the tools; traces and the main table")
    r.add_argument("--model", required=True, help="policy:NAME (an rbjax policy driven through the tools)")
    r.add_argument("--stores", type=int, default=8)
    r.add_argument("--out", required=True, help="folder for the traces, records.npz and the per-store CSV")
    r.add_argument("--checkpoint", default=None, help="run folder of `rbjax train ppo` (policy:ppo)")
    r.add_argument("--greedy", action="store_true", help="policy:ppo: the most likely action")
    r.add_argument(
        "--news-text",
        choices=["vague", "explicit"],
        default="vague",
        help="explicit: headlines tell the strength",
    )
    r.add_argument("--code-timeout", type=float, default=30.0, help="seconds an execute_code call may run")
    r.add_argument("--progress", type=int, default=30, help="progress line every N days (0: none)")
    add_env_flags(r)
    r.set_defaults(func=main, devices=1)

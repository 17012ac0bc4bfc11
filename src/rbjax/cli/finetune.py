"""``rbjax train ppo --init STUDENT``: fine-tune a student with PPO over its own choice among its candidates
(``rbjax.rl.finetune``); a student's checkpoint with the fine-tune's curve."""

from __future__ import annotations

import sys
from pathlib import Path

from rbjax.cli.common import check_writable_folder, fail, make_env, plural, said


def config_of(args, days: int):
    """The ``FinetuneConfig`` the flags ask for (ValueError naming the field)."""
    from rbjax.rl.finetune import FinetuneConfig

    d = FinetuneConfig()
    stores = args.stores or d.stores
    updates = d.updates if args.steps is None else args.steps // (stores * d.copies * days)
    if updates < 1:
        raise ValueError(
            f"--steps {args.steps} is below one update ({stores} stores x {d.copies} copies x {days} days)"
        )
    return FinetuneConfig(
        stores=stores,
        updates=updates,
        epochs=args.epochs or d.epochs,
        minibatches=args.minibatches or d.minibatches,
        lr=args.lr or d.lr,
        ent_coef=d.ent_coef if args.ent_coef is None else args.ent_coef,
        # the default warm-up is cut to leave the actor one update of a short run; one asked for is checked
        critic_updates=min(d.critic_updates, updates - 1)
        if args.critic_updates is None
        else args.critic_updates,
        kl_coef=d.kl_coef if args.kl_coef is None else args.kl_coef,
        eval_every=args.eval_every or d.eval_every,
    )


def main(args) -> None:
    from rbjax.rl.finetune import finetune
    from rbjax.rl.finetune.checkpoint import FINETUNED, save, start_of

    for flag, why in (
        ("hidden", "a fine-tune keeps its student's network"),
        ("rollout_days", "a fine-tune plays whole episodes"),
        ("supplier_prior", "a student chooses among its candidates"),
    ):
        if getattr(args, flag) is not None:
            raise fail(f"train: --{flag.replace('_', '-')}: {why} (see `rbjax train --help`)")
    env, params = make_env(args)  # first: it checks --days
    try:
        config = config_of(args, args.days)
    except ValueError as e:
        raise fail(f"train: {said(e)}") from None
    try:
        student, start, recipe, folder = start_of(env, args.init)
    except ValueError as e:
        raise fail(f"train: --init: {said(e)}") from None
    out = Path(args.out or f"runs/{FINETUNED[student.config.kind]}")
    check_writable_folder(str(out))  # before any work: a run of minutes must not end on an unwritable folder
    every = 1 if args.progress is None else max(args.progress, 0)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    say(
        f"fine-tune of {args.init} ({student.config.kind} student): {config.updates} updates of "
        f"{plural(config.stores, 'store')} x {config.copies} copies x {args.days} days "
        f"({config.critic_updates} of them train the critic alone); compiling ..."
    )
    tuned, curve = finetune(
        env, params, student, start, config, args.seed, say if every else None, every=every
    )
    try:
        save(out, tuned, recipe, config, folder, curve, env)
    except FloatingPointError as e:
        raise fail(f"train: {said(e)}") from None
    first, last = curve.eval_net_worth.iloc[0], curve.eval_net_worth.iloc[-1]
    print(
        f"fine-tune: {config.updates} updates, {int(curve.store_days.iloc[-1]):,} store-days in "
        f"{curve.wall_s.iloc[-1]:.0f} s (compiling included); greedy on {config.eval_stores} validation stores: "
        f"{first:,.0f} at the start, {last:,.0f} at the end"
    )
    name = FINETUNED[student.config.kind]
    print(
        f"wrote {out}/config.json, student.msgpack, curve.csv, curve.png (rbjax run --policy {name} --checkpoint {out})"
    )

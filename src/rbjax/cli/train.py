"""``rbjax train ppo``: PPO in one jit; ``rbjax train distill``: a student of the lookahead planner, in rounds of
approximate policy iteration. Each writes a checkpoint and its curve."""

from __future__ import annotations

import math
from pathlib import Path

from rbjax.cli.common import check_writable_folder, fail, make_env, said


def main(args) -> None:
    if args.algorithm == "distill":
        return distill_main(args)
    if args.init and _is_student(args.init):
        from rbjax.cli.finetune import main as finetune_main

        return finetune_main(args)
    if args.init and not Path(args.init).exists():
        from rbjax.rl.finetune.checkpoint import STARTS

        raise fail(
            f"train: --init {args.init}: neither a PPO run folder nor a student's name ({', '.join(STARTS)})"
        )
    fine = [f for f in ("critic_updates", "kl_coef", "eval_every") if getattr(args, f) is not None]
    if fine:
        raise fail(f"train: --{fine[0].replace('_', '-')} is for a student's fine-tune (--init STUDENT)")
    from rbjax.rl.ppo import PPOConfig
    from rbjax.rl.train import load, train_ppo

    env, params = make_env(args)
    d = PPOConfig()
    args.out = args.out or "runs/ppo"
    given = lambda value, default: default if value is None else value  # noqa: E731
    try:
        config = PPOConfig(
            num_envs=args.stores or d.num_envs,
            num_steps=given(args.rollout_days, d.num_steps),
            total_steps=given(args.steps, d.total_steps),
            epochs=args.epochs or d.epochs,
            minibatches=given(args.minibatches, d.minibatches),
            lr=args.lr or d.lr,
            hidden=args.hidden or d.hidden,
            ent_coef=given(args.ent_coef, d.ent_coef),
            supplier_prior=given(args.supplier_prior, d.supplier_prior),
        )
    except ValueError as e:
        raise fail(f"train: {said(e)}") from None
    init = None
    if args.init:
        try:
            init, trained = load(args.init, env)
        except (FileNotFoundError, ValueError) as e:
            raise fail(f"train: --init: {said(e)}") from None
        if trained.hidden != config.hidden:
            raise fail(
                f"train: --init {args.init} has hidden={trained.hidden}; pass --hidden {trained.hidden}"
            )
    try:
        every = given(args.progress, 10)
        result = train_ppo(env, params, config, seed=args.seed, out=args.out, every=every, init=init)
    except FloatingPointError as e:
        raise fail(f"train: {said(e)}") from None
    last = result.curve[result.curve.episodes > 0].tail(5)
    survival = last.survival.mean()  # NaN before an episode could reach --days (rl.train.learning_curve)
    survival = (
        f"{survival:.2f}" if not math.isnan(survival) else f"n/a (no episode could last {args.days} days)"
    )
    episodes = "no episode ended" if last.empty else "last episodes: "
    if not last.empty:
        episodes += f"net worth {last.episode_net_worth.mean():,.0f}, survival {survival}"
    print(
        f"ppo: {config.num_updates} updates, {config.total_steps:,} store-days in {result.train_s:.0f} s "
        f"({result.store_days_per_s:,.0f} store-days/s, compile {result.compile_s:.0f} s); {episodes}"
    )
    print(f"wrote {args.out}/config.json, policy.msgpack, curve.csv, curve.png")


def _is_student(init: str) -> bool:
    """Whether ``--init`` names a student (its registry name, or a folder holding one) rather than a PPO run."""
    from rbjax.rl.finetune.checkpoint import STARTS

    return init in STARTS or (Path(init) / "student.msgpack").is_file()


def distill_main(args) -> None:
    import dataclasses

    from rbjax.rl.distill.recipe import REGISTERED, DistillConfig, distill, save
    from rbjax.rl.distill.student import StudentConfig

    d = DistillConfig()
    try:
        labels = dataclasses.replace(
            d.labels,
            stores=args.stores,
            label_days=args.label_days,
            days=args.days,
            explore=args.explore,
            futures=args.plan_futures,
            horizon=args.plan_horizon,
        )
        config = DistillConfig(
            student=StudentConfig.of_kind(args.student, hidden=args.hidden),
            rounds=args.rounds,
            labels=labels,
            epochs=args.epochs,
            batch=args.batch,
            lr=args.lr,
            aggregate=args.aggregate,
        )
    except ValueError as e:
        raise fail(f"train: {said(e)}") from None
    out = Path(args.out or f"runs/distill_{args.student}")
    check_writable_folder(str(out))  # before any work: a run of minutes must not end on an unwritable folder
    env, params = make_env(args)
    L = config.labels
    print(
        f"distill: {config.rounds} rounds (0-{config.rounds - 1}) of {L.stores:,} stores x {L.days} days, "
        f"{L.label_days} mornings labeled a store ({L.futures} futures x {L.horizon} days a candidate)",
        flush=True,
    )
    student, curve, _ = distill(
        env, params, config, seed=args.seed, progress=lambda line: print(line, flush=True)
    )
    save(out, student, config, curve, env)
    last = curve.iloc[-1]
    print(
        f"distill: {config.rounds} rounds, {int(curve.labels.sum()):,} labels, "
        f"{int(curve.simulated_store_days.sum()):,} simulated store-days in {curve.round_s.sum():.0f} s; last "
        f"round: agreement with the planner {last.agreement:.0%}, gain kept "
        f"{'n/a (no gain to keep)' if math.isnan(last.gain_kept) else format(last.gain_kept, '.0%')}"
    )
    print(
        f"wrote {out}/config.json, student.msgpack, curve.csv (rbjax run --policy "
        f"{REGISTERED[config.student.kind]} --checkpoint {out})"
    )

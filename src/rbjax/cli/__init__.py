"""Command line.

  rbjax info                                   catalogue summary
  rbjax oracle --stores 1000 --days 180        the paper's oracle, main-table metrics beside the paper's row
  rbjax run --policy base_stock --stores 64    a baseline policy, same metrics
  rbjax train ppo --stores 512 --steps 2000000 --out runs/ppo    PPO, one jit; checkpoint + learning curve
  rbjax train ppo --init distilled_belief                       a student fine-tuned with the reward
  rbjax train distill --student belief                          a student of the lookahead planner
  rbjax eval --policy ppo --checkpoint runs/ppo --stores 128     a trained or shipped policy, same metrics
  rbjax sweep --multiplier 2,4,6 --shelf 30,40 --seeds 64 --out results/   CSV + PNG per metric
  rbjax bench [--quick|--program|--profile]   throughput, program sizes, kernel profile (benchmarks/out)
  rbjax agents run --model policy:oracle --stores 8 --days 30 --out runs/a   a policy through the agent tools
  rbjax agents diagnose runs/a | agents replay runs/a | agents rescore runs/a   stages; calls again; tables again
  rbjax lm tasks --from-states slices/ --days 2 --out tasks.jsonl       tasks for training language models
  rbjax lm serve | lm demos | lm corrections | lm replay --tasks tasks.jsonl   sessions; demonstrations for SFT

Stores are sharded over all devices; on a CPU the host is split into one device per core (--devices).
--devices and --cache go before or after the command. From Python, rbjax.setup() does the same set-up.
"""

from __future__ import annotations

import argparse
import contextlib
import os

from rbjax.checks import need_count
from rbjax.cli import agents, bench, lm, run, sweep, train
from rbjax.cli.common import (
    CHECKPOINT_HELP,
    add_env_flags,
    add_global_options,
    add_greedy_flag,
    add_plan_flags,
    check_writable_folder,
    command,
)
from rbjax.config import EPISODE_DAYS

POSITIVE = ("stores", "days", "seeds", "batch_size", "store_chunk", "max_tokens")
NONNEGATIVE = ("progress",)
MAX_STORES = 100_000_000  # a bound on --stores / --seeds: the per-store table alone would need ~100 GB


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``rbjax: ...``, exit status 2); ``--help`` still shows the usage."""

    def error(self, message):
        self.exit(2, f"rbjax: {message} (see {self.prog} --help)\n")  # the subcommand's help


def _add_run_commands(sub) -> None:
    from rbjax.policies import NAMES

    for name, policy, doc in (
        ("oracle", "oracle", "run the paper's oracle and compare with the paper's row"),
        ("run", None, "run a policy on a batch of stores and print the main metrics"),
        (
            "eval",
            None,
            "evaluate a policy (a learned one: shipped, or --checkpoint DIR; greedy): main metrics",
        ),
    ):
        p = command(sub, name, help=doc, description=doc)
        if policy is None:
            p.add_argument(
                "--policy",
                choices=NAMES,
                default="ppo" if name == "eval" else "base_stock",
                help="the policy that runs the stores",
            )
            p.add_argument("--checkpoint", default=None, help=CHECKPOINT_HELP)
            add_greedy_flag(p)
            add_plan_flags(p, "--policy plan, or --reference plan")
        else:
            p.set_defaults(policy=policy)
        p.add_argument("--stores", type=int, default=1000 if policy else 64, help="stores (seeds) to run")
        p.add_argument("--progress", type=int, default=30, help="progress line every N days (0: none)")
        p.add_argument(
            "--out", default=None, help="folder for the per-store CSV (and the oracle's net-worth plot)"
        )
        p.add_argument(
            "--records",
            action="store_true",
            help="with --out: also every per-day record (DayInfo [stores, days]) in records.npz",
        )
        p.add_argument(
            "--store-chunk",
            type=int,
            default=None,
            metavar="N",
            help="stores per jitted call (default: what fits in memory; with --from-states, 1,024 slices); more "
            "stores run chunk by chunk",
        )
        slices = p.add_argument_group("task slices (snapshots along a run; paired runs from them)")
        slices.add_argument(
            "--save-states",
            default=None,
            metavar="DIR",
            help="write every store's state after every --every days into DIR (day_DDD.npz, slices.json)",
        )
        slices.add_argument("--every", type=int, default=30, help="--save-states: days between snapshots")
        slices.add_argument(
            "--from-states",
            default=None,
            metavar="DIR",
            help="instead of fresh stores: continue every store of DIR's snapshots for --days days, beside "
            "--reference from the same state with the same random numbers",
        )
        slices.add_argument(
            "--at", default=None, metavar="D1,D2", help="--from-states: the snapshot days used (default: all)"
        )
        slices.add_argument(
            "--reference",
            choices=NAMES,
            default="oracle",
            help="--from-states: the policy each slice is compared with (learned: the shipped one, greedy)",
        )
        add_env_flags(p)
        p.set_defaults(func=run.main)


def _add_sweep(sub) -> None:
    from rbjax.policies import NAMES

    doc = "sweep oracle / env parameters over a grid, times N seeds; writes CSV and PNG"
    p = command(sub, "sweep", help=doc, description=doc)
    p.add_argument(
        "--policy",
        choices=list(NAMES),
        default="oracle",
        help="the policy run at every point (its params fields can be swept too)",
    )
    p.add_argument("--checkpoint", default=None, help=CHECKPOINT_HELP)
    add_greedy_flag(p)
    add_plan_flags(p)
    swept = p.add_argument_group(
        "swept parameters", "comma-separated values of each; the grid is every combination of them"
    )
    for flag, (_, text) in sweep.OPTIONS.items():
        swept.add_argument(
            f"--{flag.replace('_', '-')}",
            dest=flag,
            default=argparse.SUPPRESS,
            metavar="V1,V2,...",
            help=text,
        )
    p.add_argument(
        "--seeds", type=int, default=16, help="stores (seeds) per grid point, the same at every point"
    )
    p.add_argument(
        "--batch-size", type=int, default=None, help="stores per jitted call (default: what fits in memory)"
    )
    p.add_argument("--out", default="results", help="folder for sweep.csv, summary.csv and the plots")
    add_env_flags(p)
    p.set_defaults(func=sweep.main)


def _add_train(sub) -> None:
    doc = (
        "train a learned policy: ppo (PPO in one jit, or a student fine-tuned with PPO over its own choice: ppo "
        "--init STUDENT), or distill (a student of the lookahead planner, in rounds of approximate policy "
        "iteration); a checkpoint and its curve"
    )
    p = sub.add_parser("train", help=doc, description=doc)
    algorithms = p.add_subparsers(dest="algorithm", required=True, metavar="{ppo,distill}")
    _add_train_ppo(algorithms)
    _add_train_distill(algorithms)


def _add_train_ppo(algorithms) -> None:
    """``train ppo``: PPO, or a student's fine-tune (``--init STUDENT``)."""
    from rbjax.rl.finetune import FinetuneConfig
    from rbjax.rl.ppo import PPOConfig

    d, df = PPOConfig(), FinetuneConfig()
    doc = (
        "train a learned policy: PPO (one jit), or a student fine-tuned with PPO over its own choice (ppo --init "
        "STUDENT); a checkpoint and its curve"
    )
    timing = (
        "Measured on 2 CPU cores: PPO runs at about 2,700 store-days/s (the shipped run's curve.csv: 999,424 in "
        "375 s), so the default 2,000,000 store-days take about 12.5 minutes; a student's fine-tune, 120 updates, "
        "took 1,734 s (belief) and 1,056 s (privileged) (benchmarks/results/finetune.json). A line per update."
    )
    p = command(algorithms, "ppo", help=doc, description=f"{doc}. {timing}")
    p.add_argument(
        "--stores",
        type=int,
        default=None,
        help=f"stores trained in parallel (ppo: {d.num_envs}; a student's fine-tune: {df.stores}, {df.copies} "
        "copies each)",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"ppo: store-days of experience in total ({d.total_steps:,}; from a student: "
        f"{df.updates * df.stores * df.copies * EPISODE_DAYS:,}, {df.updates} updates of --stores x "
        f"{df.copies} copies x --days)",
    )
    p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help=f"passes over each rollout per update (ppo: {d.epochs}; fine-tune: {df.epochs})",
    )
    p.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"Adam learning rate (ppo: {d.lr}, annealed; fine-tune: the actor's, {df.lr})",
    )
    p.add_argument(
        "--hidden",
        type=int,
        default=None,
        help=f"width of the network's hidden layers (ppo: {d.hidden})",
    )
    _add_ppo_flags(p, d, df)
    p.add_argument(
        "--progress",
        type=int,
        default=None,
        help="ppo: progress line every N updates (10; fine-tune: 1; 0: none)",
    )
    p.add_argument(
        "--init",
        default=None,
        metavar="RUN_DIR|STUDENT",
        help="ppo: continue from a PPO checkpoint's weights, or fine-tune a student with PPO over its own "
        "choice: a student's name (distilled, distilled_obs, distilled_belief: the shipped one) or a folder of "
        "`rbjax train distill` (docs/rl.md, 'RL past the students')",
    )
    _add_finetune_flags(p)
    p.add_argument("--out", default=None, help="run folder: checkpoint and curve (default runs/ppo)")
    add_env_flags(p)
    p.set_defaults(func=train.main)


def _add_ppo_flags(p: argparse.ArgumentParser, d, df) -> None:
    """``train ppo``'s own flags (``d``: the default ``PPOConfig``; ``df``: the fine-tune's ``FinetuneConfig``)."""
    p.add_argument(
        "--rollout-days",
        type=int,
        default=None,
        help=f"ppo: days per store between updates ({d.num_steps}; a fine-tune plays whole episodes)",
    )
    p.add_argument(
        "--minibatches",
        type=int,
        default=None,
        help=f"ppo: minibatches per epoch ({d.minibatches}; fine-tune: {df.minibatches})",
    )
    p.add_argument(
        "--ent-coef",
        type=float,
        default=None,
        help=f"ppo: entropy bonus coefficient ({d.ent_coef}; fine-tune: {df.ent_coef})",
    )
    p.add_argument(
        "--supplier-prior",
        type=float,
        default=None,
        help=f"ppo from scratch: weight of the observable supplier score in the supplier logits ({d.supplier_prior}; "
        "0: none)",
    )


def _add_finetune_flags(p: argparse.ArgumentParser) -> None:
    """``train ppo --init STUDENT``'s own flags (the fine-tune's recipe, ``rbjax.rl.finetune.FinetuneConfig``)."""
    from rbjax.rl.finetune import FinetuneConfig

    df = FinetuneConfig()
    g = p.add_argument_group("fine-tuning a student (train ppo --init STUDENT)")
    g.add_argument(
        "--critic-updates",
        type=int,
        default=None,
        help=f"updates that train the critic alone before the actor moves ({df.critic_updates}, at most all but one)",
    )
    g.add_argument(
        "--kl-coef",
        type=float,
        default=None,
        help=f"weight of the KL term toward the start when the actor starts, annealed to 0 ({df.kl_coef})",
    )
    g.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=f"updates between greedy evaluations on the validation stores ({df.eval_every})",
    )


def _add_train_distill(algorithms) -> None:
    """``train distill``: a student of the lookahead planner (``rbjax.rl.distill``), its own flags only."""
    from rbjax.rl.distill.recipe import DistillConfig

    dd = DistillConfig()
    L = dd.labels
    doc = (
        "train a student of the lookahead planner: rounds of play, label (the planner values each candidate on "
        "--label-days mornings of every store) and fit; a checkpoint and its curve. The default recipe (3 rounds "
        f"of {L.stores} stores x {L.days} days, the privileged student) takes about 30 minutes on 2 CPU cores "
        "(1,806 s measured, benchmarks/results/distill.json); within a round a line of its days every 20 s or so "
        "once the labeler has compiled (a labeled morning of this recipe takes about 25 s)"
    )
    p = command(algorithms, "distill", help=doc, description=doc)
    p.add_argument(
        "--student",
        choices=["privileged", "observed", "belief"],
        default="privileged",
        help="what the student reads: the oracle's view (policy distilled), the agent's observation only (policy "
        "distilled_obs), or the belief from what the tools show, taught by plan_obs (policy distilled_belief)",
    )
    p.add_argument("--stores", type=int, default=L.stores, help="stores played a round")
    p.add_argument("--rounds", type=int, default=dd.rounds, help="rounds of play, label, fit")
    p.add_argument("--label-days", type=int, default=L.label_days, help="mornings labeled per store a round")
    p.add_argument(
        "--explore",
        type=float,
        default=L.explore,
        help="share of store-days a random candidate is played between the labeled mornings",
    )
    for flag, metavar, default, what in (
        ("--plan-futures", "M", L.futures, "futures per candidate"),
        ("--plan-horizon", "H", L.horizon, "days each future runs"),
    ):  # the labeling planner's M and H, named as run --policy plan names them
        p.add_argument(flag, type=int, default=default, metavar=metavar, help=f"the labeler's {what}")
    p.add_argument("--epochs", type=int, default=dd.epochs, help="passes over a round's labels")
    p.add_argument("--batch", type=int, default=dd.batch, help="labels per Adam step")
    p.add_argument("--lr", type=float, default=dd.lr, help="Adam learning rate")
    p.add_argument(
        "--hidden", type=int, default=dd.student.hidden, help="width of the network's hidden layers"
    )
    p.add_argument(
        "--aggregate",
        action=argparse.BooleanOptionalAction,
        default=dd.aggregate,
        help="fit each round on every round's labels so far (--no-aggregate: on its own)",
    )
    p.add_argument("--out", default=None, help="checkpoint folder (default runs/distill_STUDENT)")
    add_env_flags(p)
    p.set_defaults(func=train.main)


def _add_bench(sub) -> None:
    doc = "throughput profiler: batch sizes x devices, sub-step costs, floor kernel, float32 drift"
    p = command(sub, "bench", help=doc, description=doc)
    p.add_argument(
        "--quick",
        action="store_true",
        help="instead: the oracle at 256 stores for 30 days, set beside the README's machines (how this "
        "machine compares, what the main job should take here)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="instead: XLA's op-level trace of one oracle day at --stores stores (profile.md, profile.csv, trace/)",
    )
    p.add_argument(
        "--program",
        action="store_true",
        help="instead: the reset's, the day's and the oracle's program sizes (jaxpr equations, HLO "
        "instructions, kernels) and their trace, lower and compile seconds at --stores stores (program.md)",
    )
    p.add_argument(
        "--stores",
        type=int,
        default=None,
        help="--profile, --program (default 1024), --quick (default 256): stores in the batch (>= 1)",
    )
    p.add_argument("--batches", default="1,16,256,1024,4096,16384,65536", help="batch sizes timed")
    p.add_argument(
        "--days", type=int, default=10, help="days per timed scan (--quick: always 30, the reference's)"
    )
    p.add_argument("--out", default="benchmarks/out", help="folder for the tables and the plot")
    p.set_defaults(func=bench.main)


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="rbjax", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = command(sub, "info", help="print the catalogue summary")
    p.add_argument("--data", default=None, help="catalogue folder (default: the shipped hard_v2 catalogue)")
    p.set_defaults(func=run.info)
    for add in (_add_run_commands, _add_sweep, _add_train, _add_bench, agents.add, lm.add):
        add(sub)
    add_global_options(ap, default=None)
    return ap


def main(argv=None) -> None:
    ap = parser()
    args, extra = ap.parse_known_args(argv)

    def error(message: str):
        """A one-line refusal that points to the help of the command that lists the flag (not the top level's)."""
        ap.exit(2, f"rbjax: {message} (see {getattr(args, 'help_of', 'rbjax')} --help)\n")

    if extra:
        error(f"unrecognized arguments: {' '.join(extra)}")
    for name in POSITIVE:
        if getattr(args, name, None) is not None:
            need_count(f"--{name.replace('_', '-')}", getattr(args, name), error=error)
    for name in NONNEGATIVE:
        if getattr(args, name, None) is not None and getattr(args, name) < 0:
            error(f"--{name} must be >= 0 (0: none), got {getattr(args, name)}")
    for name in ("stores", "seeds"):
        if getattr(args, name, None) is not None and getattr(args, name) > MAX_STORES:
            error(f"--{name} must be at most {MAX_STORES:,}, got {getattr(args, name):,}")
    if getattr(args, "records", False) and not getattr(args, "out", None):
        error("--records needs --out DIR (the folder records.npz is written to)")
    if getattr(args, "from_states", None) and getattr(args, "save_states", None):
        error("--from-states and --save-states: one or the other (snapshots are saved along fresh runs)")
    if getattr(args, "at", None) and not getattr(args, "from_states", None):
        error("--at needs --from-states DIR")
    if getattr(args, "from_states", None) and getattr(args, "records", False):
        error("--records: not with --from-states (its results are the per-slice table, slices.csv)")
    if args.func is bench.main:
        bench.check_batches(args.batches, error)
        if args.profile and args.program:
            error("--profile and --program: one or the other")
    cores = os.cpu_count() or 1
    if args.devices is not None and not 1 <= args.devices <= cores:
        error(f"--devices must be between 1 and the host's {cores} cores, got {args.devices}")
    if not 0 <= getattr(args, "seed", 0) < 2**32:
        error(f"--seed must be in 0 .. 2**32 - 1, got {args.seed}")
    check_writable_folder(getattr(args, "out", None))
    import rbjax

    agent_commands = (agents.main, agents.diagnose, agents.replay_run, agents.rescore_run, lm.tasks, lm.serve)
    one_device = args.func in (train.main, *agent_commands)  # keep XLA's multi-threaded kernels
    with contextlib.suppress(RuntimeError):  # called from a process that already runs JAX: keep its devices
        rbjax.setup(
            devices=1 if one_device else args.devices,
            cache="none" if args.func is bench.main else args.cache or "default",
        )
    args.func(args)


if __name__ == "__main__":
    main()

"""What every command shares: the env from the flags, a policy from the registry, the usual flags."""

from __future__ import annotations

import argparse
import os

# what --checkpoint takes, in every command that has it
CHECKPOINT_HELP = (
    "a learned policy's folder (default: the shipped one where there is one): of `rbjax train ppo` for ppo, of "
    "`rbjax train distill` for a distilled student, of `rbjax train ppo --init STUDENT` for a fine-tuned one"
)


def flag_of(parameter: str) -> str:
    """The command line's flag for a library parameter: ``from_states`` -> ``--from-states``. The one place
    where parameters become flags (every flag is its parameter's name with dashes)."""
    return "--" + parameter.replace("_", "-")


def said(error: BaseException) -> str:
    """An error's message as the command line words it: the parameters an ``ArgumentError`` (a
    ``rbjax.arguments.Worded``) names, as their flags."""
    from rbjax.arguments import Worded

    return error.worded(flag_of) if isinstance(error, Worded) else str(error)


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an s unless n is one: "1 store", "2 stores", "1,000 days"."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def fail(message: str | BaseException) -> SystemExit:
    """A one-line error and exit status 1 (raise the result); an exception is worded by ``said``."""
    return SystemExit(f"rbjax: {message if isinstance(message, str) else said(message)}")


def check_snapshot_flags(folder: str, every: int, days: int) -> None:
    """``--save-states FOLDER --every D``, before any work: D between 1 and --days - 1, the folder writable
    (created if need be)."""
    import os

    if not 1 <= every < days:
        raise fail(f"--every must be between 1 and --days - 1 ({days - 1}), got {every}")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise fail(f"--save-states {folder}: not a writable folder ({e.strerror or e})") from None
    if not os.access(folder, os.W_OK):
        raise fail(f"--save-states {folder}: not a writable folder")


def add_global_options(p: argparse.ArgumentParser, default=argparse.SUPPRESS) -> None:
    """``--devices`` and ``--cache``, on the main parser (default None) and on every command's (default
    SUPPRESS: given after the command, a value overrides the one before it; not given, it leaves it alone)."""
    p.add_argument(
        "--devices",
        type=int,
        default=default,
        help="CPU devices to split the host into (default: one per core; 1 disables sharding; train and "
        "agents always use one)",
    )
    p.add_argument(
        "--cache",
        default=default,
        metavar="DIR",
        help="persistent XLA compilation cache, so a repeated command skips compilation (default: "
        "$JAX_COMPILATION_CACHE_DIR, else ~/.cache/rbjax/xla; 'none' turns it off; bench never "
        "uses it, as it times compilation)",
    )


class HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with "(default: X)" after each option that has a default value (not after a required option,
    an on/off flag, or one whose default is None: its help text says what it does by default)."""

    def _get_help_string(self, action):
        if action.required or action.default is None or action.nargs == 0:
            return action.help
        return super()._get_help_string(action)


def command(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A command's parser: defaults shown in ``--help``, the global options accepted after the command too."""
    p = sub.add_parser(name, formatter_class=HelpWithDefaults, **kwargs)
    add_global_options(p)
    p.set_defaults(help_of=p.prog)  # where a refusal points the user ("rbjax agents run")
    return p


def add_env_flags(p: argparse.ArgumentParser, days: int | None = None) -> None:
    """The env's flags, their defaults ``rbjax.env.EnvOptions``' (``days``: another default for --days)."""
    from rbjax.config import GROUPINGS
    from rbjax.env import EnvOptions

    d = EnvOptions()
    p.add_argument(
        "--days", type=int, default=days or d.days, help=f"days per store (the paper's runs: {d.days})"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the stores' random keys")
    p.add_argument(
        "--grouping",
        choices=GROUPINGS,
        default=d.grouping,
        help="categories: 20 (rbjax) or the reference's 19 labels",
    )
    p.add_argument(
        "--supplier-attempts",
        type=int,
        default=d.supplier_attempts,
        metavar="N",
        help="supplier worlds drawn per product at reset, one kept by the reference's selection rule (1: the "
        "first attempt, a reset 8x cheaper on a CPU)",
    )
    p.add_argument("--data", default=d.data, help="catalogue folder (default: the shipped hard_v2 catalogue)")


def add_greedy_flag(p) -> None:
    """--greedy / --no-greedy: PPO's most likely action (the default, as the README's rows run it) or a sample."""
    p.add_argument(
        "--greedy",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ppo: its most likely action; --no-greedy: a sample (the students always choose their best)",
    )


def options_of(args):
    """The ``rbjax.env.EnvOptions`` of a command's env flags."""
    from rbjax.env import EnvOptions

    return EnvOptions(args.data, args.grouping, args.supplier_attempts, args.days)


def make_env(args):
    """(Env, validated EnvParams with horizon = --days) from the flags: the process's one Env for them
    (``programs.env_and_params``), so the commands run in one process share their compiled programs."""
    from rbjax.env import OptionError
    from rbjax.programs import env_and_params

    try:
        return env_and_params(options_of(args))
    except OptionError as e:
        raise fail(e) from None


def add_plan_flags(p: argparse.ArgumentParser, which: str = "--policy plan") -> None:
    """The lookahead planner's settings (``rbjax.policies.PlanSettings``), for ``which`` (the flag that picks it)."""
    from rbjax.policies import POLICIES, PlanSettings
    from rbjax.policies.planner import STUDENT_BASES

    d = PlanSettings()
    g = p.add_argument_group(f"the lookahead planner ({which}; docs/results.md, 'Beyond the oracle')")
    g.add_argument(
        "--plan-base",
        default=d.base,
        choices=[*POLICIES, *STUDENT_BASES],  # every policy that does not plan, the shipped students too
        help="the policy played after today in every simulated future (a student: policy iteration's next teacher)",
    )
    g.add_argument("--plan-futures", type=int, default=d.futures, metavar="M", help="futures per candidate")
    g.add_argument("--plan-horizon", type=int, default=d.horizon, metavar="H", help="days each future runs")
    g.add_argument(
        "--plan-every",
        type=int,
        default=d.every,
        metavar="N",
        help="plan one day in N (the base policy between)",
    )
    g.add_argument(
        "--plan-halving",
        action="store_true",
        help="prune the candidates by sequential halving: all meet half the futures, the better half all of them",
    )


def plan_settings(args):
    """``PlanSettings`` from the --plan-* flags (the defaults where a command has none)."""
    from rbjax.arguments import ArgumentError
    from rbjax.policies import PlanSettings

    d = PlanSettings()
    given = {name: getattr(args, f"plan_{name}", getattr(d, name)) for name in ("base", "futures", "horizon")}
    given.update(every=getattr(args, "plan_every", d.every), halving=getattr(args, "plan_halving", d.halving))
    try:
        return PlanSettings(**given)
    except ArgumentError as e:  # its fields are the --plan-* flags
        raise fail(e.worded(lambda name: flag_of("plan_" + name))) from None


def make_policy(args, env):
    """(policy function, params) for --policy (and --checkpoint, --greedy for ppo; --plan-* for plan)."""
    from rbjax import policies

    if policies.registry.needs_checkpoint(args.policy) and not getattr(args, "checkpoint", None):
        writer = policies.registry.LEARNED_TABLE[args.policy].writer
        raise fail(f"--policy {args.policy} needs --checkpoint DIR: none is shipped; `{writer}` writes one")
    try:
        return policies.make(
            args.policy,
            env,
            getattr(args, "checkpoint", None),
            getattr(args, "greedy", False),
            plan_settings(args) if args.policy in policies.registry.PLANNING else None,
        )
    except ValueError as e:
        raise fail(f"--policy {args.policy}: {said(e)}") from None


def day_list(
    text: str | None, flag: str = "--at", what: str = "snapshot days such as 30,90"
) -> list[int] | None:
    """The days of a comma-separated flag (``--at 30,90``), None when the flag is absent; a one-line failure
    naming ``flag`` for text that is not such a list."""
    if text is None:
        return None
    try:
        days = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise fail(f"{flag} {text}: expected {what}") from None
    if not days:
        raise fail(f"{flag} {text}: expected {what}")
    return days


def check_writable_folder(folder: str | None) -> None:
    """Create ``--out`` (a folder) and check a file can be written in it, before any work is done."""
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, ".rbjax-write-test")
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as e:
        raise fail(f"--out {folder}: not a writable folder ({e.strerror or e})") from None


def check_writable_file(path: str) -> None:
    """A one-line failure naming ``--out`` unless a file can be written at ``path`` (checked before the work)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK) or os.path.isdir(path):
        raise fail(f"--out {path}: cannot write a file there")

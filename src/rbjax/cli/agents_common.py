"""``rbjax agents run``'s shared helpers: the ``--model`` policy name and the tool flags, --out made ready,
the --save-states saver, the defaults of fresh stores, a slice opened from --from-states, and the printed
results (the main table beside the paper's, or a slice's paired comparison) with the per-store CSV and
survival.png."""

from __future__ import annotations

import os

from rbjax.cli.common import check_snapshot_flags, fail, plan_settings, plural
from rbjax.cli.run import write_survival
from rbjax.env import EnvOptions
from rbjax.files.record_files import atomic_file
from rbjax.policies.registry import PLANNING


def model_policy(model: str) -> str | None:
    """The policy name of ``policy:NAME``, None for a language model; a one-line error for a bad name."""
    from rbjax.policies import NAMES

    kind, _, name = model.partition(":")
    if kind != "policy":
        return None
    if name not in NAMES:
        raise fail(f"--model {model}: expected policy:NAME with NAME one of {', '.join(NAMES)}")
    return name


def tool_flags(args) -> dict:
    """The tool options of the flags (what run.json records as ``tools``)."""
    return {"code_timeout": args.code_timeout, "explicit_news": args.news_text == "explicit"}


def prepare_out(args) -> None:
    """--out ready for a run (``rbjax.agents.runs.folder.prepare_folder``); a used folder is refused at once."""
    from rbjax.agents.runs.folder import prepare_folder

    try:
        prepare_folder(args.out, overwrite=args.overwrite)
    except ValueError as e:
        raise fail(e) from None


def state_saver(args, env, params, keys):
    """The ``StateSaver`` of --save-states (the folder checked writable and --every in range first), or None."""
    if not args.save_states:
        return None
    from rbjax.agents.runs.save_states import AGENT, StateSaver

    check_snapshot_flags(args.save_states, args.every, args.days)
    held = [
        n for n in os.listdir(args.save_states) if n == "slices.json" or n.startswith(("day_", "tools_day_"))
    ]
    if held:
        raise fail(
            f"--save-states {args.save_states}: holds the snapshots of another run ({held[0]}): use a new folder"
        )
    return StateSaver(
        args.save_states,
        env,
        params,
        keys,
        args.every,
        args.days,
        policy=args.policy or AGENT,
        agent=None if args.policy else args.model,
        plan=plan_settings(args).as_dict() if args.policy in PLANNING else None,
        checkpoint=getattr(args, "checkpoint", None),
        greedy=getattr(args, "greedy", False),
        seed=args.seed,
        stores=args.stores,
        grouping=args.grouping,
        supplier_attempts=args.supplier_attempts,
        data=args.data,
    )


def finish_saving(saver) -> None:
    """``slices.json`` of --save-states, and a line saying what was written (nothing when no snapshot was)."""
    if saver is None or not saver.files:
        return
    files = saver.finish()
    days = ", ".join(map(str, files)) or "none"
    print(
        f"wrote {plural(len(files), 'snapshot')} with the stores' tool history (days {days}) in {saver.folder}"
    )


FRESH = {  # left None by the parser
    "stores": 8,
    **{f: getattr(EnvOptions, f) for f in ("days", "grouping", "supplier_attempts")},
}


def fresh_defaults(args) -> None:
    """The defaults of a run of fresh stores (with --from-states the slices' run gives them instead)."""
    if args.reference is not None:
        raise fail("--reference needs --from-states DIR (the slices compared with it)")
    for name, value in FRESH.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def open_from_states(args):
    """(env, AgentSlice, settings) for --from-states DIR --at D (``rbjax.agents.runs.from_states``): the
    slices' run's settings filled into args (grouping, supplier attempts, seed, data, stores, days, reference,
    source policy, the day); one-line errors."""
    from rbjax.agents.runs.from_states import open_from_states as open_states

    try:
        env, sl, settings = open_states(
            args.from_states,
            args.at,
            args.stores,
            args.days,
            args.grouping,
            args.supplier_attempts,
            args.seed or None,  # 0, the flag's default: the slices' seed
            args.data,
            args.reference,
            progress=args.progress,
            note=print,
            **tool_flags(args),
        )
    except ValueError as e:
        raise fail(e) from None
    vars(args).update({k: v for k, v in settings.items() if k != "from_states"})
    return env, sl, settings


def slice_summary(args, rec, tools, sl, csv: str) -> None:
    """A slice run's results: its main table over the slice's days (no paper row: the paper's runs start at
    the opening), the share of stores alive, and the paired comparison with the reference (printed; and
    slices.csv, paired.png, the per-store CSV and survival.png in --out)."""
    import numpy as np

    from rbjax.results import metrics
    from rbjax.runners import paired

    table = metrics.store_metrics(rec)
    if tools is not None:
        table = table.join(tools)
    columns = metrics.MAIN_TABLE + tuple(
        c for c in ("direct_tools_per_day", "total_tools_per_day", "tokens_per_day") if c in table
    )
    print(f"days {sl.day + 1}-{sl.stop} (a slice of {args.days} days from day {sl.day}; no paper row)")
    print(metrics.format_compare(metrics.compare(table, {}, columns, label=None)))
    alive = np.asarray(rec.alive, bool)
    print(metrics.format_survival(alive))
    pairs = sl.compare(rec)
    print(paired.format_summary(paired.summarize(pairs), args.model, args.reference, args.days))
    with atomic_file(os.path.join(args.out, csv)) as f:
        table.to_csv(f, index_label="store")
    with atomic_file(os.path.join(args.out, "slices.csv")) as f:
        pairs.to_csv(f, index=False)
    with atomic_file(os.path.join(args.out, "paired.png"), "wb") as f:
        paired.plot(pairs, args.model, args.reference, args.days).savefig(f, dpi=110, format="png")
    write_survival(os.path.join(args.out, "survival.png"), {args.model: alive})
    print(f"wrote {args.out}")
    bad = metrics.non_finite_stores(table)
    if len(bad):
        raise fail(
            f"{len(bad)} stores ended with a non-finite net worth or count (stores {bad[:8].tolist()})"
        )


def summary(args, rec, tools) -> None:
    """The main table and the tool and token rates (mean ± sd, 95 % CI, min) beside the paper's run of this
    model and framework when there is one, and the share of stores alive; the per-store CSV and survival.png."""
    import numpy as np

    from rbjax.results import metrics, paper

    table = metrics.store_metrics(rec).join(tools)
    label, reference = paper.reference_row(args.model, args.framework)
    if label is None:
        print(f"paper row: none (the paper has no {args.framework} run of this model)")
    columns = metrics.MAIN_TABLE + ("direct_tools_per_day", "total_tools_per_day", "tokens_per_day")
    print(metrics.format_compare(metrics.compare(table, reference, columns, label=label, days=args.days)))
    alive = np.asarray(rec.alive, bool)
    print(metrics.format_survival(alive))
    from rbjax.agents.runs.folder import stores_csv

    with atomic_file(os.path.join(args.out, stores_csv(args.model, args.framework))) as f:
        table.to_csv(f, index_label="store")
    write_survival(os.path.join(args.out, "survival.png"), {f"{args.model} ({args.framework})": alive})
    print(f"wrote {args.out}")
    bad = metrics.non_finite_stores(table)
    if len(bad):
        raise fail(
            f"{len(bad)} stores ended with a non-finite net worth or count (stores {bad[:8].tolist()})"
        )


def print_ceiling(args) -> None:
    """With ``--ceiling``: the run's share of the agent's ceiling and of the oracle, its ceiling.csv written
    (``agents_analysis.ceiling_of``, on the run's fresh stores)."""
    if not getattr(args, "ceiling", False):
        return
    from rbjax.cli.agents_analysis import ceiling_of

    settings = dict(
        seed=args.seed,
        stores=args.stores,
        days=args.days,
        grouping=args.grouping,
        supplier_attempts=args.supplier_attempts,
    )
    print(ceiling_of(args.out, settings, getattr(args, "data", None)))

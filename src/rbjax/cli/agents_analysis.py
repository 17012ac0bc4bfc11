"""``rbjax agents diagnose``, ``replay`` and ``rescore``: finished run folders analysed offline
(``rbjax.agents.analysis``): the paper's four stages, a run played again with no model, its tables rebuilt.
"""

from __future__ import annotations

import os

from rbjax.cli.common import fail
from rbjax.cli.run import write_survival
from rbjax.files.record_files import atomic_file


def diagnose(args) -> None:
    """``rbjax agents diagnose DIR...``: per run folder run_metrics.csv and four_stage_metrics.csv, a summary
    beside the paper's row and the share of stores alive, one figure of the four stages of every run and one of
    their survival, one line per run (survival_by_run.png beside it: a run's own survival.png is left alone),
    from each run's records.npz (a run without one is named and left out)."""
    from rbjax.agents.analysis import diagnostics
    from rbjax.agents.analysis.run_diagnosis import diagnose_folder, load_run_catalog
    from rbjax.results import metrics, paper

    try:
        catalog = load_run_catalog(args.data)
    except ValueError as e:
        raise fail(e) from None
    for run in args.runs:  # the CSVs go into the run folders: check them before any work
        if not os.path.isdir(run) or not os.access(run, os.W_OK):
            raise fail(f"{run}: not a writable run folder")
    tables, papers, curves = {}, {}, {}
    for run in args.runs:
        try:
            d = diagnose_folder(run, catalog, args.no_runner_calls, args.oracle_convention)
        except ValueError as e:
            raise fail(e) from None
        found = paper.four_stage_row(d.model, d.framework)
        print(f"{d.label}: {len(d.table)} stores; paper row: {found[0] if found else 'none'}")
        print(diagnostics.format_summary(diagnostics.summarize(d.table, found[1] if found else None)))
        if d.alive is not None:
            curves[d.label] = d.alive
            print(metrics.format_survival(d.alive))
        else:
            print(f"survival: no records.npz in {run}, left out of survival_by_run.png")
        tables[d.label] = d.table
        if getattr(args, "ceiling", False):
            print(ceiling_of(run, d.settings, args.data))
        if found:
            papers[f"{found[0]}, paper"] = found[1]
    out = args.out or args.runs[0]
    figure = os.path.join(out, "four_stages.png")
    with atomic_file(figure, "wb") as f:
        diagnostics.plot_stages(tables, papers).savefig(f, dpi=110, format="png")
    if curves:
        write_survival(os.path.join(out, "survival_by_run.png"), curves)
        figure += f" and {os.path.join(out, 'survival_by_run.png')}"
    print(f"wrote four_stage_metrics.csv and run_metrics.csv in each run folder, and {figure}")


def ceiling_of(run: str, settings: dict, data: str | None) -> str:
    """The line ``--ceiling`` prints for one run (its ceiling.csv written), or why it has none."""
    from rbjax.agents.analysis import ceiling
    from rbjax.agents.runs.folder import load_records

    if "stores" not in settings or "days" not in settings:
        return (
            f"ceiling: {run} has no run.json of fresh stores "
            "(a slice's ceiling: rbjax run --policy plan_obs --from-states)"
        )
    records = load_records(run)
    if records is None:
        return f"ceiling: {run} has no records.npz"
    agent = records["net_worth"][:, -1]
    table = ceiling.ceiling_table(agent, ceiling.reference_finals({**settings, "data": data}))
    path = ceiling.write_ceiling(run, table)
    return f"{ceiling.summary_line(table)} ({path})"


def replay_run(args) -> None:
    """``rbjax agents replay DIR``: the run played again from its traces with no model
    (``rbjax.agents.analysis.replay``); one line per kind of difference and a non-zero exit, or the summary line."""
    from rbjax.agents.analysis import replay
    from rbjax.agents.runs.folder import read_settings

    if args.report and not os.access(os.path.dirname(os.path.abspath(args.report)), os.W_OK):
        raise fail(f"--report {args.report}: its folder is not writable")
    news = None if args.news_text is None else args.news_text == "explicit"
    try:
        settings = read_settings(args.run)
        result = replay.replay(args.run, data=args.data, rerun_code=args.rerun_code, explicit_news=news)
    except ValueError as e:
        raise fail(e) from None
    for note in result.notes:
        print(f"note: {note}")
    for line in replay.format_mismatches(result.mismatches):
        print(line)
    if args.report:
        replay.write_report(args.report, args.run, result)
    size = f"{settings['stores']} stores x {settings['days']} days"
    if result.mismatches:
        kinds = len({m.kind for m in result.mismatches})
        more = f" (and {kinds - 1} more kinds above)" if kinds > 1 else ""
        raise fail(f"replay of {size} differs from the run: {result.mismatches[0]}{more}")
    checked = (
        "records identical" if os.path.exists(os.path.join(args.run, "records.npz")) else "no records.npz"
    )
    print(f"replay: {size}, {checked}, {result.calls:,} tool calls identical")


def rescore_run(args) -> None:
    """``rbjax agents rescore DIR``: the main table and the four stages rebuilt from the traces (the engine's
    order-line counters from a replay); rescored CSVs, compared with the run's."""
    from rbjax.agents.analysis import diagnostics, replay, rescore
    from rbjax.agents.runs.folder import read_settings
    from rbjax.results import metrics, paper

    out = args.out or args.run
    if not os.path.isdir(args.run):
        raise fail(f"{args.run}: not a folder")
    if not os.path.isdir(out) or not os.access(out, os.W_OK):  # checked before any work
        raise fail(f"{out}: not a writable folder")
    try:
        settings = read_settings(args.run)
        replayed = None
        if not args.traces_only:
            news = None if args.news_text is None else args.news_text == "explicit"
            replayed = replay.replay(args.run, data=args.data, explicit_news=news)
        table, four = rescore.rescore(
            args.run,
            engine_columns=not args.traces_only,
            replayed=replayed,
            data=args.data,
            oracle_convention=args.oracle_convention,
            include_runner=False if args.no_runner_calls else None,
        )
    except ValueError as e:
        raise fail(e) from None
    rebuilt = "not rebuilt (--traces-only)" if args.traces_only else "from a replay of the recorded calls"
    print(f"rescore: {', '.join(rescore.TRACE_COLUMNS)} and the tool rates from the traces alone")
    print(f"rescore: {', '.join(rescore.ENGINE_COLUMNS)}: {rebuilt}")
    problems = []
    if replayed is not None and replayed.mismatches:
        for line in replay.format_mismatches(replayed.mismatches):
            print(f"replay: {line}")
        problems.append(f"the replay differs from the run: {replayed.mismatches[0]}")
    model, framework = str(settings.get("model", "?")), settings.get("framework", "?")
    label, reference = paper.reference_row(model, framework)
    columns = metrics.MAIN_TABLE + tuple(c for c in rescore.TOOL_COLUMNS[:3] if c in table)
    print(
        metrics.format_compare(metrics.compare(table, reference, columns, label=label, days=settings["days"]))
    )
    found = paper.four_stage_row(model, framework)
    print(f"four stages: {len(four)} stores; paper row: {found[0] if found else 'none'}")
    print(diagnostics.format_summary(diagnostics.summarize(four, found[1] if found else None)))
    written = rescore.write_rescored(out, table, four)
    print(f"wrote {written['rescored_stores.csv']} and {written['rescored_four_stage_metrics.csv']}")
    try:  # the run's own CSVs are data from anyone: an unreadable one is a one-line error
        for path, lines in rescore.compare_with_run(args.run, settings, table, four):
            name = os.path.basename(path)
            print(f"{name}: " + ("rescored identically" if not lines else f"{len(lines)} columns differ"))
            for line in lines:
                print(f"  {line}")
            if lines:
                problems.append(f"{name} differs: {lines[0]}")
    except ValueError as e:
        raise fail(e) from None
    if problems:
        more = f" (and {len(problems) - 1} more above)" if len(problems) > 1 else ""
        raise fail(f"rescore of {args.run}: {problems[0]}{more}")

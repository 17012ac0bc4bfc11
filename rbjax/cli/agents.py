"""``rbjax agents run``: stores run through the RetailBench tools by an agent; traces and the main table.

``--model policy:NAME`` drives an rbjax policy through the tools (``rbjax.agents.runs.policy``); any other
``--model`` is a language model behind an OpenAI-compatible endpoint (``--base-url``, the key from
``--api-key-env`` or the usual variables), run by ``--framework`` (``rbjax.agents.runs.llm_agents``). Writes
``DIR/store_{s}/`` traces, ``DIR/records.npz`` (every ``DayInfo`` field, [stores, days]),
``DIR/{NAME}_stores.csv`` and ``DIR/survival.png``, and prints the main table beside the paper's row.

A fresh run refuses a folder that holds a run (``--overwrite`` replaces it); ``--resume`` continues one
with the same identity (``run.json``). An endpoint failure, or Ctrl-C, ends the run with one line and a
non-zero exit; nothing is scored and ``--resume`` continues from the last finished days.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time

from rbjax.cli.common import fail, make_env, make_policy
from rbjax.cli.run import report, write_survival
from rbjax.runners.record_files import atomic_file, save_records


def model_policy(model: str) -> str | None:
    """The policy name of ``policy:NAME``, None for a language model; a one-line error for a bad name."""
    from rbjax.policies import NAMES

    kind, _, name = model.partition(":")
    if kind != "policy":
        return None
    if name not in NAMES:
        raise fail(f"--model {model}: expected policy:NAME with NAME one of {', '.join(NAMES)}")
    return name


def main(args) -> None:
    if not args.code_timeout > 0:
        raise fail(f"--code-timeout must be > 0 seconds, got {args.code_timeout}")
    args.policy = model_policy(args.model)
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

    from rbjax.agents.runs.loop import prepare_folder, run_policy_agents

    env, params = make_env(args)
    try:
        prepare_folder(args.out, overwrite=args.overwrite)
    except ValueError as e:
        raise fail(str(e)) from None
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
    settings = dict(model=args.model, framework="policy", stores=args.stores, days=args.days, seed=args.seed)
    settings["tools"] = {"code_timeout": args.code_timeout, "explicit_news": args.news_text == "explicit"}
    with atomic_file(os.path.join(args.out, "run.json")) as f:
        json.dump(
            settings | {"grouping": args.grouping, "supplier_attempts": args.supplier_attempts}, f, indent=1
        )
    from rbjax.runners import metrics

    report(
        args,
        metrics.store_metrics(rec),
        metrics.net_worth_paths(rec, float(params.initial_funds)),
        alive=np.asarray(rec.alive, bool),
        survival_png="survival.png",
    )


FRESH = {"stores": 8, "days": 180, "grouping": "20", "supplier_attempts": 50}  # left None by the parser


def fresh_defaults(args) -> None:
    """The defaults of a run of fresh stores (with --from-states the slices' run gives them instead)."""
    if args.reference is not None:
        raise fail("--reference needs --from-states DIR (the slices compared with it)")
    for name, value in FRESH.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def open_from_states(args):
    """(env, AgentSlice) for --from-states DIR --at D: the env of the slices' run (its slices.json: grouping,
    supplier attempts, data), the snapshot's first --stores stores brought to day D by the slices' policy
    through the tools. Fills args.stores, args.days, args.seed, args.reference. One-line errors."""
    import argparse

    import numpy as np

    from rbjax import policies
    from rbjax.agents.runs.slices import open_slice
    from rbjax.cli.slices import SLICES, read_manifest, slice_files
    from rbjax.runners import snapshots

    folder = args.from_states
    files = slice_files(folder, args.at)
    if len(files) > 1:
        days = ", ".join(str(d) for d, _ in files)
        if args.at:
            raise fail(f"--at {args.at}: agents start from one day (one of {days})")
        raise fail(f"--at D is needed: {folder} holds snapshots of days {days}")
    (day, path), manifest_path = files[0], os.path.join(folder, SLICES)
    if not os.path.exists(manifest_path):
        raise fail(
            f"--from-states {folder}: no {SLICES} (the folder `rbjax run --save-states` writes has one)"
        )
    try:  # a slices folder from anyone: its manifest is data, every field checked
        manifest = read_manifest(folder)
    except ValueError as e:
        raise fail(str(e)) from None
    source = manifest["policy"]
    made = {k: manifest[k] for k in ("grouping", "supplier_attempts", "seed")}
    for name in ("grouping", "supplier_attempts"):  # the env must be the one the slices were made in
        given = getattr(args, name)
        if given is not None and given != made[name]:
            flag = "--" + name.replace("_", "-")
            raise fail(
                f"{flag} {given}: the slices in {folder} were made with {flag} {made[name]} (leave it out)"
            )
        setattr(args, name, made[name])
    if args.seed not in (0, made["seed"]):
        raise fail(
            f"--seed {args.seed}: the slices in {folder} are stores of --seed {made['seed']} (leave it out)"
        )
    args.seed = made["seed"]
    if args.data is None:
        args.data = manifest.get("data")
    env, _ = make_env(argparse.Namespace(**{**vars(args), "days": manifest.get("days", 180)}))
    try:
        snap = snapshots.load(path, env)
    except ValueError as e:
        raise fail(str(e)) from None
    if args.stores is None:
        args.stores = snap.num_stores
    elif args.stores > snap.num_stores:
        raise fail(
            f"--stores {args.stores}: the snapshot of day {day} in {folder} holds {snap.num_stores} stores"
        )
    horizon = int(np.max(np.asarray(snap.env_params(env).horizon)))
    if args.days is None:
        args.days = horizon - day
    if args.days < 1 or day + args.days > horizon:
        raise fail(
            f"--days {args.days}: a slice from day {day} runs past the stores' horizon ({horizon} days): "
            f"at most {horizon - day} days from this snapshot"
        )
    try:
        policy, policy_params = policies.make(
            source, env, manifest.get("checkpoint"), manifest.get("greedy", False)
        )
    except ValueError as e:
        raise fail(f"--from-states {folder}: its policy {source}: {e}") from None
    args.reference = args.reference or "oracle"
    print(
        f"slice: day {day} of {folder}, {args.stores} stores; replaying {day} days of {source} through the tools"
    )
    try:
        sl = open_slice(
            env,
            snap,
            policy,
            policy_params,
            days=args.days,
            stores=args.stores,
            reference=policies.make(args.reference, env),
            progress=args.progress,
            explicit_news=args.news_text == "explicit",
            code_timeout=args.code_timeout,
        )
    except ValueError as e:
        raise fail(str(e)) from None
    args.source_policy, args.at = source, day
    return env, sl


def slice_settings(args) -> dict:
    """What run.json records of a run from --from-states (its identity)."""
    return {
        "from_states": os.path.abspath(args.from_states),
        "at": args.at,
        "reference": args.reference,
        "source_policy": args.source_policy,
        "stores": args.stores,
        "days": args.days,
    }


def main_policy_slice(args) -> None:
    """``--model policy:NAME --from-states DIR``: the policy through the tools from the slice's day on."""
    from rbjax.agents.runs.loop import prepare_folder
    from rbjax.agents.runs.slices import run_policy_slice

    try:
        prepare_folder(args.out, overwrite=args.overwrite)
    except ValueError as e:
        raise fail(str(e)) from None
    env, sl = open_from_states(args)
    policy, policy_params = make_policy(args, env)
    start = time.perf_counter()
    rec = run_policy_slice(sl, policy, policy_params, out=args.out, progress=args.progress)
    elapsed = time.perf_counter() - start
    print(
        f"{args.model} through the tools, {args.stores} stores x {args.days} days from day {sl.day} "
        f"({elapsed:.1f} s including compilation)"
    )
    save_records(os.path.join(args.out, "records.npz"), rec)
    settings = dict(model=args.model, framework="policy", seed=args.seed)
    settings["tools"] = {"code_timeout": args.code_timeout, "explicit_news": args.news_text == "explicit"}
    settings |= {"grouping": args.grouping, "supplier_attempts": args.supplier_attempts} | slice_settings(
        args
    )
    with atomic_file(os.path.join(args.out, "run.json")) as f:
        json.dump(settings, f, indent=1)
    slice_summary(args, rec, None, sl, f"{args.policy}_stores.csv")


def slice_summary(args, rec, tools, sl, csv: str) -> None:
    """A slice run's results: its main table over the slice's days (no paper row: the paper's runs start at
    the opening), the share of stores alive, and the paired comparison with the reference (printed; and
    slices.csv, paired.png, the per-store CSV and survival.png in --out)."""
    import numpy as np

    from rbjax.runners import metrics, paired

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


def llm_settings(args):
    """(OpenAIChatModel keyword arguments, Rules, Prompts) from the flags; one-line errors."""
    from rbjax.agents.llm.client import Sampling, api_key_from_env
    from rbjax.agents.llm.frameworks import Rules
    from rbjax.agents.llm.prompts import Prompts

    for flag, least in (("concurrency", 1), ("max_turns", 1), ("retries", 0), ("trim_tokens", 1)):
        if getattr(args, flag) < least:
            raise fail(f"--{flag.replace('_', '-')} must be >= {least}, got {getattr(args, flag)}")
    if not args.timeout > 0:
        raise fail(f"--timeout must be > 0 seconds, got {args.timeout}")
    if args.context_tokens is not None and args.context_tokens < 1:
        raise fail(f"--context-tokens must be >= 1, got {args.context_tokens}")
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise fail("--base-url URL is needed for a language model (or set OPENAI_BASE_URL)")
    if not re.match(r"https?://", base_url):
        raise fail(f"--base-url {base_url}: expected an http:// or https:// URL")
    if args.api_key_env and not os.environ.get(args.api_key_env):
        raise fail(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    try:
        prompts = Prompts.load(args.prompts)
    except ValueError as e:
        raise fail(f"--prompts: {e}") from None
    sampling = Sampling() if args.sampling == "paper" else Sampling(None, None, None, None)
    if args.max_tokens is not None:
        sampling.max_tokens = args.max_tokens
    model = dict(
        model=args.model,
        base_url=base_url,
        api_key=api_key_from_env(args.api_key_env),
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        sampling=sampling,
        stream=not args.no_stream,
        context_tokens=args.context_tokens,
    )
    rules = Rules(
        max_turns=args.max_turns,
        protocol=args.protocol,
        max_input_tokens=args.trim_tokens,
        layout=args.layout,
        compact_catalog=args.compact_catalog,
    )
    return model, rules, prompts


def main_llm(args) -> None:
    import jax

    try:
        import openai  # noqa: F401
    except ImportError:
        raise fail("language models need the openai package: pip install 'rbjax[agents]'") from None
    from rbjax.agents.llm.client import OpenAIChatModel
    from rbjax.agents.runs.llm_agents import RunPaused, run_llm_agents

    model_args, rules, prompts = llm_settings(args)
    sl = None
    if args.from_states:
        from rbjax.agents.runs.loop import prepare_folder

        try:  # before the warm-up: a used folder is refused at once
            prepare_folder(args.out, overwrite=args.overwrite)
        except ValueError as e:
            raise fail(str(e)) from None
        env, sl = open_from_states(args)
        params = keys = None
    else:
        env, params = make_env(args)
        keys = jax.random.split(jax.random.key(args.seed), args.stores)
    settings = (
        dict(  # with what run_llm_agents adds, the run's identity (stream and concurrency change nothing)
            model=args.model,
            base_url=model_args["base_url"],
            seed=args.seed,
            grouping=args.grouping,
            supplier_attempts=args.supplier_attempts,
            sampling=dataclasses.asdict(model_args["sampling"]),
            context_tokens=args.context_tokens,
        )
    )
    if sl is not None:
        settings |= slice_settings(args)
    start = time.perf_counter()
    try:
        rec, tools, agents = run_llm_agents(
            env,
            params,
            keys,
            args.framework,
            OpenAIChatModel(**model_args),
            args.out,
            rules=rules,
            prompts=prompts,
            resume=args.resume,
            settings=settings,
            progress_seconds=args.progress_seconds,
            overwrite=args.overwrite,
            explicit_news=args.news_text == "explicit",
            code_timeout=args.code_timeout,
            start=sl,
        )
    except (ValueError, RunPaused) as e:  # a folder that does not fit the run; the endpoint failed
        raise fail(str(e)) from None
    except KeyboardInterrupt:
        then = "continue with --resume" if sl is None else "a slice run cannot be resumed: run it again"
        print(f"rbjax: interrupted; the days finished so far are kept in {args.out}: {then}", file=sys.stderr)
        raise SystemExit(130) from None
    elapsed = time.perf_counter() - start
    print(
        f"{args.model} ({args.framework}) through the tools, {args.stores} stores x {args.days} days "
        f"({elapsed:.1f} s and {sum(a.total_requests for a in agents):,} requests in this process, "
        f"{tools['requests'].sum():,} requests in the run)"
    )
    save_records(os.path.join(args.out, "records.npz"), rec)
    if sl is not None:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", args.model)
        return slice_summary(args, rec, tools, sl, f"{name}_{args.framework}_stores.csv")
    summary(args, rec, tools)


def summary(args, rec, tools) -> None:
    """The main table and the tool and token rates (mean ± sd, 95 % CI, min) beside the paper's run of this
    model and framework when there is one, and the share of stores alive; the per-store CSV and survival.png."""
    import numpy as np

    from rbjax.runners import metrics, paper

    table = metrics.store_metrics(rec).join(tools)
    found = paper.run_row(args.model, args.framework)
    label, reference = found if found else (None, {})
    if not found:
        print(f"paper row: none (the paper has no {args.framework} run of this model)")
    columns = metrics.MAIN_TABLE + ("direct_tools_per_day", "total_tools_per_day", "tokens_per_day")
    print(metrics.format_compare(metrics.compare(table, reference, columns, label=label, days=args.days)))
    alive = np.asarray(rec.alive, bool)
    print(metrics.format_survival(alive))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", args.model)
    with atomic_file(os.path.join(args.out, f"{name}_{args.framework}_stores.csv")) as f:
        table.to_csv(f, index_label="store")
    write_survival(os.path.join(args.out, "survival.png"), {f"{args.model} ({args.framework})": alive})
    print(f"wrote {args.out}")
    bad = metrics.non_finite_stores(table)
    if len(bad):
        raise fail(
            f"{len(bad)} stores ended with a non-finite net worth or count (stores {bad[:8].tolist()})"
        )


def diagnose(args) -> None:
    """``rbjax agents diagnose DIR...``: per run folder run_metrics.csv and four_stage_metrics.csv, a summary
    beside the paper's row and the share of stores alive, one figure of the four stages of every run and one of
    their survival, one line per run (survival_by_run.png beside it: a run's own survival.png is left alone),
    from each run's records.npz (a run without one is named and left out)."""
    import numpy as np

    from rbjax.agents.analysis import diagnostics
    from rbjax.data import CatalogError, load_catalog
    from rbjax.runners import metrics, paper
    from rbjax.state import DayInfo

    try:
        catalog = load_catalog(args.data)
    except CatalogError as e:
        raise fail(f"--data: {e}") from None
    for run in args.runs:  # the CSVs go into the run folders: check them before any work
        if not os.path.isdir(run) or not os.access(run, os.W_OK):
            raise fail(f"{run}: not a writable run folder")
    from rbjax.agents.analysis.replay import check_settings, load_records
    from rbjax.agents.runs.llm_agents import read_run_json

    tables, papers, curves = {}, {}, {}
    for run in args.runs:
        settings = {}
        if os.path.exists(os.path.join(run, "run.json")):
            try:  # a run folder from anyone: its files are data, checked
                settings = check_settings(os.path.join(run, "run.json"), read_run_json(run))
            except ValueError as e:
                raise fail(str(e)) from None
        group = catalog.category_ref19 if settings.get("grouping") == "ref19" else catalog.category
        categories = {u: int(g) for u, g in zip(catalog.upc, group)}
        # the reference's oracle script has no runner making morning calls: for policies they are left out
        runner = not args.no_runner_calls and settings.get("framework") != "policy"
        try:
            table = diagnostics.diagnose(run, categories, runner, args.oracle_convention)
        except ValueError as e:
            raise fail(str(e)) from None
        with atomic_file(os.path.join(run, "four_stage_metrics.csv")) as f:
            table.to_csv(f)
        records = os.path.join(run, "records.npz")
        model, framework = settings.get("model", "?"), settings.get("framework", "?")
        label = f"{os.path.basename(os.path.normpath(run))} ({model}, {framework})"
        alive = None
        if os.path.exists(records):
            try:
                arrays = load_records(run)
            except ValueError as e:
                raise fail(str(e)) from None
            main_table = metrics.store_metrics(
                DayInfo(**{f.name: arrays[f.name] for f in dataclasses.fields(DayInfo)})
            )
            alive = curves[label] = np.asarray(arrays["alive"], bool)
            rates = ["direct_tools_per_day", "total_tools_per_day"] + ["tokens_per_day"] * (
                "tokens_per_day" in table
            )
            with atomic_file(os.path.join(run, "run_metrics.csv")) as f:
                main_table.join(table[rates]).to_csv(f, index_label="store")
        found = paper.four_stage_row(model, framework)
        print(f"{label}: {len(table)} stores; paper row: {found[0] if found else 'none'}")
        print(diagnostics.format_summary(diagnostics.summarize(table, found[1] if found else None)))
        if alive is not None:
            print(metrics.format_survival(alive))
        else:
            print(f"survival: no records.npz in {run}, left out of survival_by_run.png")
        tables[label] = table
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


def replay_run(args) -> None:
    """``rbjax agents replay DIR``: the run played again from its traces with no model
    (``rbjax.agents.analysis.replay``); one line per kind of difference and a non-zero exit, or the summary line."""
    from rbjax.agents.analysis import replay

    if args.report and not os.access(os.path.dirname(os.path.abspath(args.report)), os.W_OK):
        raise fail(f"--report {args.report}: its folder is not writable")
    news = None if args.news_text is None else args.news_text == "explicit"
    try:
        settings = replay.read_settings(args.run)
        result = replay.replay(args.run, data=args.data, rerun_code=args.rerun_code, explicit_news=news)
    except ValueError as e:
        raise fail(str(e)) from None
    for note in result.notes:
        print(f"note: {note}")
    for line in replay.format_mismatches(result.mismatches):
        print(line)
    if args.report:
        content = {
            "run": os.path.abspath(args.run),
            "identical": result.identical,
            "days": result.days,
            "calls": result.calls,
            "code_calls_from_trace": result.code_calls,
            "notes": result.notes,
            "mismatches": [dataclasses.asdict(m) for m in result.mismatches],
        }
        with atomic_file(args.report) as f:
            json.dump(content, f, indent=1)
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
    from rbjax.agents.analysis import diagnostics, replay
    from rbjax.runners import metrics, paper

    out = args.out or args.run
    if not os.path.isdir(args.run):
        raise fail(f"{args.run}: not a folder")
    if not os.path.isdir(out) or not os.access(out, os.W_OK):  # checked before any work
        raise fail(f"{out}: not a writable folder")
    try:
        settings = replay.read_settings(args.run)
        replayed = None
        if not args.traces_only:
            news = None if args.news_text is None else args.news_text == "explicit"
            replayed = replay.replay(args.run, data=args.data, explicit_news=news)
        table, four = replay.rescore(
            args.run,
            engine_columns=not args.traces_only,
            replayed=replayed,
            data=args.data,
            oracle_convention=args.oracle_convention,
            include_runner=False if args.no_runner_calls else None,
        )
    except ValueError as e:
        raise fail(str(e)) from None
    rebuilt = "not rebuilt (--traces-only)" if args.traces_only else "from a replay of the recorded calls"
    print(f"rescore: {', '.join(replay.TRACE_COLUMNS)} and the tool rates from the traces alone")
    print(f"rescore: {', '.join(replay.ENGINE_COLUMNS)}: {rebuilt}")
    problems = []
    if replayed is not None and replayed.mismatches:
        for line in replay.format_mismatches(replayed.mismatches):
            print(f"replay: {line}")
        problems.append(f"the replay differs from the run: {replayed.mismatches[0]}")
    model, framework = str(settings.get("model", "?")), settings.get("framework", "?")
    if framework == "policy":
        oracle = model == "policy:oracle"
        label = "oracle" if oracle else paper.BEST_LLM
        reference = paper.ORACLE if oracle else paper.LLM_ROWS[paper.BEST_LLM]
    else:
        label, reference = paper.run_row(model, framework) or (None, {})
    columns = metrics.MAIN_TABLE + tuple(c for c in replay.TOOL_COLUMNS[:3] if c in table)
    cmp = metrics.compare(table, reference, columns, label=label, days=settings["days"])
    print(metrics.format_compare(cmp))
    found = paper.four_stage_row(model, framework)
    print(f"four stages: {len(four)} stores; paper row: {found[0] if found else 'none'}")
    print(diagnostics.format_summary(diagnostics.summarize(four, found[1] if found else None)))
    written = {}
    for name, frame in (("rescored_stores.csv", table), ("rescored_four_stage_metrics.csv", four)):
        written[name] = os.path.join(out, name)
        with atomic_file(written[name]) as f:
            frame.to_csv(f, index_label="store")
    print(f"wrote {written['rescored_stores.csv']} and {written['rescored_four_stage_metrics.csv']}")
    previous = (
        (replay.run_csv(args.run, settings), table),
        (os.path.join(args.run, "four_stage_metrics.csv"), four),
    )
    for path, frame in previous:
        if path is None or not os.path.exists(path):
            continue
        lines = replay.compare_tables(frame, path)
        print(
            f"{os.path.basename(path)}: "
            + ("rescored identically" if not lines else f"{len(lines)} columns differ")
        )
        for line in lines:
            print(f"  {line}")
        if lines:
            problems.append(f"{os.path.basename(path)} differs: {lines[0]}")
    if problems:
        more = f" (and {len(problems) - 1} more above)" if len(problems) > 1 else ""
        raise fail(f"rescore of {args.run}: {problems[0]}{more}")


def add(sub) -> None:
    from rbjax.agents.llm.frameworks import FRAMEWORKS
    from rbjax.cli.common import add_env_flags, command
    from rbjax.policies import NAMES

    p = sub.add_parser("agents", help="run stores through the RetailBench agent tools")
    cmd = p.add_subparsers(dest="agents_command", required=True)
    doc = "agents run the stores through the tools; traces and the main table"
    r = command(cmd, "run", help=doc, description=doc)
    r.add_argument(
        "--model",
        required=True,
        help="a model name served at --base-url, or policy:NAME (an rbjax policy driven through the tools)",
    )
    r.add_argument(
        "--stores",
        type=int,
        default=None,
        help="stores run, each by its own agent (default: 8; with --from-states: the snapshot's stores)",
    )
    r.add_argument("--out", required=True, help="folder for the traces, records.npz and the per-store CSV")
    r.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run --out holds (its files only) instead of refusing",
    )
    llm = r.add_argument_group("language models")
    llm.add_argument(
        "--framework", choices=FRAMEWORKS, default="react", help="the agent framework of the paper"
    )
    llm.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)"
    )
    llm.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the key (default: OPENAI_API_KEY, API_KEY, OPENROUTER_API_KEY, "
        "DASHSCOPE_API_KEY; a local server needs none)",
    )
    llm.add_argument("--concurrency", type=int, default=32, help="model requests in flight at once")
    llm.add_argument(
        "--protocol", choices=["text", "native"], default="text", help="tool calls as text or native"
    )
    llm.add_argument("--max-turns", type=int, default=50, help="model turns per day")
    llm.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per model request, stream included"
    )
    llm.add_argument("--retries", type=int, default=3, help="retries of a failed request (408/409/429/5xx)")
    llm.add_argument(
        "--sampling", choices=["paper", "server"], default="paper", help="the paper's settings or none"
    )
    llm.add_argument("--max-tokens", type=int, default=None, help="override the answer length limit")
    llm.add_argument(
        "--prompts", default=None, metavar="JSON", help="prompt texts to override (rbjax.agents.llm.prompts)"
    )
    llm.add_argument(
        "--no-stream", action="store_true", help="ask for whole replies instead of streamed ones"
    )
    llm.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        metavar="N",
        help="the endpoint's context: a longer prompt is an endpoint failure, never sent",
    )
    llm.add_argument(
        "--trim-tokens",
        type=int,
        default=50_000,
        metavar="N",
        help="drop the day's oldest turns once a prompt exceeded N tokens",
    )
    llm.add_argument(
        "--compact-catalog",
        action="store_true",
        help="the day message's catalogue without field names, descriptions cut: a third of its text",
    )
    llm.add_argument(
        "--layout",
        choices=["cache_friendly", "reference"],
        default="cache_friendly",
        help="the day message before the turn history (a prefix cache keeps it) or after it, as the paper's runs",
    )
    llm.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoints")
    llm.add_argument("--progress-seconds", type=float, default=30.0, help="progress line every N seconds")
    pol = r.add_argument_group("rbjax policies")
    pol.add_argument("--checkpoint", default=None, help="run folder of `rbjax train ppo` (policy:ppo)")
    pol.add_argument("--greedy", action="store_true", help="policy:ppo: the most likely action")
    pol.add_argument("--progress", type=int, default=30, help="progress line every N days (0: none)")
    r.add_argument(
        "--news-text",
        choices=["vague", "explicit"],
        default="vague",
        help="explicit: headlines tell the strength",
    )
    r.add_argument("--code-timeout", type=float, default=30.0, help="seconds an execute_code call may run")
    sl = r.add_argument_group("task slices (an agent takes over stores mid-episode)")
    sl.add_argument(
        "--from-states",
        default=None,
        metavar="DIR",
        help="start from a snapshot of `rbjax run --save-states DIR`: its first --stores stores, brought to "
        "day --at by replaying the slices' policy through the tools, for --days days (default: to the "
        "horizon), beside --reference from the same state with the same random numbers",
    )
    sl.add_argument(
        "--at",
        default=None,
        metavar="D",
        help="--from-states: the snapshot's day (needed when DIR has several)",
    )
    sl.add_argument(
        "--reference",
        choices=[n for n in NAMES if n != "ppo"],
        default=None,
        help="--from-states: the policy the agent's decisions and results are compared with (default: oracle)",
    )
    add_env_flags(r)
    # given or not: --from-states takes these from the slices' run, a fresh run from FRESH
    r.set_defaults(func=main, days=None, grouping=None, supplier_attempts=None)
    doc = "the paper's four-stage diagnostics of agent runs; CSVs and a figure"
    d = command(cmd, "diagnose", help=doc, description=doc)
    d.add_argument("runs", nargs="+", metavar="DIR", help="folders written by `rbjax agents run`")
    d.add_argument(
        "--out",
        default=None,
        help="folder for four_stages.png and survival_by_run.png (default: the first DIR)",
    )
    d.add_argument(
        "--oracle-convention",
        action="store_true",
        help="query depth 1 and missing evidence 0 (the paper's oracle)",
    )
    d.add_argument(
        "--no-runner-calls",
        action="store_true",
        help="leave the runner's morning views out (always for policy runs: the reference's oracle has no runner)",
    )
    d.add_argument("--data", default=None, help="catalogue folder (default: the shipped catalogue)")
    d.set_defaults(func=diagnose)
    doc = "play a run again from its traces, no model, and check its records and tool results"
    rp = command(cmd, "replay", help=doc, description=doc)
    rp.add_argument("run", metavar="DIR", help="a folder written by `rbjax agents run`")
    rp.add_argument(
        "--rerun-code",
        action="store_true",
        help="run execute_code snippets again in the sandbox (default: replay the calls they made, "
        "their output taken from the trace)",
    )
    rp.add_argument("--report", default=None, metavar="FILE", help="also write the differences as JSON")
    doc = "the main table and the four stages rebuilt from a run's traces; rescored CSVs"
    rs = command(cmd, "rescore", help=doc, description=doc)
    rs.add_argument("run", metavar="DIR", help="a folder written by `rbjax agents run`")
    rs.add_argument("--out", default=None, help="folder for the rescored CSVs (default: DIR)")
    rs.add_argument(
        "--traces-only",
        action="store_true",
        help="no replay: leave out the columns only the engine counts (supplier ranks, refused lines, ...)",
    )
    rs.add_argument(
        "--oracle-convention", action="store_true", help="as `agents diagnose --oracle-convention`"
    )
    rs.add_argument("--no-runner-calls", action="store_true", help="as `agents diagnose --no-runner-calls`")
    for p in (rp, rs):
        p.add_argument(
            "--news-text",
            choices=["vague", "explicit"],
            default=None,
            help="the run's news texts (default: run.json's; a policy run's records none: vague)",
        )
        p.add_argument("--data", default=None, help="catalogue folder (default: the shipped catalogue)")
    rp.set_defaults(func=replay_run)
    rs.set_defaults(func=rescore_run)

"""``rbjax agents``: its subcommands' flags. ``run`` (``rbjax.cli.agents_run``) runs stores through the
RetailBench tools by an rbjax policy or a language model; ``diagnose``, ``replay`` and ``rescore``
(``rbjax.cli.agents_analysis``) analyse finished run folders.
"""

from __future__ import annotations

from rbjax.cli.agents_analysis import diagnose, replay_run, rescore_run
from rbjax.cli.agents_run import FRESH, main, model_policy, summary
from rbjax.cli.common import CHECKPOINT_HELP, add_env_flags, add_greedy_flag, command

__all__ = ["FRESH", "add", "diagnose", "main", "model_policy", "replay_run", "rescore_run", "summary"]


def add(sub) -> None:
    """``rbjax agents`` and its subcommands, in the order ``--help`` lists them."""
    p = sub.add_parser("agents", help="run stores through the RetailBench agent tools")
    cmd = p.add_subparsers(dest="agents_command", required=True)
    add_run(cmd)
    add_diagnose(cmd)
    add_replay(cmd)
    add_rescore(cmd)


def add_run(cmd) -> None:
    """``rbjax agents run``: the run's flags, then those of language models, rbjax policies, the tools, task
    slices and the env."""
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
    _language_model_flags(r)
    _policy_flags(r)
    r.add_argument(
        "--news-text",
        choices=["vague", "explicit"],
        default="vague",
        help="explicit: headlines tell the strength",
    )
    r.add_argument("--code-timeout", type=float, default=30.0, help="seconds an execute_code call may run")
    r.add_argument(
        "--ceiling",
        action="store_true",
        help="then the agents' share of the agent's ceiling (plan_obs) and of the oracle on the same stores and "
        "keys, as `agents diagnose --ceiling` (fresh stores only)",
    )
    _slice_flags(r)
    add_env_flags(r)
    # given or not: --from-states takes these from the slices' run, a fresh run from FRESH
    r.set_defaults(func=main, days=None, grouping=None, supplier_attempts=None)


def _language_model_flags(r) -> None:
    from rbjax.agents.llm.frameworks import FRAMEWORKS

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


def _policy_flags(r) -> None:
    pol = r.add_argument_group("rbjax policies")
    pol.add_argument("--checkpoint", default=None, help=CHECKPOINT_HELP)
    add_greedy_flag(pol)
    pol.add_argument("--progress", type=int, default=30, help="progress line every N days (0: none)")


def _slice_flags(r) -> None:
    from rbjax.policies import NAMES

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
        "--tasks",
        default=None,
        metavar="FILE",
        help="run the tasks of a tasks file (`rbjax lm tasks`): one --from-states run of the tasks' stores per "
        "snapshot day and horizon, in a folder of --out each, and tasks.csv with every task's gain and "
        "rewards (as a session scores it); instead of --from-states, --at, --stores, --days and --reference",
    )
    sl.add_argument(
        "--reference",
        choices=NAMES,
        default=None,
        help="--from-states: the policy the agent's decisions and results are compared with (default: oracle)",
    )
    sl.add_argument(
        "--save-states",
        default=None,
        metavar="DIR",
        help="a fresh run: write every store's state and tool history after every --every days into DIR "
        "(a slices folder: `rbjax lm tasks --from-states DIR` makes tasks from where the agents took the stores)",
    )
    sl.add_argument("--every", type=int, default=30, help="--save-states: days between snapshots")


def add_diagnose(cmd) -> None:
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
    d.add_argument(
        "--ceiling",
        action="store_true",
        help="also the agents' net worth as a share of the agent's ceiling (plan_obs, which sees what the tools "
        "show) and of the oracle, on each run's stores and keys: ceiling.csv (runs the planner: about 13 s a "
        "store per 180 days on 2 cores)",
    )
    d.set_defaults(func=diagnose)


def add_replay(cmd) -> None:
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
    _run_data_flags(rp)
    rp.set_defaults(func=replay_run)


def add_rescore(cmd) -> None:
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
    _run_data_flags(rs)
    rs.set_defaults(func=rescore_run)


def _run_data_flags(p) -> None:
    """What replay and rescore need besides the run folder: its news texts and catalogue."""
    p.add_argument(
        "--news-text",
        choices=["vague", "explicit"],
        default=None,
        help="the run's news texts (default: run.json's; a policy run's records none: vague)",
    )
    p.add_argument("--data", default=None, help="catalogue folder (default: the shipped catalogue)")

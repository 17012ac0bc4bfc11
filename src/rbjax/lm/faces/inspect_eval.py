"""An Inspect (``inspect-ai`` 0.3.285) face of ``rbjax.lm``: RetailBench as an Inspect eval, ``rbjax/retail``.

``inspect eval rbjax/retail -T tasks=tasks.jsonl --model ...`` plays the tasks of a tasks file (``rbjax lm
tasks``), one sample per task, each scored with its session's reward (``rbjax.lm.rewards``);
``inspect eval rbjax/retail -T stores=N -T days=180 -T seed=S --model ...`` plays N stores from their
opening day to the horizon or bankruptcy, RetailBench's own protocol, each scored with the paper's
main-table metrics (``rbjax.results.metrics.MAIN_TABLE`` and ``survived``), the stores of ``rbjax agents run
--stores N --days D --seed S``; with ``-T ceiling=true`` also its share of the agent's ceiling (``plan_obs``, which
sees only what the tools show) and of the oracle on the same store and key, as ``agents run --ceiling``.

A sample's store is an ``rbjax.lm`` session of one ``SessionPool`` that every sample of the process shares, so
one batched engine step ends the day of every store waiting on it (``--max-samples`` sets how many stores
play at once; ``-T slots=N`` the pool's size, which should be at least that). The agent is Inspect's own
``react()`` (no submit tool) with the 21 tools bound to the sample's store, rbjax's system prompt and day
message (``rbjax.agents.llm.prompts``, ReAct), and the day rules of ``rbjax agents run``
(``rbjax.agents.llm.frameworks``):

- each morning the runner's views are issued and the day's message is sent; with ``memory="day"`` (the
  default, as ``agents run``) the conversation restarts each day from the system prompt, a slice's task
  prompt (a full episode has none: its requests are ``agents run --protocol native``'s) and the day's
  message; ``memory="episode"`` keeps it;
- ``end_today`` ends the day; the calls after it in the same reply are not run;
- a turn without a successful call (no tool call, or only failed ones) counts as invalid, and a turn without
  any tool call is answered with rbjax's ``no_call`` nudge; after ``invalid_turns`` invalid turns in a row, or
  ``max_turns`` turns in a day, the runner ends the day itself; so a model that never calls a tool still
  plays every day (and makes no decision);
- the episode ends at the horizon or bankruptcy; a sample stopped early by an Inspect limit is played to its
  end with no new decisions (``Session.afinish``), as every session is, and scored.

A tool's text and errors are the benchmark's (``StoreTools``; ``execute_code`` runs in its sandbox). One
difference from ``agents run``: Inspect checks a call's arguments against the tool's JSON schema before
running it, so arguments of the wrong type, missing or unknown get Inspect's parsing error and never reach
the store (``agents run`` shows the schemas without enforcing them). A failed model call (a dead endpoint, a
refused request) is the sample's error, never a score.

Each sample's metadata (and its score's) holds the session's ``info()`` (task id, days played and decided,
gain, reward, daily net-worth changes, each decided day's credit ``turn_rewards``) and the turns: days ended
by the model and by the runner, turns, tool calls.

Only this module, ``inspect_pool``, ``inspect_scores`` and ``inspect_registry`` import Inspect (``pip install
'rbjax[inspect]'``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

from inspect_ai import Task, task
from inspect_ai._util.error import PrerequisiteError
from inspect_ai.agent import AgentState, as_solver, react
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.tool import Tool, ToolDef, ToolParams
from inspect_ai.util import LimitExceededError, store_as

from rbjax.agents.llm.frameworks import Rules
from rbjax.agents.llm.prompts import Prompts, catalog_text
from rbjax.agents.tools.specs import TOOL_NAMES, TOOL_SPECS, describe
from rbjax.config import GROUPINGS
from rbjax.counts import need_count
from rbjax.env import EnvOptions
from rbjax.lm.faces.inspect_pool import EPISODE, shared_pool
from rbjax.lm.faces.inspect_scores import RetailResult, episode_metrics, session_reward
from rbjax.results.metrics import MAIN_TABLE

MAX_RETRIES = (
    2  # a failed model request is tried 3 times in all (Inspect's backoff: about 10 s; docs/inspect.md)
)
MEMORIES = ("day", "episode")
PARAMETERS = (  # retail's -T parameters
    "tasks", "stores", "days", "seed", "grouping", "supplier_attempts", "data", "slots", "reward", "max_turns",
    "invalid_turns", "memory", "prompts", "compact_catalog", "code_timeout", "explicit_news", "max_retries",
    "ceiling",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------- the task
@task
def retail(
    tasks: str | None = None,
    stores: int | None = None,
    days: int = EnvOptions.days,
    seed: int = 0,
    grouping: str = EnvOptions.grouping,
    supplier_attempts: int = EnvOptions.supplier_attempts,
    data: str | None = EnvOptions.data,
    slots: int = 64,
    reward: str = "relative",
    max_turns: int = 50,
    invalid_turns: int = 5,
    memory: str = "day",
    prompts: str | None = None,
    compact_catalog: bool = False,
    code_timeout: float | None = None,
    explicit_news: bool = False,
    solver: Solver | None = None,
    max_retries: int = MAX_RETRIES,
    ceiling: bool = False,
    **unknown,
) -> Task:
    """RetailBench on rbjax: the tasks of the tasks file ``tasks`` (slices), or ``stores`` stores for ``days``
    days from their opening (full episodes, keys from ``seed``, the env of ``grouping``,
    ``supplier_attempts`` and ``data`` as ``rbjax agents run``'s flags). slots: the shared pool's stores
    (samples beyond it wait for a free one); reward: the slices' reward kind (``rbjax.lm.rewards.KINDS``);
    max_turns, invalid_turns: the day's limits (``Rules``); memory: "day" or "episode" (the module's
    docstring); prompts: a JSON file of prompt overrides (``Prompts.load``); compact_catalog: the day
    message's short catalogue; code_timeout, explicit_news: the tools' options (``agents run``'s
    ``--code-timeout``, ``--news-text explicit``); solver: another agent instead of ``retail_agent``.
    max_retries: the model API's retries of a failed request (Inspect's own; ``--max-retries`` overrides it), so
    that a dead endpoint fails each sample within seconds (docs/inspect.md), not after Inspect's unlimited
    retries. ceiling: full episodes also score their share of ``plan_obs`` and of the oracle (their rollouts on
    the same stores and keys, played in a thread while the agents play: about 12 s a store per 180 days on 2
    cores). Every argument is checked before any sample starts: a bad or unknown one is a
    ``TaskArgumentError`` (a ``ValueError``, and Inspect's ``PrerequisiteError``: one line, no traceback)
    naming ``-T NAME``."""
    if set(unknown) - {"model"}:  # Inspect passes every -T to a task that takes **kwargs, and its model
        name, known = sorted(set(unknown) - {"model"})[0], ", ".join(PARAMETERS)
        raise TaskArgumentError(f"-T {name}: rbjax/retail has no such parameter (its parameters: {known})")
    with argument("max_retries", max_retries):
        need_count("max_retries", max_retries + 1, whole=True)  # 0 or more
    config = GenerateConfig(max_retries=int(max_retries))
    with argument("code_timeout", code_timeout):
        options = tool_options(code_timeout, explicit_news)
    if (tasks is None) == (stores is None):
        raise TaskArgumentError(
            "give either -T tasks=FILE (slices) or -T stores=N (full episodes), not both or neither"
        )
    for name, value in (("max_turns", max_turns), ("invalid_turns", invalid_turns), ("slots", slots)):
        with argument(name, value):
            need_count(name, value, whole=True)
    if memory not in MEMORIES:
        raise TaskArgumentError(f"-T memory={memory!r}: must be one of {', '.join(MEMORIES)}")
    with argument("prompts", prompts):
        agent = solver or retail_agent(max_turns, invalid_turns, memory, prompts, compact_catalog)
    if tasks is not None:
        from rbjax.lm.rewards import check_kind

        with argument("reward", reward):
            check_kind(reward)
        pool = dict(slots=slots, reward=reward, **options)
        if ceiling:
            raise TaskArgumentError(
                "-T ceiling is for full episodes (-T stores=N): a slice has its own reward"
            )
        with argument("tasks", tasks):
            dataset = slice_dataset(tasks, pool)
        return Task(dataset=dataset, solver=agent, scorer=session_reward(), config=config)
    for name, value in (("stores", stores), ("days", days), ("supplier_attempts", supplier_attempts)):
        with argument(name, value):
            need_count(name, value, whole=True)
    with argument("seed", seed):
        need_count("seed", seed + 1, whole=True)  # 0 or more
    env = dict(days=days, seed=seed, grouping=grouping, supplier_attempts=supplier_attempts, data=data)
    if grouping not in GROUPINGS:
        raise TaskArgumentError(f"-T grouping={grouping!r}: must be one of {', '.join(GROUPINGS)}")
    with argument("data", data):
        dataset = episode_dataset(stores, env, dict(slots=slots, **options), bool(ceiling))
    return Task(dataset=dataset, solver=agent, scorer=episode_metrics(), config=config)


class TaskArgumentError(PrerequisiteError, ValueError):
    """A ``-T`` argument of ``rbjax/retail`` that does not fit: Inspect prints it as one line, with no traceback
    (a ``PrerequisiteError``), and Python callers catch a ``ValueError``."""

    def __init__(self, message: str):
        PrerequisiteError.__init__(self, message)
        ValueError.__init__(self, message)

    def __str__(self) -> str:
        return str(self.message)


@contextlib.contextmanager
def argument(name: str, value):
    """Turn a ``ValueError`` (or ``TypeError``) raised while checking or using argument ``name`` into a
    ``TaskArgumentError`` naming ``-T NAME=VALUE``."""
    try:
        yield
    except TaskArgumentError:
        raise
    except (ValueError, TypeError) as e:
        raise TaskArgumentError(f"-T {name}={value!r}: {e}"[:400]) from None


def tool_options(code_timeout: float | None, explicit_news: bool) -> dict:
    """The ``StoreTools`` options of the task's arguments (what ``agents run``'s flags set): {explicit_news,
    code_timeout (when given)}. ValueError for a code_timeout not > 0."""
    options = {"explicit_news": bool(explicit_news)}
    if code_timeout is not None:
        if not code_timeout > 0:
            raise ValueError(f"code_timeout must be > 0 seconds, got {code_timeout!r}")
        options["code_timeout"] = float(code_timeout)
    return options


def slice_dataset(path: str, pool: dict) -> MemoryDataset:
    """One sample per task of the tasks file ``path`` (``read_tasks``): its id, its prompt, and in its metadata
    the task's row and ``pool`` (the ``SessionPool`` options)."""
    from rbjax.lm.tasks import read_tasks

    samples = [
        Sample(
            id=t.id,
            input=[ChatMessageUser(content=m["content"]) for m in t.prompt],
            metadata={"kind": "slice", "task": t.to_row(), "pool": pool},
        )
        for t in read_tasks(path)
    ]
    return MemoryDataset(samples, name=os.path.basename(path))


def episode_dataset(stores: int, env: dict, pool: dict, ceiling: bool = False) -> MemoryDataset:
    """One sample per store of a full-episode run of ``env`` (``episode_start``'s arguments); the store's task
    is made when its pool opens. Metadata: the store, ``env``, ``pool`` (the ``SessionPool`` options) and
    ``ceiling`` (score the share of the agent's ceiling)."""
    from rbjax.env import OptionError
    from rbjax.lm.tasks import task_id
    from rbjax.programs import env_and_params

    days, seed = env["days"], env["seed"]
    try:
        made, params = env_and_params(
            EnvOptions(env["data"], env["grouping"], env["supplier_attempts"], days)
        )
    except OptionError as e:
        raise ValueError(str(e)) from None
    date = made.catalog.date_of(int(params.open_day)).isoformat()
    samples = [
        Sample(
            id=task_id(EPISODE, seed, 0, s, days),
            input=f"Store {s} from its opening day ({date}) for {days} days, seed {seed}.",
            metadata={
                "kind": "episode",
                **dict(store=s, stores=stores, env=env, pool=pool, ceiling=ceiling),
            },
        )
        for s in range(stores)
    ]
    return MemoryDataset(samples, name=f"episodes-s{seed}-n{days}")


# ---------------------------------------------------------------------------------------------- a sample
@dataclasses.dataclass
class Game:
    """One sample's store: its session, the day rules and the turn counts."""

    session: object
    rules: Rules
    prompts: Prompts
    system: str
    catalog: str
    intro: list
    memory: str
    turns: int = 0  # today's
    invalid: int = 0  # invalid turns in a row today
    ok: bool = False  # a call of this turn succeeded
    ended: bool = False  # this turn's end_today ended the day
    model_days: int = 0
    runner_days: int = 0
    all_turns: int = 0
    tool_calls: int = 0

    # ------------------------------------------------------------------ messages
    def day_messages(self) -> list:
        """The conversation a day starts with: the system prompt, ``intro`` (a slice's task prompt) and the
        day's message (``Prompts.react_day`` with the runner's two morning views)."""
        status, _, shelf = self.session.morning.partition("\n")  # view_funds_and_date's text is one line
        fields = self.prompts.day_fields(self.session.day + 1, status, shelf, self.catalog)
        day = self.prompts.react_day.format(**fields)
        return [ChatMessageSystem(content=self.system), *self.intro, ChatMessageUser(content=day)]

    # ------------------------------------------------------------------ tools
    async def call(self, name: str, arguments: dict) -> str:
        """A model's tool call on the store: the tool's text; after this turn's ``end_today``, not run."""
        if self.ended or self.session.done:
            return "Not run: end_today ended the day earlier in this reply."
        self.tool_calls += 1
        if name == "end_today":
            text = await self.session.aend_today()
            self.ended, self.ok = True, True
            self.model_days += 1
            return text
        text = await self.session.acall(name, arguments)
        self.ok |= bool(self.session.last_ok)
        return text

    def tools(self) -> list[Tool]:
        """The 21 tools bound to this store: the benchmark's names, descriptions and schemas, run in the
        order called, their texts uncut."""
        return [self._tool(spec["name"], describe(spec), spec["parameters"]) for spec in TOOL_SPECS]

    def _tool(self, name: str, description: str, parameters: dict) -> Tool:
        async def execute(**kwargs: Any) -> str:
            return await self.call(name, kwargs)

        params = ToolParams.model_validate(described(parameters))
        return ToolDef(
            execute, name=name, description=description, parameters=params, parallel=False, max_output=0
        ).as_tool()

    # ------------------------------------------------------------------ turns
    async def on_continue(self, state: AgentState) -> bool | str | AgentState:
        """react's hook after every turn: stop when the episode is over; a new day when the model or the
        runner ended this one; else the no-call nudge or go on."""
        self.turns, self.all_turns = self.turns + 1, self.all_turns + 1
        ended, ok = self.ended, self.ok
        self.ended = self.ok = False
        if not ended and not self.session.done:
            self.invalid = 0 if ok else self.invalid + 1
            if self.invalid < self.rules.invalid_turns and self.turns < self.rules.max_turns:
                if state.output.message.tool_calls:
                    return True
                return self.prompts.no_call
            await self.session.aend_today()  # the runner ends the day (agents run's forced end)
            self.runner_days += 1
        if self.session.done:
            return False
        self.turns = self.invalid = 0
        if self.memory == "day":
            return AgentState(messages=self.day_messages())
        return self.day_messages()[-1].text

    def result(self) -> dict:
        """The session's ``info()`` and the turns."""
        return self.session.info() | {
            "model_ended_days": self.model_days,
            "runner_ended_days": self.runner_days,
            "turns": self.all_turns,
            "tool_calls": self.tool_calls,
        }

    def metrics(self) -> dict:
        """A full episode's main-table metrics (``metrics.store_metrics`` of its records) and ``survived``."""
        from rbjax.agents.runs.loop import stack_records
        from rbjax.results import metrics

        horizon = int(self.session.pool.params.horizon)
        row = metrics.store_metrics(stack_records({0: self.session.records}, horizon)).iloc[0]
        out = {m: float(row[m]) for m in MAIN_TABLE}
        out["survived"] = float(self.session.reason == "horizon")
        return out


def described(parameters: dict) -> dict:
    """A tool's JSON-schema ``parameters`` with a description on every argument (Inspect requires one; the
    benchmark's schemas leave the obvious ones out): the argument's name in words."""
    props = {
        name: {"description": name.replace("_", " "), **schema}
        for name, schema in parameters["properties"].items()
    }
    return {**parameters, "properties": props}


@solver
def retail_agent(
    max_turns: int = 50,
    invalid_turns: int = 5,
    memory: str = "day",
    prompts: str | None = None,
    compact_catalog: bool = False,
) -> Solver:
    """Inspect's ``react()`` on the sample's store (see the module's docstring): opens the sample's session
    in the shared pool, plays it, leaves ``RetailResult`` for the scorer and frees the slot. A model error
    propagates (the sample's error, no score); an Inspect limit ends the decisions and the episode is played
    to its end without them, then scored."""
    rules = Rules(max_turns=max_turns, invalid_turns=invalid_turns, protocol="native")
    if memory not in MEMORIES:
        raise ValueError(f"memory must be one of {MEMORIES}, got {memory!r}")
    texts = Prompts.load(prompts)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        shared, lm_task = await shared_pool(state)
        pool = shared.pool
        async with shared.slots():
            session = await pool.aopen(lm_task)
            try:
                return await play(session, state, generate)
            finally:
                pool.close(session)

    async def play(session, state: TaskState, generate: Generate) -> TaskState:
        pool = session.pool
        game = Game(
            session,
            rules,
            texts,
            texts.system("react", float(pool.params.rent), TOOL_NAMES, native=True),
            catalog_text(pool.env.catalog, texts.catalog_head, compact=compact_catalog),
            intro(state),
            memory,
        )
        state.messages = game.day_messages()
        agent = react(prompt=None, tools=game.tools(), submit=False, on_continue=game.on_continue)
        try:
            state = await as_solver(agent)(state, generate)
        except LimitExceededError:
            await finish(game, state)
            raise
        await finish(game, state)
        return state

    return solve


def intro(state: TaskState) -> list:
    """What a day's conversation starts with after the system prompt: a slice's task prompt (its days, its
    continuation, how it is scored); nothing for a full episode, whose requests are ``agents run``'s."""
    if state.metadata.get("kind") != "slice":
        return []
    return [m for m in state.messages if isinstance(m, ChatMessageUser)]


async def finish(game: Game, state: TaskState) -> None:
    """Play the rest of the episode with no new decisions, then leave its result in the sample's store and
    metadata."""
    await game.session.afinish()
    result = store_as(RetailResult)
    result.info = game.result()
    if state.metadata.get("kind") == "episode":
        result.metrics = game.metrics()
    state.metadata["result"] = result.info

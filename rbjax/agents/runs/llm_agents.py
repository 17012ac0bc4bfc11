"""Language-model agents on many stores at once: one process, one batched engine, one asyncio task per
store, one shared chat model (its semaphore caps the requests in flight).

Per store, in ``OUT/store_{s}/``: ``tool_calls.jsonl`` (every tool call), ``turns.jsonl`` (one record per
model call: phase, day, round, turn, the new messages, usage, parse method, a hash of the request),
``tokens.jsonl`` (per day; reflection tokens apart) and ``checkpoint.npz``, rewritten at every day's end:
the store's engine row, ledger, news slots, framework memory, records so far, and the sizes of its log
files, as data only (arrays and one JSON member, read back with ``allow_pickle=False`` and checked against
the run: a run folder from anyone is never code). ``run.json`` holds the run's identity (``run_identity``;
never the API key). A fresh run refuses a folder that holds a run unless ``overwrite=True``. With
``resume=True`` the identity must match, each store starts from its checkpoint and its logs are cut back to
it, so finished days are not replayed and the results equal an uninterrupted run's. A folder with
``checkpoint.pkl`` files (an older rbjax's pickles) is refused, never read.

When the chat endpoint fails (``InfraError``) a store pauses where it was: its day is not ended, recorded
or checkpointed. The other stores go on; once none can, ``RunPaused`` says why, to be continued by a resume.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import glob
import hashlib
import json
import os
import re

import jax
import numpy as np
import pandas as pd

import rbjax
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.engine.ledger import StoreLedger
from rbjax.agents.llm.client import InfraError, Usage
from rbjax.agents.llm.frameworks import LLMAgent, Rules, request_hash
from rbjax.agents.llm.prompts import Prompts
from rbjax.agents.runs.loop import (
    Progress,
    StorePaused,
    make_stores,
    new_ledger,
    prepare_folder,
    run_async,
    stack_records,
)
from rbjax.agents.tools.trace import TraceWriter, check_tokens, read
from rbjax.runners.record_files import atomic_file
from rbjax.runners.untrusted import (
    STR,
    bad,
    json_object,
    need_array,
    need_dict,
    need_int,
    need_list,
    read_npz,
    shown,
)
from rbjax.state import DayInfo

CHECKPOINT_VERSION = 2  # 1: checkpoint.pkl (a pickle), never read
LOGS = ("tool_calls", "turns", "tokens")
CHECKPOINT = "checkpoint.npz"
OLD_CHECKPOINT = "checkpoint.pkl"  # rbjax before checkpoints were data: never read
CHECKPOINT_FORMAT = "rbjax-agent-checkpoint"


class AgentLog:
    """``turns.jsonl`` and ``tokens.jsonl`` of one store, flushed at every day's end."""

    def __init__(self, folder: str, store: int, resume_at: dict | None = None):
        at = resume_at or {}
        self.store = store
        self.turns = TraceWriter(os.path.join(folder, "turns.jsonl"), at.get("turns"))
        self.tokens = TraceWriter(os.path.join(folder, "tokens.jsonl"), at.get("tokens"))
        self.count = 0  # model calls logged by this process

    def turn(self, agent, phase, messages, new, reply, method, calls, error) -> None:
        self.count += 1
        self._turn(agent, phase, messages, new, reply, method, calls, error)

    def _turn(self, agent, phase, messages, new, reply, method, calls, error) -> None:
        self.turns.write(
            {
                "ts": _now(),
                "store": self.store,
                "day": agent.today.day + 1,
                "phase": phase,
                "round": agent.round,
                "turn": agent.turns,
                "request_messages": len(messages),
                "request_hash": request_hash(messages),
                "new_messages": new,
                "usage": None if reply is None else reply.usage.as_dict(),
                "attempts": None if reply is None else reply.attempts,
                "reasoning_chars": None if reply is None else len(reply.reasoning),
                "parse_method": method,
                "calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
                "error": error,
            }
        )

    def day(self, day, usage: Usage, requests, turns, rounds, reflection, calls: tuple[int, int]) -> None:
        """The day's record: tokens, requests, turns, tool calls (direct, all), Plan-and-Act's rounds, the
        reflection call's tokens."""
        rec = {"store": self.store, "day": day, **usage.as_dict(), "requests": requests, "turns": turns}
        rec["direct_tool_calls"], rec["tool_calls"] = calls
        if rounds:
            rec["rounds"] = rounds
        if reflection is not None:
            rec["reflection"] = reflection.as_dict()
        self.tokens.write(rec)
        self.turns.flush()
        self.tokens.flush()

    def sizes(self) -> dict:
        return {"turns": self.turns.flushed_size(), "tokens": self.tokens.flushed_size()}


class Checkpointed:
    """A ``DayAgent`` that saves its store after every day (``checkpoint.npz``, written atomically)."""

    def __init__(self, agent: LLMAgent, engine: AgentEngine, folder: str, records: list):
        self.agent, self.engine, self.records = agent, engine, records
        self.path = os.path.join(folder, CHECKPOINT)

    async def act(self, store, today):
        return await self.agent.act(store, today)

    async def after_day(self, store, today, result):
        await self.agent.after_day(store, today, result)
        files = {"tool_calls": store.trace.flushed_size(), **self.agent.log.sizes()}
        save_checkpoint(
            self.path,
            {
                "version": CHECKPOINT_VERSION,
                "store": store.store,
                "days": today.day + 1,
                "engine": self.engine.rows.pop(store.store),
                "ledger": store.ledger,
                "news": (store.news_today, store.news_remain),
                "memory": self.agent.state(),
                "records": list(self.records),
                "files": files,
            },
        )


class PauseOnInfra:
    """A store's chat model whose endpoint failures (``InfraError``) pause the store (``StorePaused``): the
    frameworks take any ``ChatError`` as the model's turn, and an endpoint failure must never be one."""

    def __init__(self, model):
        self.model = model

    async def complete(self, messages, tools=None):
        try:
            return await self.model.complete(messages, tools=tools)
        except InfraError as e:
            raise StorePaused(str(e)) from None


class RunPaused(RuntimeError):
    """Stores paused on endpoint failures; the message names the cause and says to resume."""


def save_checkpoint(path: str, content: dict) -> None:
    """Write a store's checkpoint (``Checkpointed.after_day``'s content) as data: an ``.npz`` of arrays (the
    engine row flattened by key path, the ledger's filled rows, the records so far stacked, the news slots'
    remaining days) and one JSON member ``meta`` for the rest; atomically (``atomic_file``)."""
    fields, ledger_arrays = content["ledger"].to_data()
    news_today, news_remain = content["news"]
    arrays = {}
    for part in ("obs", "state"):
        for p, leaf in jax.tree_util.tree_flatten_with_path(content["engine"][part])[0]:
            arrays[f"engine.{part}{jax.tree_util.keystr(p)}"] = np.asarray(leaf)
    arrays["engine.lead"] = np.asarray(content["engine"]["lead"])
    arrays |= {f"ledger.{k}": v for k, v in ledger_arrays.items()}
    if news_remain is not None:
        arrays["news.remain"] = np.asarray(news_remain)
    records = content["records"]
    arrays["records.day"] = np.asarray([day for day, _ in records], np.int32)
    for f in dataclasses.fields(DayInfo):
        arrays[f"records.{f.name}"] = np.stack([np.asarray(getattr(info, f.name)) for _, info in records])
    meta = {
        "format": CHECKPOINT_FORMAT,
        "version": content["version"],
        "store": int(content["store"]),
        "days": int(content["days"]),
        "ledger": fields,
        "news_today": [dict(n) for n in news_today],
        "memory": content["memory"],
        "files": {k: int(v) for k, v in content["files"].items()},
    }
    arrays["meta"] = np.asarray(json.dumps(meta, default=_plain))
    with atomic_file(path, "wb") as f:
        np.savez(f, **arrays)


def _plain(x):
    """numpy scalars in the ledger's orders as Python numbers."""
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not data")


def load_checkpoint(path: str, engine: AgentEngine, store: int) -> dict | None:
    """Store ``store``'s checkpoint, read as untrusted data (``np.load(allow_pickle=False)``, JSON) and checked
    against this run: the engine row against the engine's own state, the ledger against this run's ledger
    shapes, the records against the engine's ``DayInfo``; None when there is none. ValueError (one line)
    naming the file and the field. The content is ``Checkpointed.after_day``'s."""
    if not os.path.exists(path):
        return None
    arrays = read_npz(path, "checkpoint")
    if "meta" not in arrays or arrays["meta"].dtype.kind != "U" or arrays["meta"].shape != ():
        raise ValueError(f"{path}: not a readable checkpoint (no 'meta' entry)")
    meta = json_object(path, arrays.pop("meta"), "checkpoint")
    if meta.get("format") != CHECKPOINT_FORMAT or meta.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"{path}: not a checkpoint of this rbjax version (format {shown(meta.get('format'))}, "
            f"version {shown(meta.get('version'))}; this rbjax writes {CHECKPOINT_FORMAT} {CHECKPOINT_VERSION})"
        )
    horizon = int(engine.params.horizon)
    if need_int(path, "store", meta.get("store")) != store:
        raise bad(path, "store", f"{store} (the store of its folder)", meta.get("store"))
    days = need_int(path, "days", meta.get("days"), 1, horizon)
    size = lambda p, field, x: need_int(p, field, x, 0)  # noqa: E731
    files = need_dict(path, "files", meta.get("files"), dict.fromkeys(LOGS, size))
    strings = lambda p, field, x: need_list(p, field, x, STR)  # noqa: E731
    memory = need_dict(
        path, "memory", meta.get("memory"), {"reflection": STR, "actions": strings, "end_text": STR}
    )
    news_item = {"id": STR, "title": STR, "content": STR, "date": STR}
    news_today = need_list(
        path, "news_today", meta.get("news_today"), lambda p, fd, v: need_dict(p, fd, v, news_item)
    )
    pop = lambda prefix: {k[len(prefix) :]: arrays.pop(k) for k in list(arrays) if k.startswith(prefix)}  # noqa: E731
    engine_arrays, ledger_arrays, record_arrays = pop("engine."), pop("ledger."), pop("records.")
    row = {}
    for part in ("obs", "state"):
        batch = getattr(engine, part)
        flat, treedef = jax.tree_util.tree_flatten_with_path(batch)
        leaves = []
        for p, leaf in flat:
            name = f"{part}{jax.tree_util.keystr(p)}"
            x = need_array(path, f"engine.{name}", engine_arrays.pop(name, None), leaf.shape[1:], leaf.dtype)
            leaves.append(x)
        row[part] = jax.tree_util.tree_unflatten(treedef, leaves)
    row["lead"] = need_array(
        path, "engine.lead", engine_arrays.pop("lead", None), engine.lead.shape[1:], engine.lead.dtype
    )
    remain = arrays.pop("news.remain", None)
    if remain is not None:
        want = engine.host["news"].remain
        remain = need_array(path, "news.remain", remain, want.shape[1:], want.dtype)
    slots = 0 if remain is None else len(remain)  # the news items shown this morning, one a slot
    if len(news_today) != slots:
        raise bad(
            path, "news_today", f"a list of {slots} items (one a news slot)", f"{len(news_today)} items"
        )
    ledger = StoreLedger.from_data(meta.get("ledger"), ledger_arrays, new_ledger(engine), path)
    template = info_template(engine.env)
    n = days
    day = need_array(path, "records.day", record_arrays.pop("day", None), (n,), np.int32)
    if not np.array_equal(day, np.arange(n)):
        raise bad(path, "records.day", f"the days 0..{n - 1}", day.tolist()[:8])
    fields = {}
    for f in dataclasses.fields(DayInfo):
        want = getattr(template, f.name)
        x = need_array(
            path, f"records.{f.name}", record_arrays.pop(f.name, None), (n, *want.shape), want.dtype
        )
        fields[f.name] = x
    records = [(d, DayInfo(**{k: v[d] for k, v in fields.items()})) for d in range(n)]
    left = [f"engine.{k}" for k in engine_arrays] + [f"ledger.{k}" for k in ledger_arrays]
    left += [f"records.{k}" for k in record_arrays] + list(arrays)
    if left:
        raise ValueError(f"{path}: field {sorted(left)[0]!r} is not one this rbjax writes")
    return {
        "version": CHECKPOINT_VERSION,
        "store": store,
        "days": days,
        "engine": row,
        "ledger": ledger,
        "news": ([dict(x) for x in news_today], remain),
        "memory": memory,
        "records": records,
        "files": files,
    }


@functools.cache
def info_template(env) -> DayInfo:
    """One store-day's ``DayInfo`` as ShapeDtypeStructs (traced once per env)."""
    from rbjax.runners.snapshots import _state_template
    from rbjax.state import Action

    params = env.default_params()
    return jax.eval_shape(
        lambda s: env.step(jax.random.key(0), s, Action.noop(s), params)[-1], _state_template(env)
    )


def old_checkpoints(out: str) -> list[str]:
    """The ``checkpoint.pkl`` files of an older rbjax in a run folder (never read: unpickling runs code)."""
    return sorted(glob.glob(os.path.join(glob.escape(out), "store_*", OLD_CHECKPOINT)))


def digest(value) -> str:
    """A short hash of JSON-able values and arrays (prompts, engine configuration, keys)."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(value):
        if isinstance(leaf, (np.ndarray, jax.Array)) or hasattr(leaf, "dtype"):
            if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                leaf = jax.random.key_data(leaf)
            a = np.asarray(leaf)
            h.update(f"{a.dtype}{a.shape}".encode() + a.tobytes())
        else:
            h.update(json.dumps(leaf, sort_keys=True, default=repr).encode())
    return "sha256:" + h.hexdigest()[:16]


def run_identity(env, params, keys, framework, rules, prompts, tool_options, settings=None) -> dict:
    """What makes a run's results: the rbjax version, the framework, stores, days, keys, the engine's
    configuration and parameters, the prompts, the day rules and tool options (hashes where long), and
    the caller's ``settings`` (the CLI: model, base URL, seed, sampling, ...). Saved as ``run.json``."""
    identity = {
        "rbjax_version": rbjax.__version__,
        "framework": framework,
        "stores": int(len(keys)),
        "days": int(params.horizon),
        "keys": digest(keys),
        "engine": digest((repr(env.config), params)),
        "prompts": digest(dataclasses.asdict(prompts)),
        "rules": vars(rules),
        "tools": dict(sorted(tool_options.items())),
        **(settings or {}),
    }
    if "base_url" in identity:  # never a password in a URL
        identity["base_url"] = re.sub(r"//[^/@]*@", "//", str(identity["base_url"]))
    return json.loads(json.dumps(identity, default=repr))


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out |= _flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v}
    return out


def read_run_json(out: str, missing: str = "this folder holds no run to resume (--resume)") -> dict:
    """The identity a run folder holds; one-line errors for a missing (``missing`` says why it matters) or
    unreadable ``run.json``."""
    path = os.path.join(out, "run.json")
    if not os.path.exists(path):
        raise ValueError(f"{path} not found: {missing}")
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable run.json ({e})") from None
    if not isinstance(saved, dict):
        raise ValueError(f"{path}: not a readable run.json (not a JSON object)")
    return saved


RECORDED_ONLY = (
    "base_url",
)  # kept in run.json, not compared: the same model may come back at another address


def check_resume(out: str, identity: dict) -> None:
    """Refuse to resume the run in ``out`` with another identity: one line naming each differing field
    (``RECORDED_ONLY`` fields excepted)."""
    saved, now = _flat(read_run_json(out)), _flat(identity)
    differ = [
        k
        for k in {**saved, **now}
        if k not in RECORDED_ONLY and saved.get(k, "absent") != now.get(k, "absent")
    ]
    if "seed" in differ and "keys" in differ:  # the keys follow from the seed
        differ.remove("keys")
    if differ:
        listed = "; ".join(f"{k} {saved.get(k, 'absent')}, not {now.get(k, 'absent')}" for k in differ)
        raise ValueError(f"--resume: {out} was run with other settings: {listed}")


def run_llm_agents(
    env,
    params,
    keys,
    framework: str,
    model,
    out: str,
    rules: Rules | None = None,
    prompts: Prompts | None = None,
    resume: bool = False,
    settings: dict | None = None,
    progress_seconds: float = 30.0,
    overwrite: bool = False,
    start=None,
    **tool_options,
):
    """Run ``len(keys)`` stores, each by its own ``framework`` agent over the shared ``model`` (a
    ``ChatModel``, or ``fn(store) -> ChatModel``), until their episodes end (``params.horizon`` days).

    start: an ``rbjax.agents.runs.slices.AgentSlice`` (``open_slice``): the agents take over its stores on its day
    and play its days (``params`` and ``keys`` are then the slice's: pass None); the records are [S, days]
    from that day on, and the slice counts each morning's decisions that differ from its reference's
    (``AgentSlice.compare``). Such a run cannot be resumed.

    settings: what identifies the run besides what this function sees (``run_identity``); a resumed run
    must match it. overwrite: a fresh run replaces the run in ``out`` (else it refuses a used folder).
    Returns (DayInfo records [B, horizon], the per-store tool and token table, the agents). Raises
    ``RunPaused`` when stores paused on endpoint failures, ``ValueError`` (one line) for a folder that
    does not fit.
    """
    rules, prompts = rules or Rules(), prompts or Prompts()
    if start is not None:
        if resume:
            raise ValueError("--resume: a run started from a slice (--from-states) cannot be resumed")
        params, keys = start.params, start.keys
        settings = {"from_states": True, "at": start.day, "days": start.days, **(settings or {})}
    identity = run_identity(env, params, keys, framework, rules, prompts, tool_options, settings)
    if resume:
        old = old_checkpoints(out)  # before the identity: an older rbjax's run.json differs in its version
        if old:
            raise ValueError(
                f"--resume: {out} holds checkpoints of an older rbjax ({os.path.relpath(old[0], out)}"
                f"{f' and {len(old) - 1} more' if len(old) > 1 else ''}, a format that can run code when "
                "read): they are not read; start the run again with --overwrite"
            )
        check_resume(out, identity)
    prepare_folder(out, resume, overwrite, resumable_run=start is None)
    if not resume:
        with atomic_file(os.path.join(out, "run.json")) as f:
            json.dump(identity, f, indent=1)
    engine = AgentEngine(env, params, keys) if start is None else start.engine
    engine.keep_rows = True
    saved = {}
    if resume:
        for s in range(engine.B):
            content = load_checkpoint(os.path.join(out, f"store_{s}", CHECKPOINT), engine, s)
            if content is not None:
                saved[s] = content
        engine.set_rows({s: c["engine"] for s, c in saved.items()})
    if start is None:
        stores = make_stores(
            engine, out, resume_at={s: c["files"]["tool_calls"] for s, c in saved.items()}, **tool_options
        )
    else:
        stores = start.stores
        start.attach_traces(out)
    records = {s.store: [] for s in stores}
    agents = {}
    for store in stores:
        s = store.store
        folder = os.path.join(out, f"store_{s}")
        log = AgentLog(folder, s, saved[s]["files"] if s in saved else None)
        chat = model(s) if callable(model) and not hasattr(model, "complete") else model
        agent = LLMAgent(
            framework,
            PauseOnInfra(chat),
            prompts,
            rules,
            env.catalog,
            float(params.initial_funds),
            float(params.rent),
            log,
        )
        if s in saved:
            c = saved[s]
            store.ledger, (store.news_today, store.news_remain) = c["ledger"], c["news"]
            agent.load_state(c["memory"])
            records[s] = list(c["records"])
        agents[s] = Checkpointed(agent, engine, folder, records[s])
    inner = [a.agent for a in agents.values()]
    counter = Progress(
        len(stores),
        0,
        progress_seconds,
        status=lambda: (
            f"this process: {sum(a.log.count for a in inner):,} model calls, "
            f"{sum(a.total_requests for a in inner):,} requests, {sum(a.total_tokens for a in inner):,} "
            f"tokens, {sum(a.total_requests for a in inner) / max(counter.elapsed(), 1e-9):.2f} requests/s"
        ),
        done={s: len(rec) for s, rec in records.items()},
    )
    paused = {}
    stop = None if start is None else start.stop
    asyncio.run(
        run_async(engine, stores, agents, progress=counter, records=records, paused=paused, stop=stop)
    )
    if progress_seconds:
        counter.print()
    if paused:
        message = pause_message(paused, len(stores), getattr(model, "base_url", None))
        if start is not None:
            message = message.replace("continue with --resume", "a slice run cannot be resumed: run it again")
        raise RunPaused(message)
    rec = stack_records(records, int(params.horizon)) if start is None else start.stack(records)
    return rec, tool_token_table(out, len(stores)), inner


def pause_message(paused: dict, stores: int, endpoint: str | None = None) -> str:
    """One line: the endpoint's failure, the paused stores and their days, what to do."""
    days = sorted({day for day, _ in paused.values()})
    on = f"day {days[0]}" if len(days) == 1 else f"days {days[0]}-{days[-1]}"
    cause = paused[min(paused)][1]
    finished = stores - len(paused)
    rest = f", {finished} finished" if finished else ""
    return (
        f"the endpoint {endpoint + ' ' if endpoint else ''}failed: {cause}; "
        f"{len(paused)} of {stores} stores paused on {on}{rest}; "
        "nothing was scored: continue with --resume"
    )


def tool_token_table(out: str, stores: int) -> pd.DataFrame:
    """Per store, from its ``tokens.jsonl``: direct and all tool calls per day, tokens per day (the paper's
    last columns), and the requests sent."""
    rows = []
    for s in range(stores):
        days = read(os.path.join(out, f"store_{s}", "tokens.jsonl"), check=check_tokens)
        n = max(len(days), 1)
        rows.append(
            {
                "direct_tools_per_day": sum(d["direct_tool_calls"] for d in days) / n,
                "total_tools_per_day": sum(d["tool_calls"] for d in days) / n,
                "tokens_per_day": sum(d["total_tokens"] for d in days) / n,
                "requests": sum(d["requests"] for d in days),
            }
        )
    return pd.DataFrame(rows, index=pd.RangeIndex(stores, name="store"))


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

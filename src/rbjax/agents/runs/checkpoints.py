"""A language-model run's checkpoints: ``store_{s}/checkpoint.npz``, rewritten at every day's end
(``Checkpointed``), and read back on ``--resume`` (``load_checkpoints``).

A checkpoint holds the store's engine row, ledger, news slots, framework memory, records so far, and the sizes
of its log files, as data only (arrays and one JSON member, read back with ``allow_pickle=False`` and checked
against the run: a run folder from anyone is never code). A folder with ``checkpoint.pkl`` files (an older
rbjax's pickles) is refused, never read (``refuse_old_checkpoints``).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import jax
import numpy as np

from rbjax import programs
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.engine.ledger import StoreLedger
from rbjax.agents.llm.frameworks import LLMAgent
from rbjax.agents.runs.loop import new_ledger
from rbjax.arguments import ArgumentError
from rbjax.files.record_files import atomic_file
from rbjax.files.untrusted import (
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


class Checkpointed:
    """A ``DayAgent`` that saves its store after every day (``checkpoint.npz``, written atomically)."""

    def __init__(self, agent: LLMAgent, engine: AgentEngine, folder: str, records: list):
        self.agent, self.engine, self.records = agent, engine, records
        self.path = os.path.join(folder, CHECKPOINT)

    async def act(self, store, today):
        """The wrapped agent's day (``DayAgent.act``): why the runner ends the day, or None."""
        return await self.agent.act(store, today)

    async def after_day(self, store, today, result):
        """The wrapped agent's ``after_day``, then the store's checkpoint written (its engine row, ledger, news,
        memory, records and log sizes) so a resumed run starts from the next morning."""
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
    row = engine_row(path, engine, engine_arrays)
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
    records = day_records(path, engine, record_arrays, days)
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


def engine_row(path: str, engine: AgentEngine, arrays: dict) -> dict:
    """The store's engine row of a checkpoint (its ``engine.`` entries, popped from ``arrays``): obs and state
    (pytrees of the engine's own leaves, each [...] of one row) and today's lead draws, each checked."""
    row = {}
    for part in ("obs", "state"):
        flat, treedef = jax.tree_util.tree_flatten_with_path(getattr(engine, part))
        leaves = []
        for p, leaf in flat:
            name = f"{part}{jax.tree_util.keystr(p)}"
            leaves.append(
                need_array(path, f"engine.{name}", arrays.pop(name, None), leaf.shape[1:], leaf.dtype)
            )
        row[part] = jax.tree_util.tree_unflatten(treedef, leaves)
    lead = engine.lead
    row["lead"] = need_array(path, "engine.lead", arrays.pop("lead", None), lead.shape[1:], lead.dtype)
    return row


def day_records(path: str, engine: AgentEngine, arrays: dict, days: int) -> list:
    """[(day, DayInfo)] of a checkpoint's ``days`` days (its ``records.`` entries, popped from ``arrays``), each
    field checked against the engine's ``DayInfo``."""
    template = info_template(engine.env)
    day = need_array(path, "records.day", arrays.pop("day", None), (days,), np.int32)
    if not np.array_equal(day, np.arange(days)):
        raise bad(path, "records.day", f"the days 0..{days - 1}", day.tolist()[:8])
    fields = {}
    for f in dataclasses.fields(DayInfo):
        want = getattr(template, f.name)
        fields[f.name] = need_array(
            path, f"records.{f.name}", arrays.pop(f.name, None), (days, *want.shape), want.dtype
        )
    return [(d, DayInfo(**{k: v[d] for k, v in fields.items()})) for d in range(days)]


def info_template(env) -> DayInfo:
    """One store-day's ``DayInfo`` as ShapeDtypeStructs (traced once per env: ``rbjax.programs``)."""
    from rbjax.files.snapshots import state_template
    from rbjax.state import Action

    def trace() -> DayInfo:
        params = env.default_params()
        step = lambda s: env.step(jax.random.key(0), s, Action.noop(s), params)[-1]  # noqa: E731
        return jax.eval_shape(step, state_template(env))

    return programs.cached("checkpoints.info_template", trace, env)


def old_checkpoints(out: str) -> list[str]:
    """The ``checkpoint.pkl`` files of an older rbjax in a run folder (never read: unpickling runs code)."""
    return sorted(glob.glob(os.path.join(glob.escape(out), "store_*", OLD_CHECKPOINT)))


def refuse_old_checkpoints(out: str) -> None:
    """ValueError (one line) when ``out`` holds checkpoints of an older rbjax (``old_checkpoints``): they are
    never read, the run is to be started again."""
    old = old_checkpoints(out)
    if old:
        raise ArgumentError(
            f"{{resume}}: {out} holds checkpoints of an older rbjax ({os.path.relpath(old[0], out)}"
            f"{f' and {len(old) - 1} more' if len(old) > 1 else ''}, a format that can run code when "
            "read): they are not read; start the run again with {overwrite}",
            "resume",
            "overwrite",
        )


def load_checkpoints(out: str, engine: AgentEngine) -> dict[int, dict]:
    """{store: checkpoint content} of the stores of ``engine`` that have a checkpoint in ``out``
    (``load_checkpoint``), their states loaded into ``engine`` (``AgentEngine.load``: the observation and
    today's lead draws are made again from the state, as the step made them)."""
    saved = {}
    for s in range(engine.B):
        content = load_checkpoint(os.path.join(out, f"store_{s}", CHECKPOINT), engine, s)
        if content is not None:
            saved[s] = content
    if saved:
        slots = sorted(saved)
        states = jax.tree.map(lambda *x: np.stack(x), *[saved[s]["engine"]["state"] for s in slots])
        engine.load(slots, states)
    return saved


def restore(store, agent, content: dict) -> list:
    """A store's tools (``StoreTools``) and its agent (``LLMAgent``) as its checkpoint ``content`` left them;
    returns the records so far [(day, DayInfo row)]."""
    store.ledger, (store.news_today, store.news_remain) = content["ledger"], content["news"]
    agent.load_state(content["memory"])
    return list(content["records"])

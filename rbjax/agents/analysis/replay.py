"""A finished agents run played again from its traces (``replay``), and its tables rebuilt (``rescore``).

``replay(run_dir)`` rebuilds the run's engine and stores from ``run.json`` (catalogue grouping, supplier
attempts, seed, stores, days) with no model, and plays every store's ``store_{s}/tool_calls.jsonl`` through
``StoreTools.call`` in the order it was written: the runner's morning views, the agent's calls, and each
day's end as the run ended it (``end_today``, or the runner's forced end with its reason). Nothing is
written into the run folder. It then compares

- the replayed ``DayInfo`` records [stores, days] with ``records.npz``, field by field;
- every replayed trace record with the recorded one (all fields but ``ts`` and ``elapsed_time``): the
  tool's payload and text, the funds, net worth and date after the call, ``rb_diag``, the call indices.

``execute_code``: the trace records every tool call a snippet made as its own line (``call_source:
execute_code``, written before the snippet's own line), and a snippet can only call the read tools, so the
store's state after it depends on those calls alone. By default they are replayed and the snippet is not
run: its index is reserved as the run reserved it, and its own output (stdout, result) is taken from the
trace, unchecked (``ReplayResult.code_calls`` counts them). ``rerun_code=True`` runs the snippets again in
the sandbox instead, and checks their output and inner calls like any other call (a snippet that reads
the clock or prints timings will differ).

``rescore(run_dir)`` rebuilds the main table and the four-stage diagnostics. From the traces alone: the
main table's columns (``TRACE_COLUMNS``: each day's ``end_today`` payload holds the funds, net worth,
sales, returns, expiries and stockouts of the day), the tool-call rates and the four stages
(``diagnostics.diagnose``); tokens from ``tokens.jsonl``. The engine's counters of order lines
(``ENGINE_COLUMNS``: supplier ranks, refused lines, merged lots, products acted on) are not in the traces:
they come from a replay.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import numpy as np
import pandas as pd

from rbjax.agents.analysis import diagnostics
from rbjax.agents.runs.llm_agents import read_run_json
from rbjax.agents.runs.loop import resumable
from rbjax.agents.tools.trace import TIMING_FIELDS, TraceWriter, check_call, check_tokens, read, record
from rbjax.runners import metrics
from rbjax.runners.records import DaySummary
from rbjax.runners.untrusted import DAYS_MAX, MAX_STORES, bad, is_int, is_number, read_npz
from rbjax.state import DayInfo

TRACE_COLUMNS = metrics.MAIN_TABLE + ("stockout_ratio",)
ENGINE_COLUMNS = tuple(c for c in metrics.MAIN_TABLE + metrics.DIAGNOSTICS if c not in TRACE_COLUMNS)
TOOL_COLUMNS = ("direct_tools_per_day", "total_tools_per_day", "tokens_per_day", "requests")
KINDS = {  # a trace record's field -> the kind of difference
    "result": "result",
    "result_status": "result",
    "action_executed": "result",
    "funds": "state",
    "net_worth": "state",
    "current_date": "state",
    "rb_diag": "diagnostics",
}


@dataclasses.dataclass
class Mismatch:
    """One difference between the replay and the run: ``kind`` (records, result, state, diagnostics,
    trace, days), the store, the 1-based day (None: the whole store), and what differs."""

    kind: str
    store: int
    day: int | None
    what: str

    def where(self) -> str:
        day = f" day {self.day}" if self.day is not None else ""
        return f"store {self.store}{day}: {self.what}"

    def __str__(self) -> str:
        return f"{self.kind}: {self.where()}"


@dataclasses.dataclass
class ReplayResult:
    """records: the replayed ``DayInfo`` [stores, days] (numpy leaves; ``stack_records``'s layout);
    mismatches: every difference found (empty: the run replays identically); days: days replayed per store;
    calls: trace records compared; code_calls: ``execute_code`` outputs taken from the trace (not rerun);
    traces: the replayed trace records per store (no timing fields); notes: what could not be checked."""

    records: DayInfo
    mismatches: list[Mismatch]
    days: list[int]
    calls: int
    code_calls: int
    traces: list[list[dict]]
    notes: list[str]

    @property
    def identical(self) -> bool:
        return not self.mismatches


_ENVS: dict = {}  # (data, grouping, supplier attempts, days) -> (env, params): one compilation per process


class _Collected(TraceWriter):
    """A trace kept in memory (the JSON the file would hold), never written to disk."""

    def __init__(self):
        self.path, self.buffer, self.records = None, [], []

    def flush(self) -> None:
        self.records += [json.loads(line) for line in self.buffer]
        self.buffer = []


# ---------------------------------------------------------------------------------------------- the run
def read_settings(run_dir: str) -> dict:
    """``run.json`` of a run folder; ValueError (one line) for a missing folder or file, or a bad one."""
    if not os.path.isdir(run_dir):
        raise ValueError(f"{run_dir}: not a folder")
    path = os.path.join(run_dir, "run.json")
    settings = check_settings(
        path, read_run_json(run_dir, f"{run_dir} holds no agents run (a folder of `rbjax agents run`)")
    )
    if settings.get("from_states"):
        raise ValueError(
            f"{run_dir} started from a slice (--from-states, day {settings.get('at')}): its traces begin on that "
            "day, so it cannot be replayed or rescored from them (diagnose works)"
        )
    for field in ("stores", "days"):
        if not is_int(settings.get(field)) or settings[field] < 1:
            raise ValueError(f"{path}: no {field} (a positive integer) in it")
    return settings


def check_settings(path: str, settings: dict) -> dict:
    """The fields of a run.json (read from anyone) that replay, rescore and diagnose use, each of its type;
    ValueError (one line) naming the field."""
    checks = {
        "stores": (lambda v: is_int(v) and 1 <= v <= MAX_STORES, f"an int in 1..{MAX_STORES:,}"),
        "days": (lambda v: is_int(v) and 1 <= v <= DAYS_MAX, f"an int in 1..{DAYS_MAX:,}"),
        "seed": (lambda v: is_int(v) and 0 <= v < 2**32, "an int in 0..2**32 - 1"),
        "grouping": (lambda v: v in ("20", "ref19"), "'20' or 'ref19'"),
        "supplier_attempts": (lambda v: is_int(v) and 1 <= v <= 10_000, "an int in 1..10,000"),
        "model": (lambda v: isinstance(v, str), "a string"),
        "framework": (lambda v: isinstance(v, str), "a string"),
        "keys": (lambda v: isinstance(v, str), "a string"),
        "engine": (lambda v: isinstance(v, str), "a string"),
        "tools": (lambda v: isinstance(v, dict), "a JSON object"),
        "at": (lambda v: v is None or (is_int(v) and 0 <= v <= DAYS_MAX), "a day"),
    }
    for name, (ok, want) in checks.items():
        if name in settings and not ok(settings[name]):
            raise bad(path, name, want, settings[name])
    tools = settings.get("tools") or {}
    if "explicit_news" in tools and not isinstance(tools["explicit_news"], bool):
        raise bad(path, "tools.explicit_news", "true or false", tools["explicit_news"])
    if "code_timeout" in tools and not (is_number(tools["code_timeout"]) and tools["code_timeout"] > 0):
        raise bad(path, "tools.code_timeout", "a number > 0", tools["code_timeout"])
    return settings


def rebuild(run_dir: str, settings: dict, data: str | None = None, env=None, params=None, keys=None):
    """(env, params, keys, notes) of the run: ``make_env`` with run.json's grouping, supplier attempts and
    days (unless ``env``/``params`` are given), keys ``split(key(seed), stores)`` (unless ``keys``), checked
    against the digests a language-model run's run.json holds."""
    import jax

    from rbjax.agents.runs.llm_agents import digest

    path, notes = os.path.join(run_dir, "run.json"), []
    if env is None:
        from rbjax.env import OptionError, make_env

        missing = [k for k in ("grouping", "supplier_attempts") if k not in settings]
        if missing:
            raise ValueError(
                f"{path}: no {' or '.join(missing)} in it (a run started from Python: pass env and params)"
            )
        cached = (data, settings["grouping"], settings["supplier_attempts"], settings["days"])
        if cached not in _ENVS:
            try:
                _ENVS[cached] = make_env(*cached)
            except OptionError as e:
                raise ValueError(e.as_flag()) from None
        env, params = _ENVS[cached]
    if params is None:
        params = env.default_params()
    params = params.replace(horizon=np.int32(settings["days"]))
    if keys is None:
        if not isinstance(settings.get("seed"), int):
            raise ValueError(f"{path}: no seed in it (a run started from Python: pass its keys)")
        keys = jax.random.split(jax.random.key(settings["seed"]), settings["stores"])
    if len(keys) != settings["stores"]:
        raise ValueError(f"{len(keys)} keys for the {settings['stores']} stores of {path}")
    if "keys" in settings and digest(keys) != settings["keys"]:
        raise ValueError(f"{path}: the run's keys ({settings['keys']}) are not these ({digest(keys)})")
    if "engine" in settings and digest((repr(env.config), params)) != settings["engine"]:
        notes.append(
            "the engine's configuration or parameters differ from run.json's (engine digest): "
            "another catalogue (--data) or rbjax version"
        )
    return env, params, keys, notes


def tool_options(settings: dict, explicit_news: bool | None = None) -> dict:
    """The run's tool options (run.json's ``tools``; runs written before it was recorded: the defaults)."""
    options = dict(settings.get("tools") or {})
    if explicit_news is not None:
        options["explicit_news"] = explicit_news
    return {k: options[k] for k in ("explicit_news", "code_timeout") if k in options}


def read_traces(run_dir: str, stores: int, can_resume: bool = True) -> list[list[list[dict]]]:
    """Every store's trace split into days: [store][day] -> records, each day ending at its ``end_today``.
    ValueError (one line) for a missing trace, a record without the fields a replay needs, days out of
    order, or calls after the last ``end_today`` (a run that did not finish its day: to finish with
    ``--resume`` when ``can_resume``, else to run again)."""
    found = diagnostics.store_folders(run_dir)
    if found != list(range(stores)):
        raise ValueError(f"{run_dir}: traces of stores {found}, run.json says {stores} stores")
    out = []
    for s in range(stores):
        path = os.path.join(run_dir, f"store_{s}", "tool_calls.jsonl")
        days, day = [], []
        for n, r in enumerate(read(path, timing=False, check=check_call), 1):
            where = f"{path}, record {n}"
            if not isinstance(r, dict) or not isinstance(r.get("tool"), str):
                raise ValueError(f"{where}: not a tool call record (no tool name)")
            if r.get("call_source") not in ("direct", "execute_code"):
                raise ValueError(f"{where}: call_source {r.get('call_source')!r}, not direct or execute_code")
            if r.get("issued_by") not in ("model", "runner"):
                raise ValueError(f"{where}: issued_by {r.get('issued_by')!r}, not model or runner")
            if r.get("rb_store", s) != s:
                raise ValueError(f"{where}: a record of store {r['rb_store']} in store {s}'s trace")
            if r.get("rb_day") != len(days) + 1 or not isinstance(r.get("rb_call"), int):
                raise ValueError(
                    f"{where}: rb_day {r.get('rb_day')!r} and rb_call {r.get('rb_call')!r} in day "
                    f"{len(days) + 1} (records out of order, or not a trace of `rbjax agents run`)"
                )
            args = r.get("args")
            if isinstance(args, dict) and set(args) == {"rb_cut"}:
                raise ValueError(f"{where}: its arguments were cut from the trace (over its size limit)")
            day.append(r)
            if r["tool"] == "end_today":
                if r["call_source"] != "direct":
                    raise ValueError(f"{where}: end_today from inside execute_code")
                days.append(day)
                day = []
        if day:
            raise ValueError(
                f"{path}: {len(day)} calls after the last end_today (day {len(days) + 1} never ended: an "
                + (
                    "unfinished run; finish it with `rbjax agents run --resume`)"
                    if can_resume
                    else "unfinished run, which cannot be resumed: run it again with `rbjax agents run ... "
                    "--overwrite`)"
                )
            )
        if not days:
            raise ValueError(f"{path}: no finished day")
        out.append(days)
    return out


def load_records(run_dir: str) -> dict | None:
    """``records.npz`` as {field: array}, None when the folder has none; ValueError (one line) for a corrupt
    one: read with ``allow_pickle=False``, every ``DayInfo`` field a number or bool array [stores, days, ...]
    (the same stores and days in every field)."""
    path = os.path.join(run_dir, "records.npz")
    if not os.path.exists(path):
        return None
    arrays = read_npz(path, "records file")
    lead = None
    for f in dataclasses.fields(DayInfo):
        x = arrays.get(f.name)
        if x is None:
            raise ValueError(f"{path}: field {f.name!r} is missing")
        if x.dtype.kind not in "biuf" or x.ndim not in (2, 3) or (lead is not None and x.shape[:2] != lead):
            want = "a number or bool array [stores, days" + (f" = {lead}" if lead else "") + ", ...]"
            raise bad(path, f.name, want, x)
        lead = x.shape[:2]
    return arrays


# ---------------------------------------------------------------------------------------------- replay
def _reserve(store) -> int:
    """The index an ``execute_code`` call takes before its snippet runs (``StoreTools.call``'s counters)."""
    index = store.calls
    store.calls += 1
    store.direct_calls += 1
    return index


def _code_record(store, rec: dict, index: int) -> None:
    """The trace line of an ``execute_code`` call whose inner calls were replayed: the output recorded, the
    store's state now."""
    if store.trace is None:
        return
    payload = (rec.get("result") or {}).get("result")
    text = (rec.get("result") or {}).get("formatted", "")
    ok = not (isinstance(payload, dict) and payload.get("error"))
    source = rec["call_source"]
    store.trace.write(
        record(store, rec["tool"], rec.get("args"), payload, text, ok, 0.0, index, rec["issued_by"], source)
    )


ORPHAN = "calls from inside execute_code without their execute_code"


def _play_calls(store, day: list[dict], rerun_code: bool) -> int:
    """Replay one day's calls but its ``end_today``; returns the ``execute_code`` outputs taken as recorded."""
    taken, reserved, i = 0, None, 0
    calls = day[:-1]
    while i < len(calls):
        r = calls[i]
        if r["call_source"] == "execute_code" and rerun_code:
            # a snippet's calls precede its own record in the trace: run the snippet instead of them
            while i < len(calls) and calls[i]["call_source"] == "execute_code":
                i += 1
            if i == len(calls) or calls[i]["tool"] != "execute_code":
                raise ValueError(f"day {r['rb_day']}: {ORPHAN}")
            r = calls[i]
        store.turn = r.get("rb_turn", store.turn)
        if r["call_source"] == "execute_code":  # after the index its snippet took, as in the run
            if reserved is None:
                reserved = _reserve(store)
            store.call(r["tool"], r.get("args"), issued_by=r["issued_by"], source="execute_code")
        elif r["tool"] == "execute_code" and not rerun_code:
            _code_record(store, r, _reserve(store) if reserved is None else reserved)
            reserved, taken = None, taken + 1
        elif reserved is not None:
            raise ValueError(f"day {r['rb_day']}: {ORPHAN}")
        else:
            store.call(r["tool"], r.get("args"), issued_by=r["issued_by"])
        i += 1
    if reserved is not None:
        raise ValueError(f"day {day[-1]['rb_day']}: {ORPHAN}")
    return taken


def _compare_trace(store: int, got: list[dict], want: list[dict]) -> list[Mismatch]:
    """The first difference of each kind between a store's replayed and recorded trace records."""
    found: dict[str, Mismatch] = {}
    counts: dict[str, int] = {}
    for g, w in zip(got, want):
        if g == w:
            continue
        fields = sorted(k for k in set(g) | set(w) if g.get(k, "absent") != w.get(k, "absent"))
        for kind in dict.fromkeys(KINDS.get(k, "trace") for k in fields):
            counts[kind] = counts.get(kind, 0) + 1
            if kind not in found:
                named = [k for k in fields if KINDS.get(k, "trace") == kind]
                verb = "differs" if len(named) == 1 else "differ"
                what = f"call {w.get('rb_call')} {w['tool']}: {', '.join(named)} {verb}"
                if "result" in named:
                    what += f" (recorded {_snippet(w, g)})"
                found[kind] = Mismatch(kind, store, w.get("rb_day"), what)
    for kind, m in found.items():
        if counts[kind] > 1:
            m.what += f"; {counts[kind] - 1} more calls of this store"
    if len(got) != len(want):
        day = (want if len(want) > len(got) else got)[min(len(got), len(want))].get("rb_day")
        found["trace"] = Mismatch("trace", store, day, f"{len(got)} calls replayed, {len(want)} recorded")
    return list(found.values())


def _snippet(want: dict, got: dict) -> str:
    """Where the recorded text and the replayed one part, a few characters of each."""
    a, b = (str((r.get("result") or {}).get("formatted", "")) for r in (want, got))
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"{a[max(0, n - 20) : n + 30]!r}, replayed {b[max(0, n - 20) : n + 30]!r}"


def compare_records(got: DayInfo, want: dict) -> list[Mismatch]:
    """One ``records`` mismatch per ``DayInfo`` field that differs, at its first (store, day)."""
    out = []
    for f in dataclasses.fields(DayInfo):
        a, b = np.asarray(getattr(got, f.name)), want.get(f.name)
        if b is None:
            out.append(Mismatch("records", 0, None, f"{f.name}: not in records.npz"))
            continue
        if a.shape != b.shape:
            out.append(
                Mismatch("records", 0, None, f"{f.name}: shape {a.shape} replayed, {b.shape} recorded")
            )
            continue
        same = a == b
        if np.issubdtype(a.dtype, np.floating):
            same |= np.isnan(a) & np.isnan(b)
        same = same.reshape(*a.shape[:2], -1).all(-1)
        if not same.all():
            s, d = (int(x) for x in np.argwhere(~same)[0])
            extra = f" and {int((~same).sum()) - 1} more store-days" if (~same).sum() > 1 else ""
            out.append(Mismatch("records", s, d + 1, f"{f.name} differs{extra}"))
    return out


def replay(
    run_dir: str,
    *,
    data: str | None = None,
    env=None,
    params=None,
    keys=None,
    rerun_code: bool = False,
    explicit_news: bool | None = None,
) -> ReplayResult:
    """Play the run in ``run_dir`` again from its traces and compare it with the run (module docstring).

    env, params, keys: the run's (default: rebuilt from run.json: ``make_env`` and ``split(key(seed),
    stores)``; a run started from Python without a seed or grouping in its run.json needs them). data: the
    catalogue folder when not the shipped one. rerun_code: run ``execute_code`` snippets again instead of
    taking their output from the trace. explicit_news: override the run's news texts (a policy run's
    run.json does not record ``--news-text``).

    Returns a ``ReplayResult``: the replayed records ``DayInfo`` [stores, days] and the differences. Raises
    ValueError (one line) for a folder, run.json or trace that does not fit.
    """
    from rbjax.agents.engine.batch import AgentEngine
    from rbjax.agents.runs.loop import make_stores, stack_records

    settings = read_settings(run_dir)
    stores, days = settings["stores"], settings["days"]
    traces = read_traces(run_dir, stores, resumable(settings))
    want = load_records(run_dir)
    env, params, keys, notes = rebuild(run_dir, settings, data, env, params, keys)
    engine = AgentEngine(env, params, keys)
    tools = make_stores(engine, None, **tool_options(settings, explicit_news))
    for store in tools:
        store.trace = _Collected()
    mismatches, records, taken = [], {s: [] for s in range(stores)}, 0
    live = set(range(stores))
    for t in range(max(map(len, traces))):
        playing = []
        for s in sorted(live):
            if t >= len(traces[s]):
                live.discard(s)
                continue
            today = engine.today(s)
            if today.done:
                live.discard(s)
                mismatches.append(
                    Mismatch(
                        "days", s, t, f"the episode ended here; the trace goes on to day {len(traces[s])}"
                    )
                )
                continue
            tools[s].begin_day(today)
            try:
                taken += _play_calls(tools[s], traces[s][t], rerun_code)
            except ValueError as e:
                raise ValueError(f"store {s}: {e}") from None
            except (KeyError, TypeError, AttributeError, IndexError) as e:  # a trace from anyone: one line
                path = os.path.join(run_dir, f"store_{s}", "tool_calls.jsonl")
                raise ValueError(
                    f"{path}: day {t + 1} cannot be replayed ({type(e).__name__}: {e})"
                ) from None
            playing.append(s)
        if not playing:
            break
        stepped = engine.step({s: tools[s].day_action() for s in playing})
        for s in playing:
            end = traces[s][t][-1]
            tools[s].turn = end.get("rb_turn", tools[s].turn)
            forced = (end.get("reason") or "forced") if end.get("forced") else None
            info, detail = stepped[s]
            tools[s].finish_day(info, detail, engine.today(s), issued_by=end["issued_by"], forced=forced)
            records[s].append((t, info))
    for s in range(stores):  # the trace's last day: the episode must end there too (or at the horizon)
        if not engine.today(s).done and len(records[s]) == len(traces[s]):
            mismatches.append(Mismatch("days", s, len(traces[s]), "the trace ends here, the episode goes on"))
    replayed = stack_records(records, days)
    if want is None:
        notes.append("no records.npz in the folder: the replay is checked against the traces only")
    else:
        mismatches += compare_records(replayed, want)
    got = [
        [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in store.trace.records]
        for store in tools
    ]
    for s in range(stores):
        recorded = [r for day in traces[s] for r in day]
        mismatches += _compare_trace(s, got[s], recorded)
    if taken:
        notes.append(
            f"{taken} execute_code calls replayed from their recorded inner calls; their own output (stdout, "
            "result) is the trace's, not rerun (rerun_code=True / --rerun-code runs them)"
        )
    order = ["days", "records", "result", "state", "diagnostics", "trace"]
    mismatches.sort(key=lambda m: (order.index(m.kind), m.store, m.day or 0))
    return ReplayResult(
        records=replayed,
        mismatches=mismatches,
        days=[len(r) for _, r in sorted(records.items())],
        calls=sum(map(len, got)),
        code_calls=taken,
        traces=got,
        notes=notes,
    )


def format_mismatches(mismatches: list[Mismatch]) -> list[str]:
    """One line per kind of difference: how many, and the first (records: every field, first of each)."""
    lines = []
    for kind in dict.fromkeys(m.kind for m in mismatches):
        of = [m for m in mismatches if m.kind == kind]
        lines.append(
            f"{kind}: {len(of)} {'difference' if len(of) == 1 else 'differences'}, first at {of[0].where()}"
        )
    return lines


# ---------------------------------------------------------------------------------------------- rescore
def end_of_day_payloads(traces: list[list[list[dict]]]) -> list[list[dict]]:
    """[store][day] -> that day's ``end_today`` payload; ValueError when one is missing or cut."""
    out = []
    for s, days in enumerate(traces):
        row = []
        for t, day in enumerate(days):
            payload = (day[-1].get("result") or {}).get("result")
            needed = ("funds", "net_worth", "sales_by_sku", "returns_by_sku", "expired_discount_by_sku")
            if not isinstance(payload, dict) or not all(
                k in payload for k in needed + ("insufficient_skus",)
            ):
                raise ValueError(
                    f"store {s}, day {t + 1}: the end_today record has no day results (cut from the trace?)"
                )
            row.append(payload)
        out.append(row)
    return out


def trace_summary(payloads: list[list[dict]], days: int) -> DaySummary:
    """``DaySummary`` [stores, days] of what the ``end_today`` payloads hold (the other counters zero)."""
    B = len(payloads)
    z = lambda dtype: np.zeros((B, days), dtype)
    fields = {f.name: z(np.int64) for f in dataclasses.fields(DaySummary)}
    fields |= {k: z(np.float64) for k in ("funds", "net_worth", "revenue", "refunds", "order_cost")}
    fields["alive"] = z(bool)
    units = lambda d: sum(int(v) for v in (d or {}).values())
    for s, row in enumerate(payloads):
        for t, p in enumerate(row[:days]):
            fields["sold"][s, t] = units(p["sales_by_sku"])
            fields["returned"][s, t] = units(p["returns_by_sku"])
            fields["expired"][s, t] = units(p["expired_discount_by_sku"])
            fields["products_sold"][s, t] = sum(int(v) > 0 for v in (p["sales_by_sku"] or {}).values())
            fields["stockouts"][s, t] = len(p["insufficient_skus"] or [])
            fields["funds"][s, t], fields["net_worth"][s, t] = float(p["funds"]), float(p["net_worth"])
            fields["alive"][s, t] = True
    return DaySummary(**fields)


def tool_rates(traces: list[list[list[dict]]], run_dir: str) -> pd.DataFrame:
    """Per store, direct and all tool calls per day from the traces (runner calls and end_today included,
    as ``agents run`` counts them), tokens per day and requests from ``tokens.jsonl`` where there is one."""
    rows = []
    for s, days in enumerate(traces):
        n = len(days)
        calls = [r for day in days for r in day]
        row = {
            "direct_tools_per_day": sum(r["call_source"] == "direct" for r in calls) / n,
            "total_tools_per_day": len(calls) / n,
        }
        tokens = os.path.join(run_dir, f"store_{s}", "tokens.jsonl")
        if os.path.exists(tokens):
            per_day = read(tokens, timing=False, check=check_tokens)
            row["tokens_per_day"] = sum(d["total_tokens"] for d in per_day) / max(len(per_day), 1)
            row["requests"] = sum(d["requests"] for d in per_day)
        rows.append(row)
    return pd.DataFrame(rows, index=pd.RangeIndex(len(traces), name="store"))


def four_stage_table(
    run_dir: str,
    settings: dict,
    data: str | None = None,
    include_runner: bool | None = None,
    oracle_convention: bool = False,
) -> pd.DataFrame:
    """``agents diagnose``'s table of the run: categories of run.json's grouping; runner calls left out
    for policy runs unless ``include_runner``."""
    from rbjax.data import CatalogError, load_catalog

    try:
        catalog = load_catalog(data)
    except CatalogError as e:
        raise ValueError(f"--data: {e}") from None
    group = catalog.category_ref19 if settings.get("grouping") == "ref19" else catalog.category
    categories = {u: int(g) for u, g in zip(catalog.upc, group)}
    if include_runner is None:
        include_runner = settings.get("framework") != "policy"
    return diagnostics.diagnose(run_dir, categories, include_runner, oracle_convention)


def rescore(
    run_dir: str,
    *,
    engine_columns: bool = True,
    replayed: ReplayResult | None = None,
    data: str | None = None,
    oracle_convention: bool = False,
    include_runner: bool | None = None,
    **replay_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(main table, four-stage table) of the run in ``run_dir``, rebuilt from its traces (module docstring).

    main table: one row per store, ``store_metrics``'s columns and the tool rates (``TOOL_COLUMNS``, those
    the run has): ``TRACE_COLUMNS`` and the rates from the traces; ``ENGINE_COLUMNS`` from ``replayed`` (a
    ``replay`` of the run, made here when None), or left out with ``engine_columns=False``. four-stage
    table: ``diagnostics.diagnose``'s, as ``agents diagnose`` computes it. Raises ValueError (one line).
    """
    settings = read_settings(run_dir)
    stores, days = settings["stores"], settings["days"]
    traces = read_traces(run_dir, stores, resumable(settings))
    summary = trace_summary(end_of_day_payloads(traces), days)
    table = metrics.store_metrics(summary)[list(TRACE_COLUMNS)]
    if engine_columns:
        if replayed is None:
            replayed = replay(run_dir, data=data, **replay_options)
        table = table.join(metrics.store_metrics(replayed.records)[list(ENGINE_COLUMNS)])
    order = [c for c in metrics.MAIN_TABLE + metrics.DIAGNOSTICS if c in table]
    main = table[order].join(tool_rates(traces, run_dir))
    main.index.name = "store"
    four = four_stage_table(run_dir, settings, data, include_runner, oracle_convention)
    return main, four


def run_csv(run_dir: str, settings: dict) -> str | None:
    """The per-store CSV ``agents run`` wrote into the folder, None when there is none."""
    model, framework = str(settings.get("model", "")), settings.get("framework")
    if framework == "policy":
        name = f"{model.partition(':')[2]}_stores.csv"
    else:
        name = f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', model)}_{framework}_stores.csv"
    path = os.path.join(run_dir, name)
    return path if os.path.exists(path) else None


def compare_tables(new: pd.DataFrame, path: str, rtol: float = 1e-9) -> list[str]:
    """The columns of ``new`` that differ from the CSV at ``path`` (the columns both have): one line each,
    with the first store that differs."""
    try:
        return _compare_tables(new, path, rtol)
    except (ValueError, TypeError, KeyError, IndexError) as e:  # pandas' parser errors are ValueErrors
        raise ValueError(f"{path}: not a readable table of the run ({type(e).__name__}: {e})") from None


def _compare_tables(new: pd.DataFrame, path: str, rtol: float) -> list[str]:
    old = pd.read_csv(path, index_col=0)
    lines = []
    if sorted(old.index) != sorted(new.index):
        return [f"stores {sorted(new.index)} rescored, {sorted(old.index)} in {os.path.basename(path)}"]
    for c in [c for c in new.columns if c in old.columns]:
        a, b = new[c].to_numpy(np.float64), old.loc[new.index, c].to_numpy(np.float64)
        same = np.isclose(a, b, rtol=rtol, atol=0.0, equal_nan=True)
        if not same.all():
            i = int(np.flatnonzero(~same)[0])
            name, x, y = os.path.basename(path), float(a[i]), float(b[i])
            lines.append(f"{c}: store {new.index[i]} rescored {x!r}, {name} {y!r}")
    return lines

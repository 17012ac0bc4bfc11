"""A finished agents run played again from its traces (``replay``); its tables are rebuilt by ``rescore``.

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
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from rbjax import programs
from rbjax.agents.runs.folder import load_records, read_settings, read_traces, resumable
from rbjax.agents.tools.trace import TIMING_FIELDS, TraceWriter, record
from rbjax.env import EnvOptions
from rbjax.files.record_files import atomic_file
from rbjax.state import DayInfo

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
        """Where it is, in words: ``store 3 day 12: what``."""
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
        """No mismatch: the run replays identically."""
        return not self.mismatches


class _Collected(TraceWriter):
    """A trace kept in memory (the JSON the file would hold), never written to disk."""

    def __init__(self):
        self.path, self.buffer, self.records = None, [], []

    def flush(self) -> None:
        self.records += [json.loads(line) for line in self.buffer]
        self.buffer = []


# ---------------------------------------------------------------------------------------------- the run
def rebuild(run_dir: str, settings: dict, data: str | None = None, env=None, params=None, keys=None):
    """(Env, EnvParams, keys [stores] typed keys, notes: list of str) of the run: the process's env
    (``programs.env_and_params``) for run.json's grouping, supplier attempts and days (unless
    ``env``/``params`` are given), keys ``split(key(seed), stores)`` (unless ``keys``), checked against the
    digests a language-model run's run.json holds. ValueError (one line) when they do not fit."""
    import jax

    from rbjax.agents.runs.identity import digest

    path, notes = os.path.join(run_dir, "run.json"), []
    if env is None:
        missing = [k for k in ("grouping", "supplier_attempts") if k not in settings]
        if missing:
            raise ValueError(
                f"{path}: no {' or '.join(missing)} in it (a run started from Python: pass env and params)"
            )
        # one env (and its compiled programs) per process for these options; an OptionError names the option
        env, params = programs.env_and_params(
            EnvOptions(data, settings["grouping"], settings["supplier_attempts"], settings["days"])
        )
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
    """The run's tool options, ``StoreTools`` keywords {explicit_news, code_timeout} (run.json's ``tools``;
    runs written before it was recorded: the defaults)."""
    options = dict(settings.get("tools") or {})
    if explicit_news is not None:
        options["explicit_news"] = explicit_news
    return {k: options[k] for k in ("explicit_news", "code_timeout") if k in options}


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
    """One ``records`` mismatch per ``DayInfo`` field that differs, at its first (store, day). got: the
    replayed ``DayInfo`` [stores, days]; want: records.npz's {field: [stores, days, ...] array}."""
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

    env, params, keys: the run's (default: rebuilt from run.json: the process's env for its options,
    ``programs.env_and_params``, and ``split(key(seed), stores)``; a run started from Python without a
    seed or grouping in its run.json needs them). data: the catalogue folder when not the shipped one.
    rerun_code: run ``execute_code`` snippets again instead of taking their output from the trace.
    explicit_news: override the run's news texts (a policy run's run.json does not record ``--news-text``).

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
    mismatches, records = [], {s: [] for s in range(stores)}
    taken = _play_days(run_dir, engine, tools, traces, records, mismatches, rerun_code)
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
        mismatches += _compare_trace(s, got[s], [r for day in traces[s] for r in day])
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


def _play_days(run_dir, engine, tools, traces, records: dict, mismatches: list, rerun_code: bool) -> int:
    """Every store's recorded days, day by day: each live store's calls (``_play_day``), then the day ended
    for all of them in one step as the run ended it (``end_days``). records: {store: [(day, DayInfo row)]},
    extended; mismatches: a ``days`` mismatch for a trace that goes on after its episode ended. Returns the
    ``execute_code`` outputs taken as recorded."""
    from rbjax.agents.runs.loop import end_days

    stores = {store.store: store for store in tools}
    live, taken = set(stores), 0
    for t in range(max(map(len, traces))):
        ends = {}
        for s in sorted(live):
            if t >= len(traces[s]):
                live.discard(s)
            elif engine.today(s).done:
                live.discard(s)
                what = f"the episode ended here; the trace goes on to day {len(traces[s])}"
                mismatches.append(Mismatch("days", s, t, what))
            else:
                taken += _play_day(run_dir, engine, stores[s], traces[s][t], t, rerun_code)
                end = traces[s][t][-1]
                stores[s].turn = end.get("rb_turn", stores[s].turn)
                ends[s] = (end["issued_by"], (end.get("reason") or "forced") if end.get("forced") else None)
        if not ends:
            break
        end_days(engine, stores, ends, records)
    return taken


def _play_day(run_dir: str, engine, store, day: list[dict], t: int, rerun_code: bool) -> int:
    """Store ``store``'s morning ``t`` and its recorded calls but ``end_today`` (``_play_calls``); a call that
    cannot be replayed is a one-line ValueError. Returns the ``execute_code`` outputs taken as recorded."""
    from rbjax.agents.runs.loop import begin_day

    s = store.store
    begin_day(store, engine)
    try:
        return _play_calls(store, day, rerun_code)
    except ValueError as e:
        raise ValueError(f"store {s}: {e}") from None
    except (KeyError, TypeError, AttributeError, IndexError) as e:  # a trace from anyone: one line
        path = os.path.join(run_dir, f"store_{s}", "tool_calls.jsonl")
        raise ValueError(f"{path}: day {t + 1} cannot be replayed ({type(e).__name__}: {e})") from None


def format_mismatches(mismatches: list[Mismatch]) -> list[str]:
    """One line per kind of difference: how many, and the first (records: every field, first of each)."""
    lines = []
    for kind in dict.fromkeys(m.kind for m in mismatches):
        of = [m for m in mismatches if m.kind == kind]
        lines.append(
            f"{kind}: {len(of)} {'difference' if len(of) == 1 else 'differences'}, first at {of[0].where()}"
        )
    return lines


def write_report(path: str, run_dir: str, result: ReplayResult) -> None:
    """``path``: the replay of ``run_dir`` as JSON (the run, whether it is identical, days per store, calls
    compared, ``execute_code`` outputs taken from the trace, notes, every mismatch), written atomically."""
    content = {
        "run": os.path.abspath(run_dir),
        "identical": result.identical,
        "days": result.days,
        "calls": result.calls,
        "code_calls_from_trace": result.code_calls,
        "notes": result.notes,
        "mismatches": [dataclasses.asdict(m) for m in result.mismatches],
    }
    with atomic_file(path) as f:
        json.dump(content, f, indent=1)

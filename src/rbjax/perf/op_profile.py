"""An op-level profile of the simulated day: XLA's own trace of the compiled day, reduced to its kernels and to
the rbjax functions their operations come from (``rbjax bench --profile``).

``profile_day`` compiles one day of a policy (its action and ``Env.step``) for a batch of stores on one device,
runs it under ``jax.profiler.trace`` and returns one row per kernel: calls and milliseconds per day (busy time:
independent kernels run side by side, so the sum exceeds the day's wall time), share of the day's kernel time,
and the rbjax function most of the kernel's operations were traced from (``kernel_sources``, read off the
optimised HLO's stack frames). The trace itself (``trace/plugins/profile/<run>/*.trace.json.gz``) opens in
Perfetto (ui.perfetto.dev) or TensorBoard's profile plugin.
"""

from __future__ import annotations

import collections
import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from rbjax.env import Env
from rbjax.perf.profiling import oracle_view
from rbjax.policies import make
from rbjax.runners.placement import place
from rbjax.runners.rollout_programs import compiled, open_stores

_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_FIELD = re.compile(r"(\w+)=(\d+)")
# the innermost frame in one of these folders names a kernel's source; kernels/ and perf/ are helpers
_MODEL_FOLDERS = ("rbjax/model/", "rbjax/policies/", "rbjax/rl/", "rbjax/env.py")
NO_SOURCE = "(XLA's own: copies, loop control)"


def profile_day(
    env: Env, params, stores: int, days_before: int, repeats: int, out: Path, policy: str = "oracle"
) -> pd.DataFrame:
    """Profile ``repeats`` days of ``policy`` at ``stores`` stores (one device) on the state after ``days_before``
    days of it; the trace goes to ``out/trace``. Returns a table sorted by time: kernel, calls (per day), ms
    (per day), share (of the day's kernel time), source."""
    fn, pp = make(policy)
    keys = jax.random.split(jax.random.key(1), stores)
    devices = (jax.devices()[0],)
    _, chunk = compiled(env, fn, "summary", None, None, devices)
    obs, state = open_stores(env, keys, params, devices)  # a rollout's reset program, placed as a rollout's
    params, keys = place((params, keys), (None, 0), devices)
    (obs, state), _ = chunk(pp, params, obs, state, keys, np.int32(0), days_before)

    def one_day(params, obs, state, keys):
        priv = jax.vmap(oracle_view(env), in_axes=(0, None))(state, params)
        action = jax.vmap(fn, in_axes=(None, 0, 0, None))(pp, obs, priv, None)
        obs, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, state, action, params)
        return obs, state

    day = jax.jit(one_day).lower(params, obs, state, keys).compile()
    carry = [obs, state]

    def call():
        carry[:] = jax.block_until_ready(day(params, *carry, keys))

    return kernel_profile(day, call, repeats, out)


def kernel_profile(compiled, call: Callable[[], object], repeats: int, out: Path) -> pd.DataFrame:
    """Kernel table of a compiled program: ``call()`` runs ``compiled`` (a ``jax.stages.Compiled``) once and
    waits for it; after a first untimed call (allocations), ``repeats`` calls run under
    ``jax.profiler.trace`` (the trace goes to ``out/trace``). Returns one row per kernel, sorted by time:
    kernel, calls and ms (per call of the program), share (of its kernel time), source (``kernel_sources``)."""
    hlo = compiled.as_text()
    module = re.match(r"HloModule ([^\s,]+)", hlo).group(1)
    call()
    with jax.profiler.trace(str(out / "trace")):
        for _ in range(repeats):
            call()
    table = trace_kernels(out / "trace", module)
    table["calls"] = table.calls / repeats
    table["ms"] = table.ms / repeats
    table["share"] = table.ms / table.ms.sum()
    sources = kernel_sources(hlo)
    table["source"] = [sources.get(k, NO_SOURCE) for k in table.kernel]
    return table.sort_values("ms", ascending=False, ignore_index=True)


def trace_kernels(trace_dir: Path, module: str) -> pd.DataFrame:
    """[kernel, calls, ms] of the HLO module ``module``'s kernel events in the newest trace under ``trace_dir``."""
    files = sorted(Path(trace_dir).glob("plugins/profile/*/*.trace.json.gz"))
    if not files:
        raise FileNotFoundError(f"no *.trace.json.gz under {trace_dir}/plugins/profile")
    with gzip.open(files[-1]) as f:
        events = json.load(f)["traceEvents"]
    calls, us = collections.Counter(), collections.Counter()
    for e in events:
        args = e.get("args") or {}
        if e.get("ph") == "X" and args.get("hlo_module") == module:
            name = args.get("hlo_op", e["name"])
            calls[name] += 1
            us[name] += float(e.get("dur", 0.0))
    return pd.DataFrame(
        {"kernel": list(us), "calls": [calls[k] for k in us], "ms": [us[k] / 1e3 for k in us]}
    )


def kernel_sources(hlo: str) -> dict[str, str]:
    """Each instruction of an optimised HLO module's text -> the rbjax function ("model/demand.py:attraction")
    most of its operations were traced from: a fusion's operations are those of the computation it calls, an
    operation's function the innermost frame of its stack in ``_MODEL_FOLDERS`` (else any rbjax frame)."""
    tables = {name: {} for name in _TABLES}
    section, computation = None, None
    frames = collections.defaultdict(list)  # computation -> its operations' stack frames
    instructions = {}  # instruction -> (its own frame or None, the computation it calls or None)
    for line in hlo.splitlines():
        if line in tables:
            section = line
            continue
        if section is not None:
            if not line.strip():
                section = None
                continue
            number, _, rest = line.partition(" ")
            tables[section][int(number)] = rest.strip().strip('"') if rest.startswith('"') else _fields(rest)
            continue
        header = re.match(r"(?:ENTRY )?%([\w.\-]+) .*\{$", line)
        if header:
            computation = header.group(1)
            continue
        op = re.match(r"\s+(?:ROOT )?%([\w.\-]+) = ", line)
        if op:
            frame = re.search(r"stack_frame_id=(\d+)", line)
            called = re.search(r"calls=%([\w.\-]+)", line)
            frame = int(frame.group(1)) if frame else None
            if frame is not None:
                frames[computation].append(frame)
            instructions[op.group(1)] = (frame, called.group(1) if called else None)
    label = _frame_labels(tables)
    out = {}
    for name, (frame, called) in instructions.items():
        votes = collections.Counter(
            label(f) for f in (frames[called] if called else [frame]) if f is not None
        )
        votes.pop(None, None)
        if votes:
            out[name] = votes.most_common(1)[0][0]
    return out


def _fields(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in _FIELD.findall(text)}


def _frame_labels(tables: dict):
    """frame id -> "path inside rbjax:function" of its innermost model frame (or any rbjax frame), or None."""
    files, functions, locations, stack = (tables[name] for name in _TABLES)

    def where(frame):
        loc = locations.get(stack[frame].get("file_location_id"), {})
        path = files.get(loc.get("file_name_id"), "")
        return path, functions.get(loc.get("function_name_id"), "?")

    def label(frame):
        chain, seen = [], set()
        while frame in stack and frame not in seen:  # innermost first
            seen.add(frame)
            chain.append(where(frame))
            # XLA prints a frame's parent as the parent's id plus one (0 and 1: no parent)
            frame = stack[frame].get("parent_frame_id", 0) - 1
        for folders in (_MODEL_FOLDERS, ("rbjax/",)):
            for path, function in chain:
                if any(f in path for f in folders):
                    return f"{path[path.rindex('rbjax/') + len('rbjax/') :]}:{function}"
        return None

    return label


def by_function(table: pd.DataFrame) -> pd.DataFrame:
    """A kernel table summed by rbjax function: source, ms, kernels; costliest first."""
    by = table.groupby("source").agg(ms=("ms", "sum"), kernels=("kernel", "count"))
    return by.sort_values("ms", ascending=False).reset_index()


def write(table: pd.DataFrame, out: Path, stores: int, days_before: int, policy: str = "oracle") -> str:
    """profile.csv (every kernel) and profile.md (the top kernels, and the day by rbjax function) in ``out``."""
    table.to_csv(out / "profile.csv", index=False)
    by_source = by_function(table).set_index("source")
    total = table.ms.sum()
    lines = [
        f"# Where a day goes, kernel by kernel ({policy}, {stores:,} stores, state after {days_before} days, "
        f"one {jax.devices()[0].platform} device)",
        "",
        f"{total:.2f} ms of kernel time a day in {len(table)} kernels: busy time, since independent kernels run "
        f"side by side (time a change as a whole day). The trace: `{out / 'trace'}` (Perfetto, TensorBoard).",
        "",
        "| rbjax function | ms a day | share | kernels |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r.Index} | {r.ms:.3f} | {r.ms / total:.1%} | {r.kernels} |"
        for r in by_source.head(20).itertuples()
    ]
    lines += ["", "| kernel | calls a day | ms a day | share | source |", "|---|---|---|---|---|"]
    lines += [
        f"| {r.kernel} | {r.calls:g} | {r.ms:.3f} | {r.share:.1%} | {r.source} |"
        for r in table.head(25).itertuples()
    ]
    text = "\n".join(lines) + "\n"
    (out / "profile.md").write_text(text)
    return text

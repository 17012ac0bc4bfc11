"""A slices folder (``rbjax run ... --save-states DIR --every D``) as a library: its snapshots and manifest.

A slices folder holds ``day_{D:03d}.npz`` (``rbjax.files.snapshots``: every store after D days, with the
run's params; ``snapshot_name``) and ``slices.json`` (the run that made them: policy, checkpoint, seed,
stores, days, every, grouping, supplier attempts, data, and the files by day; ``write_manifest``,
``read_manifest``). ``slice_files`` lists the snapshots; ``open_slices_folder`` picks the one an agent starts
from. A slices folder may come from anyone: its manifest is data, every field checked, and every error is a
one-line ``ValueError`` (an ``ArgumentError`` naming ``from_states`` or ``at`` where the argument is at fault).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

from rbjax.arguments import ArgumentError
from rbjax.files.record_files import atomic_file

SLICES = "slices.json"


def snapshot_name(day: int) -> str:
    """The file name of the snapshot after ``day`` days."""
    return f"day_{day:03d}.npz"


def write_manifest(
    folder: str,
    *,
    policy: str,
    checkpoint: str | None,
    greedy: bool,
    seed: int,
    stores: int,
    days: int,
    every: int,
    grouping: str,
    supplier_attempts: int,
    data: str | None,
    files: dict[int, str],
    plan: dict | None = None,
    agent: str | None = None,
) -> None:
    """``folder/slices.json``: the run that saved the snapshots (its ``checkpoint`` made absolute, the
    planner's settings ``plan`` for the policy ``plan``; for a language model's run, ``policy`` is
    ``"agent"`` and ``agent`` the model's name) and ``files``, {day: snapshot file name}; written
    atomically."""
    manifest = {
        "policy": policy,
        "agent": agent,
        "plan": plan,
        "checkpoint": os.path.abspath(checkpoint) if checkpoint else None,
        "greedy": bool(greedy),
        "seed": seed,
        "stores": stores,
        "days": days,
        "every": every,
        "grouping": grouping,
        "supplier_attempts": supplier_attempts,
        "data": data,
        "files": {str(d): f for d, f in files.items()},
    }
    with atomic_file(os.path.join(folder, SLICES)) as f:
        json.dump(manifest, f, indent=1)


def read_manifest(folder: str) -> dict:
    """``slices.json`` of a slices folder (read from anyone: data, every field the agents read checked);
    ValueError (one line) naming the file and the field."""
    from rbjax.files.untrusted import DAYS_MAX, MAX_STORES, bad, is_int, read_json
    from rbjax.policies import NAMES

    path = os.path.join(folder, SLICES)
    manifest = read_json(path, "slices manifest")
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: not a readable slices manifest (not a JSON object)")
    required = ("policy", "grouping", "supplier_attempts", "seed")
    checks = {
        "policy": (lambda v: v in NAMES or v == "agent", f"a policy name ({', '.join(NAMES)}) or 'agent'"),
        "agent": (
            lambda v: v is None or (isinstance(v, str) and 0 < len(v) <= 200),
            "a model's name or null",
        ),
        "grouping": (lambda v: v in ("20", "ref19"), "'20' or 'ref19'"),
        "supplier_attempts": (lambda v: is_int(v) and 1 <= v <= 10_000, "an int in 1..10,000"),
        "seed": (lambda v: is_int(v) and 0 <= v < 2**32, "an int in 0..2**32 - 1"),
        "checkpoint": (lambda v: v is None or isinstance(v, str), "a path or null"),
        "greedy": (lambda v: isinstance(v, bool), "true or false"),
        "plan": (
            plan_settings_ok,
            "null or the planner's settings (base, futures, horizon, every, halving, cheapest)",
        ),
        "stores": (lambda v: is_int(v) and 1 <= v <= MAX_STORES, f"an int in 1..{MAX_STORES:,}"),
        "days": (lambda v: is_int(v) and 1 <= v <= DAYS_MAX, f"an int in 1..{DAYS_MAX:,}"),
        "every": (lambda v: is_int(v) and 1 <= v <= DAYS_MAX, f"an int in 1..{DAYS_MAX:,}"),
        "data": (lambda v: v is None or isinstance(v, str), "a path or null"),
        "files": (lambda v: isinstance(v, dict), "a JSON object"),
    }
    for name, (ok, want) in checks.items():
        if name in required and name not in manifest:
            raise ValueError(f"{path}: field {name!r} is missing")
        if name in manifest and not ok(manifest[name]):
            raise bad(path, name, want, manifest[name])
    if manifest["policy"] == "agent" and not manifest.get("agent"):
        raise ValueError(f"{path}: field 'agent' must name the model of a run whose policy is 'agent'")
    return manifest


def plan_settings_ok(v) -> bool:
    """Whether ``v`` (from a manifest) is null or the planner's settings (``PlanSettings.from_dict`` takes it)."""
    from rbjax.policies import PlanSettings

    if v is None:
        return True
    try:
        PlanSettings.from_dict(v)
    except (ValueError, TypeError):
        return False
    return True


def slice_files(folder: str, at: str | None = None) -> list[tuple[int, str]]:
    """[(day, path)] of the snapshots in ``folder`` (all, or the days of ``at``: comma-separated days), by day;
    ValueError (one line) for a missing folder, no snapshots, or a day it has no snapshot of."""
    if not os.path.isdir(folder):
        raise ArgumentError(f"{{from_states}} {folder}: not a folder", "from_states")
    found = {}
    for name in os.listdir(folder):
        m = re.fullmatch(r"day_(\d+)\.npz", name)
        if m:
            found[int(m.group(1))] = os.path.join(folder, name)
    if not found:
        raise ArgumentError(
            f"{{from_states}} {folder}: no snapshots (day_DDD.npz, written by {{save_states}})",
            "from_states",
            "save_states",
        )
    if at:
        try:
            days = [int(x) for x in at.split(",") if x.strip()]
        except ValueError:
            raise ArgumentError(f"{{at}} {at}: expected comma-separated days", "at") from None
        missing = [d for d in days if d not in found]
        if missing:
            has = ", ".join(map(str, sorted(found)))
            raise ArgumentError(
                f"{{at}}: no snapshot of day {missing[0]} in {folder} (it has days {has})", "at"
            )
        found = {d: found[d] for d in days}
    return sorted(found.items())


@dataclasses.dataclass(frozen=True)
class SliceStart:
    """The snapshot an agent run starts from: its ``day`` (days since opening), its file ``path``, and the
    folder's checked ``manifest`` (``read_manifest``)."""

    folder: str
    day: int
    path: str
    manifest: dict


def open_slices_folder(folder: str, at: str | int | None = None) -> SliceStart:
    """The one snapshot of ``folder`` an agent run starts from (the day ``at``; needed when the folder holds
    several) with its manifest; ValueError (one line) for a folder without snapshots or manifest, several
    days, or a manifest that does not check."""
    at = None if at is None else str(at)
    files = slice_files(folder, at)
    if len(files) > 1:
        days = ", ".join(str(d) for d, _ in files)
        if at:
            raise ArgumentError(f"{{at}} {at}: agents start from one day (one of {days})", "at")
        raise ArgumentError(f"{{at}} D is needed: {folder} holds snapshots of days {days}", "at")
    (day, path), manifest_path = files[0], os.path.join(folder, SLICES)
    if not os.path.exists(manifest_path):
        raise ArgumentError(
            f"{{from_states}} {folder}: no {SLICES} (the folder `rbjax run --save-states` writes has one)",
            "from_states",
        )
    return SliceStart(folder, day, path, read_manifest(folder))

"""The result files the repo keeps (``benchmarks/results/NAME.json``): each says the commit, machine, date and
command of the run that made it, and ``tests/test_recorded_results.py`` holds the README's and docs' figures to
them.

    source = provenance(sys.argv, "benchmarks/fidelity.py")   # right after rbjax.setup(): the tree run
    write("fidelity", dict(**source, stores=1024, ...))
    read("baselines")["policies"]["PPO (greedy)"]
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
OUT = Path(__file__).parent / "out"  # longer tables and plots, not kept


def provenance(argv: list[str], script: str) -> dict:
    """The commit (with '+changes' when the tree differs from it), machine, date and command of a run."""
    # isort: off
    import rbjax  # noqa: F401  (before jax: it sets the compiler's flags)
    import jax

    # isort: on

    def git(*a):
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=Path(__file__).parent).stdout

    dirty = "+changes" if git("status", "--porcelain", "--untracked-files=no").strip() else ""
    return dict(
        commit=git("rev-parse", "HEAD").strip() + dirty,
        machine=f"{platform.machine()}, {os.cpu_count()} cores, {jax.devices()[0].platform}",
        date=datetime.date.today().isoformat(),
        command="python " + " ".join([script, *argv[1:]]),
    )


def write(name: str, record: dict) -> Path:
    """``record`` (with its provenance) as ``benchmarks/results/NAME.json``; returns the path."""
    for field in ("commit", "machine", "date", "command"):
        if not record.get(field):
            raise ValueError(f"the {name} record does not say its {field} (take provenance() first)")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def read(name: str) -> dict:
    """The kept record ``benchmarks/results/NAME.json``."""
    path = RESULTS / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run the benchmark that writes it (its docstring names it)")
    return json.loads(path.read_text())


def stat(values) -> dict:
    """mean and sd (ddof 1) of a column, as the tables write 'mean ± sd'."""
    import numpy as np

    v = np.asarray(values, np.float64)
    return dict(mean=float(v.mean()), sd=float(v.std(ddof=1)))

"""An agent's net worth as a share of the agent's ceiling: the observation-only planner (``plan_obs``), which
sees only what the tools show, on the run's own stores and keys, beside the share of the privileged oracle.

A run of ``rbjax agents run`` plays stores ``jax.random.split(jax.random.key(seed), stores)`` for ``days`` days
(its run.json); ``ceiling_table`` plays the oracle and ``plan_obs`` on the same stores, keys and env (an rbjax
policy through the tools equals its rollout, ``tests/agents``), and pairs each store's final net worth with
theirs. ``rbjax agents diagnose --ceiling`` and ``rbjax agents run --ceiling`` print and write it.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from rbjax.files.record_files import atomic_file

CEILING, ORACLE = "plan_obs", "oracle"
CSV = "ceiling.csv"


def reference_finals(settings: dict, names=(ORACLE, CEILING), plan=None) -> dict[str, np.ndarray]:
    """{policy name: [stores] final net worth} of each of ``names`` on the run's stores, keys and env (``settings``:
    a run.json's seed, stores, days, grouping, supplier_attempts, data). plan: the planners' ``PlanSettings``
    (None: the defaults)."""
    import jax

    from rbjax import policies
    from rbjax.env import EnvOptions
    from rbjax.programs import env_and_params
    from rbjax.runners.rollout import rollout

    env, params = env_and_params(
        EnvOptions(
            settings.get("data"),
            settings.get("grouping") or EnvOptions.grouping,
            int(settings.get("supplier_attempts", EnvOptions.supplier_attempts)),
            int(settings["days"]),
        )
    )
    keys = jax.random.split(jax.random.key(int(settings["seed"])), int(settings["stores"]))
    out = {}
    for name in names:
        given = plan if name in policies.registry.PLANNING else None
        policy, policy_params = policies.make(name, env, plan=given)
        _, final = rollout(env, policy, policy_params, params, keys, days=int(settings["days"]))
        out[name] = np.asarray(final.net_worth, np.float64)
    return out


def ceiling_table(agent: np.ndarray, references: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per store: the agent's final net worth, the references' (``reference_finals``), and the agent's
    share of each ([stores] arrays, paired by store)."""
    table = pd.DataFrame({"agent": np.asarray(agent, np.float64)})
    for name, finals in references.items():
        table[name] = finals
        table[f"share_of_{name}"] = table["agent"] / np.where(finals != 0, finals, np.nan)
    table.index.name = "store"
    return table


def summary_line(table: pd.DataFrame) -> str:
    """The mean shares, each with its 95 % t interval over the stores, as one line."""
    parts = []
    for name, label in ((CEILING, "the agent's ceiling (plan_obs)"), (ORACLE, "the oracle")):
        column = f"share_of_{name}"
        if column not in table:
            continue
        x = table[column].to_numpy(np.float64)
        x = x[np.isfinite(x)]
        half = 1.96 * x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
        share = lambda v: f"{v:.1%}".replace("%", " %")  # noqa: E731  (written as the docs write it: 99.9 %)
        parts.append(
            f"{share(x.mean())} of {label} (95 % interval {share(x.mean() - half)} .. {share(x.mean() + half)})"
        )
    n = len(table)
    return f"net worth, paired on the same {n} store{'s' * (n != 1)} and keys: " + "; ".join(parts)


def write_ceiling(run: str, table: pd.DataFrame) -> str:
    """``run/ceiling.csv``; returns its path."""
    path = os.path.join(run, CSV)
    with atomic_file(path) as f:
        table.to_csv(f)
    return path

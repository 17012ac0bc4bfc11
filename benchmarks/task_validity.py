"""Do the lm tasks teach? The validity report of ``rbjax lm tasks`` (docs/VALIDITY.md), on two task sets.

- **oracle only**: every open store of a 180-day oracle run's snapshots (days 30, 60, 90, 120), no filter;
- **the default mixed set** (docs/lm_training.md, "A task set that teaches"): the snapshots of runs by several
  policies (``--mixed``: the oracle and the lookahead planner), each task kept when its headroom is at least
  ``--min-headroom`` (0.1); every source of ``--sources`` is measured, and shown by source.

Each task: N decided days (``--horizons``) from the snapshot's morning, then K = 14 days of the oracle (the
continuation). Measured per set and horizon, in the batched engine (``rbjax.lm.panel.member_gains``: the
members of a task on its own random numbers):

- **flat groups**: the share of tasks whose seven panel rewards lie within 1e-3 of each other, and of a
  GRPO-like group of four (the oracle, and the oracle with log-normal noise of sigma 0.2, 0.5, 1 on its
  orders);
- **doing nothing beats the reference under 16 fresh futures**: null and the oracle play the decided days on
  the task's random numbers, then the continuation on 16 new futures (new episode keys from the morning after
  the decided days, every draw for later days made afresh: ``planner.own_future``); null beats the oracle when its mean
  final net worth over the futures is higher (and significantly so: by more than 2 standard errors of the paired
  difference);
- **random below doing nothing**, on the task's random numbers; the panel's **spread** (median);
- **per-day credit**: a "mixed" session (each decided day one of the deterministic members, reference, null,
  keep_prices, no_orders, drawn at random per task and day) is credited as ``rbjax.lm.credit`` credits it
  (day d: the oracle's value from the morning after day d less from the morning before, on the task's random
  numbers); its sign is compared with the sign of the day's decision value measured over 16 fresh futures
  (the decision then the oracle, less the oracle from that morning, both on the same new futures);
- **the continuation's caveat**: the oracle learns prices from the session's history, so one day of every price
  x3 and then the oracle can beat the oracle; the share of oracle-only tasks where it does;
- **what it costs**: ``lm tasks`` with and without the panel, and a session's per-day credit.

    python benchmarks/task_validity.py [--stores 64] [--out benchmarks/out/validity] [--report docs/VALIDITY.md]

Slices folders are made once in ``--out`` (``rbjax run --policy P --stores S --save-states``) and reused.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rbjax import policies
from rbjax.env import make_env
from rbjax.files import snapshots
from rbjax.files.slices_folder import open_slices_folder, read_manifest
from rbjax.lm import panel, rewards
from rbjax.policies.planner import own_future
from rbjax.runners import continuation

SOURCES = ("oracle", "plan", "base_stock", "s_S", "random", "null")  # the runs whose snapshots are measured
MIXED = ("oracle", "plan")  # the default mixed set's sources (docs/lm_training.md)
MIN_HEADROOM = 0.1  # and its threshold
AT = (30, 60, 90, 120)
HORIZONS = (3, 7)
TAIL = 14
FUTURES = 16
FLAT = 1e-3
THRESHOLDS = (0.0, 0.02, 0.05, 0.1, 0.2)
NOISE = (0.2, 0.5, 1.0)  # the GRPO-like group: the oracle's orders x exp(N(0, sigma^2))
REF, NULL = panel.MEMBERS.index("reference"), panel.MEMBERS.index("null")
DETERMINISTIC = [panel.MEMBERS.index(m) for m in ("reference", "null", "keep_prices", "no_orders")]
SEED = 7


def slices(policy: str, out: str, stores: int) -> str:
    """The slices folder of a 180-day run of ``policy`` (made once)."""
    from rbjax.cli import main

    folder = os.path.join(out, f"slices_{policy}")
    if not os.path.exists(os.path.join(folder, "slices.json")):
        # one device: the report's rollouts then need no cross-device collectives (which a busy host can
        # time out: XLA's CPU rendezvous gives up after 40 s)
        line = f"--devices 1 run --policy {policy} --stores {stores} --days 180 --seed {SEED} --every 30 --progress 0"
        main([*line.split(), "--save-states", folder])
    return folder


def open_rows(snap, stores: int) -> np.ndarray:
    """The snapshot's first ``stores`` stores still open on its morning."""
    done = np.asarray(snap.state.done, bool)[:stores]
    return np.flatnonzero(~done)


def padded(rows: np.ndarray, size: int) -> np.ndarray:
    """``rows`` with its last store repeated up to ``size`` (fixed batch shapes: one compilation each)."""
    return np.concatenate([rows, np.repeat(rows[-1:], size - len(rows))])


def tile(tree, times: int):
    """Every leaf's leading axis repeated ``times`` times, block after block."""
    return jax.tree.map(lambda x: jnp.concatenate([jnp.asarray(x)] * times), tree)


def future_keys(count: int, seed: int) -> jax.Array:
    """[count] new episode keys: a future each."""
    return jax.random.split(jax.random.key(seed), count)


def rekeyed(state, keys: jax.Array, env_params):
    """``state`` ([B] stores) with each store's draws for later days made afresh from its future's key ``keys``
    ([B]): ``planner.own_future``."""
    return jax.vmap(own_future, in_axes=(0, None, 0))(state, env_params, keys)


def oracle_from(env, snap, state, keys, day: int, days: int) -> np.ndarray:
    """[B, days] the net worth on each morning after day .. day + days - 1 when the oracle runs ``state``."""
    oracle, oracle_params = policies.make("oracle", env)
    rec, _ = continuation.rollout_from(
        env, oracle, oracle_params, snap.env_params(env), state, keys, day, days
    )
    return np.asarray(rec.net_worth, np.float64)


def played(env, snap, state, keys, members, first: int, days: int):
    """(final state, records) of store b playing panel member ``members[b]`` for ``days`` days from ``first``
    (state leaves and keys [B], members [B] ints into ``panel.MEMBERS``)."""
    B = len(members)
    shared = (policies.make("oracle", env)[1], policies.make("random", env)[1])
    per_store = (
        jnp.asarray(np.asarray(members, np.int32)),
        jnp.full(B, 10**6, jnp.int32),
        jnp.full(B, panel.ORDER_SIGMA, jnp.float32),
        jnp.full(B, panel.PRICE_SIGMA, jnp.float32),
    )
    rec, final = continuation.rollout_from(
        env,
        panel.PanelPolicy(policies.make("oracle", env)[0]),
        (shared, per_store),
        snap.env_params(env),
        state,
        keys,
        first,
        days,
        policy_axes=(None, 0),
    )
    return final, rec


def stores_of(snap, rows):
    """(state leaves [n], keys [n]) of the snapshot's stores ``rows``."""
    return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[rows]), snap.state), snap.keys[rows]


def null_beats_fresh(env, snap, rows, days: int) -> pd.DataFrame:
    """Per task: null and the oracle play the decided days on the task's numbers, then the oracle FUTURES
    fresh futures of TAIL days (the same futures for both); the paired difference's mean and standard error
    (null less the oracle, dollars)."""
    n = len(rows)
    state, keys = stores_of(snap, rows)
    final, _ = played(env, snap, tile(state, 2), tile(keys, 2), np.repeat([REF, NULL], n), snap.day, days)
    fkeys = future_keys(FUTURES * n, SEED + snap.day + 1000 * days)  # future-major: f * n + s
    half = lambda k: jax.tree.map(lambda x: x[k * n : (k + 1) * n], final)  # noqa: E731
    ref_side, null_side = (rekeyed(tile(half(k), FUTURES), fkeys, snap.env_params(env)) for k in (0, 1))
    both = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ref_side, null_side)
    nw = oracle_from(env, snap, both, tile(fkeys, 2), snap.day + days, TAIL)[:, -1]
    ref, null = nw.reshape(2, FUTURES, n)
    diff = null - ref
    return pd.DataFrame({"diff_mean": diff.mean(0), "diff_se": diff.std(0, ddof=1) / np.sqrt(FUTURES)})


def task_table(env, snap, rows, days: int, source: str) -> pd.DataFrame:
    """One row per task of ``snap``'s stores ``rows`` for ``days`` decided days: the panel's rewards, headroom,
    spread, the noise group's spread, and the fresh futures' null-against-oracle."""
    rent = float(snap.env_params(env).rent)
    gains = panel.member_gains(env, snap, rows, range(len(panel.MEMBERS)), days, TAIL, "oracle")
    R = gains[REF]
    scale = np.array([rewards.scale(r, rent, days + TAIL) for r in R])
    panel_rewards = (gains - R) / scale  # [7, n]
    noisy_orders = panel.MEMBERS.index("noisy_orders")
    noisy = panel.member_gains(
        env,
        snap,
        rows,
        [noisy_orders] * len(NOISE),
        days,
        TAIL,
        "oracle",
        order_sigmas=NOISE,
        price_sigmas=[0.0] * 3,
    )
    group = np.concatenate([np.zeros((1, len(rows))), (noisy - R) / scale])
    table = pd.DataFrame({f"r_{m}": panel_rewards[i] for i, m in enumerate(panel.MEMBERS)})
    table.insert(0, "store", rows)
    table.insert(0, "day", snap.day)
    table.insert(0, "days", days)
    table.insert(0, "source", source)
    table["reference_gain"], table["scale"] = R, scale
    table["headroom"], table["spread"] = panel.summarize(panel_rewards.T)
    table["group_spread"] = group.max(0) - group.min(0)
    futures = null_beats_fresh(env, snap, rows, days)
    for c in ("diff_mean", "diff_se"):
        table[c] = futures[c].to_numpy()
    return table


def credit_agreement(env, snap, rows, days: int, rng: np.random.Generator) -> pd.DataFrame:
    """Per (task, decided day) of a mixed session: the day's credit on the task's numbers and its decision's
    value over FUTURES fresh futures (mean and standard error), both over the task's scale. Every oracle run is
    ``days + TAIL`` days long (one program), its value read on the morning the task's window ends."""
    n, window = len(rows), days + TAIL
    plan = rng.choice(DETERMINISTIC, size=(days, n))
    state, keys = stores_of(snap, rows)
    mornings = [state]
    for d in range(days):  # the session's trajectory on the task's numbers: day d's member on each store
        mornings.append(played(env, snap, mornings[-1], keys, plan[d], snap.day + d, 1)[0])
    value = np.stack(
        [
            oracle_from(env, snap, mornings[d], keys, snap.day + d, window)[:, window - d - 1]
            for d in range(days + 1)
        ]
    )
    rent = float(snap.env_params(env).rent)
    start = np.asarray(snap.state.net_worth, np.float64)[rows]
    scale = np.array([rewards.scale(r, rent, window) for r in value[0] - start])
    out = []
    for d in range(days):
        credit = (value[d + 1] - value[d]) / scale
        fkeys = future_keys(FUTURES * n, SEED + 1000 * d + snap.day)
        fstate = rekeyed(tile(mornings[d], FUTURES), fkeys, snap.env_params(env))
        after = played(env, snap, fstate, fkeys, np.tile(plan[d], FUTURES), snap.day + d, 1)[0]
        mine = oracle_from(env, snap, after, fkeys, snap.day + d + 1, window)[:, window - d - 2]
        base = oracle_from(env, snap, fstate, fkeys, snap.day + d, window)[:, window - d - 1]
        q = (mine - base).reshape(FUTURES, n) / scale
        for i in range(n):
            out.append(
                dict(
                    slot=i,
                    store=int(rows[i]),
                    day=snap.day,
                    d=d,
                    member=panel.MEMBERS[plan[d, i]],
                    credit=credit[i],
                    q_mean=q[:, i].mean(),
                    q_se=q[:, i].std(ddof=1) / np.sqrt(FUTURES),
                )
            )
    return pd.DataFrame(out)


def caveat(env, snap, rows, days: int) -> np.ndarray:
    """[n] whether one day of every price x3 (kept through the decided days), then the oracle, gains more than
    the oracle over the task's days and continuation (the task's numbers): the oracle's price rule learns from
    the session's prices."""
    import dataclasses

    from reward_validity import net_worths, policy_under_test, switching

    sub = dataclasses.replace(
        snap, state=jax.tree.map(lambda x: np.asarray(x)[rows], snap.state), keys=snap.keys[rows]
    )
    oracle_params = policies.make("oracle", env)[1]
    got = {}
    for name in ("oracle", "prices_x3"):
        fn, make_params = policy_under_test(name, env)
        nw = net_worths(
            env,
            sub,
            switching(fn),
            (make_params(snap.day), oracle_params, jnp.int32(snap.day + days)),
            snap.day,
            days + TAIL,
        )
        got[name] = nw[:, -1] - nw[:, 0]
    return got["prices_x3"] > got["oracle"]


def costs(folder: str, stores: int = 16) -> dict:
    """Seconds: ``lm tasks`` on 16 stores of day 60 (7 days + 14) without and with the panel (its first call
    compiles), and a 7-day session's finish without and with its per-day credit (programs warm)."""
    from rbjax.lm.pool import SessionPool
    from rbjax.lm.tasks import make_tasks

    make_tasks(folder, 7, at=[60], stores=stores, panel=False)  # the tool history, made once and kept
    out = {"stores": stores}
    t = time.perf_counter()
    tasks = make_tasks(folder, 7, at=[60], stores=stores, panel=False)
    out["tasks_no_panel_s"] = time.perf_counter() - t
    for k in ("tasks_panel_first_s", "tasks_panel_s"):
        t = time.perf_counter()
        make_tasks(folder, 7, at=[60], stores=stores)
        out[k] = time.perf_counter() - t
    for credit in (False, True):
        pool = SessionPool.for_task(tasks[0], slots=16, credit=credit)
        pool.open(tasks[0]).finish()  # warm
        t = time.perf_counter()
        timed = tasks[1:5] or tasks[:1]
        for task in timed:
            pool.open(task).finish()
        out[f"session_{'credit' if credit else 'plain'}_s"] = (time.perf_counter() - t) / len(timed)
        pool.close_all()
    return out


def measure(env, folder: str, source: str, stores: int, credit_stores: int, parts: str) -> tuple[list, list]:
    """The task rows and credit rows of one slices folder (every day of AT, every horizon), each part kept in
    the folder ``parts`` as it is made and read from there by a later run."""
    tables, credits = [], []
    os.makedirs(parts, exist_ok=True)
    rng = np.random.default_rng([SEED, zlib.crc32(source.encode())])  # the mixed sessions' plans, per source
    for day in AT:
        kept = os.path.join(parts, f"{source}_{day}.csv"), os.path.join(parts, f"{source}_{day}_credit.csv")
        if os.path.exists(kept[0]):
            tables.append(pd.read_csv(kept[0], keep_default_na=False, na_values=[""]))
            if os.path.exists(kept[1]):
                credits.append(pd.read_csv(kept[1], keep_default_na=False, na_values=[""]))
            continue
        here, credit_here = [], []
        snap = snapshots.load(open_slices_folder(folder, day).path, env)
        rows = open_rows(snap, stores)
        if not len(rows):
            continue
        full = padded(rows, stores)
        for days in HORIZONS:
            t = time.perf_counter()
            table = task_table(env, snap, full, days, source).iloc[: len(rows)]
            if source == "oracle":
                table["caveat"] = caveat(env, snap, full, days)[: len(rows)]
            here.append(table)
            if days == max(HORIZONS) and day == 60:
                few = padded(rows[:credit_stores], credit_stores)
                got = credit_agreement(env, snap, few, days, rng).assign(source=source)
                credit_here.append(got[got.slot < min(len(rows), credit_stores)])
            print(
                f"{source} day {day} N {days}: {len(rows)} tasks in {time.perf_counter() - t:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        if here:
            pd.concat(here).to_csv(kept[0], index=False)
            tables += here
        if credit_here:
            pd.concat(credit_here).to_csv(kept[1], index=False)
            credits += credit_here
    return tables, credits


def summary(table: pd.DataFrame) -> dict:
    """The report's numbers of a set of task rows."""
    return {
        "tasks": len(table),
        "flat panels": (table.spread < FLAT).mean(),
        "flat groups of 4": (table.group_spread < FLAT).mean(),
        "null beats the oracle (task's numbers)": (table.r_null > 0).mean(),
        "null beats the oracle (16 fresh futures)": (table.diff_mean > 0).mean(),
        "... significantly": (table.diff_mean > 2 * table.diff_se).mean(),
        "random below null": (table.r_random < table.r_null).mean(),
        "median headroom": table.headroom.median(),
        "median spread": table.spread.median(),
    }


def markdown(rows: list[dict], first: list[str]) -> str:
    """A markdown table of ``rows`` (dicts with the same keys; ``first`` the label columns)."""
    cols = list(rows[0])
    fmt = lambda c, v: (
        str(v)
        if c in first or isinstance(v, int | np.integer)
        else (f"{v:.1%}" if c not in ("median headroom", "median spread") else f"{v:.3f}")
    )  # noqa: E731
    lines = [
        "| " + " | ".join(cols) + " |",
        "|" + "|".join("---" if c in first else "---:" for c in cols) + "|",
    ]
    lines += ["| " + " | ".join(fmt(c, r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def report(
    tasks: pd.DataFrame, credits: pd.DataFrame, cost: dict, threshold: float, sources, elapsed: float
) -> str:
    """docs/VALIDITY.md's tables."""
    mixed = tasks[tasks.source.isin(sources)]
    kept = mixed[mixed.headroom >= threshold]
    sets = []
    for name, table in (
        ("oracle only", tasks[tasks.source == "oracle"]),
        (f"default mixed ({', '.join(sources)}), headroom >= {threshold}", kept),
    ):
        for n, g in table.groupby("days"):
            sets.append({"task set": name, "N": int(n), **summary(g)})
    sweep = []
    for x in THRESHOLDS:
        for n, g in mixed.groupby("days"):
            here = g[g.headroom >= x]
            s = summary(here)
            sweep.append(
                {
                    "min headroom": str(x),
                    "N": int(n),
                    "kept": len(here) / len(g),
                    **{
                        k: s[k]
                        for k in (
                            "flat panels",
                            "flat groups of 4",
                            "null beats the oracle (16 fresh futures)",
                            "random below null",
                        )
                    },
                }
            )
    by_source = []
    for (src, n), g in tasks.groupby(["source", "days"]):
        by_source.append(
            {
                "source": src,
                "N": int(n),
                "tasks": len(g),
                "median headroom": g.headroom.median(),
                f"headroom >= {threshold}": (g.headroom >= threshold).mean(),
                "null beats the oracle (16 fresh futures)": (g.diff_mean > 0).mean(),
                "random below null": (g.r_random < g.r_null).mean(),
                "flat groups of 4": (g.group_spread < FLAT).mean(),
            }
        )
    c = credits[credits.member != "reference"]
    sig = c[(c.q_mean.abs() > 2 * c.q_se)]
    agree = lambda t: (np.sign(t.credit) == np.sign(t.q_mean)).mean()  # noqa: E731
    credit_rows = []
    for member, g in [("all", c), *c.groupby("member")]:
        s_ = g[g.q_mean.abs() > 2 * g.q_se]
        credit_rows.append(
            {
                "decision": member,
                "days": len(g),
                "significant over 16 futures": len(s_) / max(len(g), 1),
                "credit's sign right (significant days)": agree(s_) if len(s_) else float("nan"),
                "credit's sign right (all days)": agree(g),
            }
        )
    rho = pd.Series(sig.credit).rank().corr(pd.Series(sig.q_mean).rank()) if len(sig) > 2 else float("nan")
    oracle = tasks[tasks.source == "oracle"]
    caveat_rows = [
        {
            "N": int(n),
            "tasks": len(g),
            "prices x3 one day, then the oracle, beats the oracle": g.caveat.astype(float).mean(),
        }
        for n, g in oracle.groupby("days")
    ]
    cost_lines = [
        f"- `lm tasks`, {cost['stores']} stores x one 7-day horizon (+14): {cost['tasks_no_panel_s']:.1f} s "
        "without the panel, "
        f"{cost['tasks_panel_s']:.1f} s with it ({cost['tasks_panel_first_s']:.1f} s the first time in a process: "
        "its program compiles).",
        f"- A 7-day session played to its end (`finish`): {cost['session_plain_s']:.2f} s without per-day credit, "
        f"{cost['session_credit_s']:.2f} s with it (6 plays of the oracle from the mornings between decided days).",
        f"- This run of the report: {elapsed / 60:.0f} min on this machine (parts kept in `--out` by earlier "
        "runs are read, not made again; from scratch, with the planner's run, about 35 min).",
    ]
    return "\n\n".join(
        [
            markdown(sets, ["task set"]),
            "By the minimum headroom (the mixed sources, before the filter):\n\n"
            + markdown(sweep, ["min headroom"]),
            "By source (every task, before the filter):\n\n" + markdown(by_source, ["source"]),
            "Per-day credit of a mixed session (N = 7, day 60; days the session played the reference left out, "
            "their credit and value are both 0). Rank correlation of credit and value on the significant days: "
            f"{rho:.3f}.\n\n" + markdown(credit_rows, ["decision"]),
            "The continuation's caveat (oracle-only tasks):\n\n" + markdown(caveat_rows, []),
            "What it costs:\n\n" + "\n".join(cost_lines),
        ]
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stores", type=int, default=64)
    p.add_argument("--credit-stores", type=int, default=32, help="stores per source for the per-day credit")
    p.add_argument("--sources", default=",".join(SOURCES))
    p.add_argument("--mixed", default=",".join(MIXED), help="the sources of the default mixed set")
    p.add_argument(
        "--min-headroom", type=float, default=MIN_HEADROOM, help="the default mixed set's threshold"
    )
    p.add_argument("--out", default="benchmarks/out/validity")
    p.add_argument("--report", default=None, help="write the tables into this markdown file's generated part")
    p.add_argument("--tables", action="store_true", help="only the tables of an earlier run's CSVs in --out")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    sources = args.sources.split(",")
    mixed = args.mixed.split(",")
    start = time.perf_counter()
    paths = {k: os.path.join(args.out, f"{k}.csv") for k in ("tasks", "credits")}
    if args.tables:
        tasks, credits = (
            pd.read_csv(paths[k], keep_default_na=False, na_values=[""]) for k in ("tasks", "credits")
        )
        with open(os.path.join(args.out, "costs.json")) as f:
            import json

            cost, elapsed = (d := json.load(f))["costs"], d["elapsed"]
    else:
        folders = {src: slices(src, args.out, args.stores) for src in sources}
        m = read_manifest(folders[sources[0]])
        env, _ = make_env(
            data=m.get("data"), grouping=m["grouping"], supplier_attempts=m["supplier_attempts"]
        )
        tables, credit_parts = [], []
        for src in sources:
            t, c = measure(
                env, folders[src], src, args.stores, args.credit_stores, os.path.join(args.out, "parts")
            )
            tables += t
            credit_parts += c
        tasks, credits = pd.concat(tables, ignore_index=True), pd.concat(credit_parts, ignore_index=True)
        tasks.to_csv(paths["tasks"], index=False)
        credits.to_csv(paths["credits"], index=False)
        cost = costs(folders.get("oracle") or slices("oracle", args.out, args.stores), min(16, args.stores))
        elapsed = time.perf_counter() - start
        import json

        with open(os.path.join(args.out, "costs.json"), "w") as f:
            json.dump({"costs": cost, "elapsed": elapsed}, f)
    text = report(tasks, credits, cost, args.min_headroom, mixed, elapsed)
    print(text)
    if args.report:
        write_generated(args.report, text)


BEGIN, END = "<!-- task_validity: begin -->", "<!-- task_validity: end -->"


def write_generated(path: str, text: str) -> None:
    """Replace the part of ``path`` between BEGIN and END with ``text`` (the rest is written by hand)."""
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} part to write the tables into")
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}{BEGIN}\n{text}\n{END}{tail}")


if __name__ == "__main__":
    main()

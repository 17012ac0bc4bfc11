"""The agent's ceiling: what is reachable with the agent's own information, beside the privileged references.

    python benchmarks/ceiling.py [--stores 64] [--days 180] [--information | --student]

On the planner's held-out stores (``planner.HELD_OUT_SEED``, the same stores and keys as
``results/planner_heldout.json``), each policy once (its wall time includes compiling; one device per core):
the paper's oracle (reads the hidden quality and news), the honest oracle (the oracle's rules on the belief,
``honest_oracle``), and the observation-only planner (``plan_obs``: futures drawn from the belief). Every row is
paired store by store with the oracle: the mean difference of final net worth with its 95 % t interval, and the
share of stores ahead. The privileged planner's row is the recorded one (``planner_heldout.json``: the same
stores, its own run), and the value of information is its mean minus the observation-only planner's. The
student of ``plan_obs`` (``distilled_belief``) is its last round's row of ``results/distill.json`` (the same
stores and keys, trained and measured by ``benchmarks/distill.py --students belief``); ``--student`` merges it into
the record alone.
``--information`` (a separate run, merged into the record): what each hidden field is worth alone, as the
honest oracle's gain when that field is revealed to it (``REVEAL``: the true quality of today's quotes, the true
news effects), and what knowing only which suppliers are good (tiers Q1-Q3) would be worth with the cheapest good
supplier picked. Writes ``benchmarks/results/ceiling.json``, which ``tests/test_recorded_results.py`` holds the
docs to.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

import rbjax
from rbjax.policies import make

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from planner import HELD_OUT_SEED, paired_row  # noqa: E402
from recorded import provenance, read, write  # noqa: E402

ROWS = ("oracle", "honest_oracle", "plan_obs")


def revealed(field: str):
    """The honest oracle with ``field`` of the truth revealed: "quality" (today's quotes' hidden quality),
    "news" (today's true news effects), or "good suppliers" (which suppliers are Q1-Q3, the cheapest of them
    picked: the oracle's ties go to the cheaper quote)."""
    import jax.numpy as jnp

    from rbjax.policies import belief_state, oracle

    def policy(params, obs, privileged, key=None):
        *_, view = belief_state.honest_of(privileged, obs.category, "the honest oracle")
        if field == "quality":
            view = view.replace(quote_quality=privileged.quote_quality)
        elif field == "news":
            view = view.replace(news_need=privileged.news_need, news_supply=privileged.news_supply)
        else:
            good = privileged.state.suppliers.quality_tier <= 2
            view = view.replace(quote_quality=good.astype(jnp.float32))
        return oracle(params, obs, view, key)

    return policy


REVEAL = ("quality", "news", "good suppliers")


def information(env, params, keys, days: int) -> dict:
    """{field: the honest oracle's final net worth with that field revealed, paired with the honest oracle}."""
    from rbjax.policies import OracleParams
    from rbjax.policies.honest_oracle import honest_oracle

    finals = {}
    for name, policy in [("honest_oracle", honest_oracle)] + [(f, revealed(f)) for f in REVEAL]:
        _, final = jax.device_get(rbjax.rollout(env, policy, OracleParams.default(), params, keys, days=days))
        finals[name] = np.asarray(final.net_worth, np.float64)
        print(name, finals[name].mean(), flush=True)
    return {
        f: dict(mean=float(finals[f].mean()), gain=paired_row(finals["honest_oracle"], finals[f]))
        for f in REVEAL
    }


def student_row(args) -> dict:
    """The student of ``plan_obs``: its last round's row of ``results/distill.json`` (same stores, keys, days)."""
    rec = read("distill")
    if (rec["stores"], rec["days"], rec["seed"]) != (args.stores, args.days, HELD_OUT_SEED):
        raise SystemExit("distill.json is of other stores: run benchmarks/distill.py --students belief")
    rounds = rec["recipe"][STUDENT]["rounds"]
    row = rec["policies"][f"{STUDENT}, round {rounds - 1}"]
    return dict(
        mean=row["final_net_worth"]["mean"],
        sd=row["final_net_worth"]["sd"],
        survives=row["survives"],
        vs_oracle=row["paired"],
        of_oracle=row["of_oracle"],
        us_per_store_day=row["us_per_store_day"],
        of_oracle_wall=row["of_oracle_wall"],
        source=f"results/distill.json, {STUDENT} round {rounds - 1} ({rec['commit'][:12]}, {rec['date']})",
    )


STUDENT = "distilled_belief"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", type=int, default=64)
    ap.add_argument("--days", type=int, default=180)
    ap.add_argument("--information", action="store_true", help="each hidden field's worth, into the record")
    ap.add_argument(
        "--student", action="store_true", help="the student's row from distill.json, into the record"
    )
    args = ap.parse_args()
    if args.student:
        record = read("ceiling")
        record["student"] = student_row(args)
        write("ceiling", record)
        return
    rbjax.setup(cache="none")
    source = provenance(sys.argv, "benchmarks/ceiling.py")
    env = rbjax.Env()
    params = env.default_params().replace(horizon=np.int32(args.days))
    keys = jax.random.split(jax.random.key(HELD_OUT_SEED), args.stores)
    if args.information:
        record = read("ceiling")
        record["information"] = dict(
            **source, honest_oracle_revealed=information(env, params, keys, args.days)
        )
        write("ceiling", record)
        return
    finals, rows = {}, {}
    for name in ROWS:
        policy, policy_params = make(name, env)
        start = time.perf_counter()
        _, final = jax.device_get(rbjax.rollout(env, policy, policy_params, params, keys, days=args.days))
        wall = time.perf_counter() - start
        nw = np.asarray(final.net_worth, np.float64)
        finals[name] = nw
        rows[name] = dict(
            mean=float(nw.mean()),
            sd=float(nw.std(ddof=1)),
            survives=float((np.asarray(final.day) >= args.days).mean()),
            wall_s=wall,
        )
        print(name, rows[name], flush=True)
    for name in ROWS[1:]:
        rows[name]["vs_oracle"] = {k: float(v) for k, v in paired_row(finals["oracle"], finals[name]).items()}
        rows[name]["of_oracle"] = rows[name]["mean"] / rows["oracle"]["mean"]
    planner = read("planner_heldout")
    same = (
        planner["stores"] == args.stores and planner["days"] == args.days and planner["seed"] == HELD_OUT_SEED
    )
    privileged = planner["policies"]["plan"]["final_net_worth"]["mean"]
    record = dict(
        **source,
        stores=args.stores,
        days=args.days,
        seed=HELD_OUT_SEED,
        policies=rows,
        privileged_planner=dict(
            mean=privileged,
            of_oracle=privileged / rows["oracle"]["mean"],
            source="results/planner_heldout.json (the same stores and keys, its own run)"
            if same
            else "other stores",
        ),
        value_of_information=privileged - rows["plan_obs"]["mean"],
        student=student_row(args),
    )
    print(record)
    write("ceiling", record)


if __name__ == "__main__":
    main()

"""rbjax.runners.paired: a policy and a reference from the same snapshot with the same keys; task slices on the
command line (--save-states, --from-states)."""

import subprocess
import sys

import golden
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import cli_error

from rbjax.files import snapshots
from rbjax.policies import make
from rbjax.runners import continuation, paired
from rbjax.runners.rollout import rollout
from rbjax.state import Action

# the golden fixture's stores; 30-day calls on one device, as the command line test's slices (their programs
# compile once for both: the persistent cache)
STORES, DAY, DAYS = golden.STORES, 30, 30  # stores; the snapshot's day; the slice's days
ONE = jax.devices()[:1]


def test_decision_gaps_count_products_per_decision_type():
    J, K = 6, 5
    state = type("S", (), {"prices": jnp.full(J, 2.0)})()
    a = Action(price=jnp.full(J, 2.0), shelf=jnp.ones(J, bool), order=jnp.zeros((J, K)))
    assert paired.decision_gaps(a, a, state).tolist() == [0, 0, 0]
    b = Action(
        price=a.price.at[0].set(2.5).at[1].set(2.001),  # 2.001: within half a cent, the same price
        shelf=a.shelf.at[2].set(False),
        order=a.order.at[3, 0].set(10.0).at[4, 1].set(0.5),  # 0.5 floors to 0 units: no order
    )
    assert paired.decision_gaps(a, b, state).tolist() == [1, 1, 1]
    # a price not set is today's price; the supplier chosen does not matter, the units do
    c = a.replace(
        price=a.price.at[0].set(9.0), set_price=jnp.zeros(J, bool), order=a.order.at[3, 2].set(10.0)
    )
    assert paired.decision_gaps(c, b.replace(price=a.price), state).tolist() == [0, 1, 0]


@pytest.fixture(scope="module")
def snapshot(env, params):
    """The golden fixture's 4 oracle stores on day 30 (the golden oracle programs: full records), as 5 stores
    with a closed copy of store 1 in the middle, whose slice is dropped: the paired runs are the golden size,
    4 stores. Returns (the 5-store snapshot, the 4 open stores' snapshot)."""
    keys = jax.random.split(jax.random.key(golden.SEED), STORES)
    oracle, oracle_params = make("oracle")
    _, state = rollout(env, oracle, oracle_params, params, keys, days=DAY, records="full", devices=ONE)
    state = jax.tree.map(np.asarray, state)
    order = np.array([0, 1, 1, 2, 3])
    five = jax.tree.map(lambda x: x[order], state)
    done = five.done.copy()
    done[2] = True  # a store closed before the snapshot's day: its slice is dropped
    return snapshots.Snapshot(five.replace(done=done), keys[order], DAY), snapshots.Snapshot(state, keys, DAY)


@pytest.mark.slow
def test_paired_runs_are_each_policys_own_run_from_the_same_state(env, params, snapshot):
    snapshot, open_stores = snapshot
    base, base_params = make("base_stock")
    oracle, oracle_params = make("oracle")
    table = paired.compare(env, base, base_params, oracle, oracle_params, snapshot, DAYS)
    assert table.attrs["dropped"] == 1 and table.store.tolist() == [0, 1, 3, 4]
    for policy, pp, prefix in ((base, base_params, ""), (oracle, oracle_params, "ref_")):
        rec, _ = continuation.resume(
            env, policy, pp, open_stores, DAYS, devices=ONE
        )  # stores 0, 1, 3, 4 above
        assert np.array_equal(table[prefix + "net_worth"], np.asarray(rec.net_worth, np.float64)[:, -1])
        assert np.array_equal(table[prefix + "sales"], np.asarray(rec.sold).sum(1))
    assert np.array_equal(table.net_worth_diff, table.net_worth - table.ref_net_worth)
    assert (table.start_net_worth == np.asarray(snapshot.state.net_worth, np.float64)[[0, 1, 3, 4]]).all()
    # base-stock keeps today's prices and orders its own way: it differs from the oracle's decisions daily
    assert (
        (table.price_differs > 0).all() and (table.order_differs > 0).all() and (table.days_differ == 1).all()
    )
    with pytest.raises(ValueError, match="runs past the stores' horizon"):
        paired.compare(env, base, base_params, oracle, oracle_params, snapshot, int(params.horizon))


def test_summary_reports_interval_iqm_minimum_and_wins():
    rng = np.random.default_rng(0)
    n = 400
    diff = rng.normal(100.0, 50.0, n)
    table = pd.DataFrame(
        {
            "start_day": np.repeat([30, 90], n // 2),
            "net_worth_diff": diff,
            "sales_diff": np.where(np.arange(n) % 4 == 0, 0, 1),
            "price_differs": np.ones(n),
            "shelf_differs": np.zeros(n),
            "order_differs": np.ones(n),
            "survived": np.arange(n) % 10 > 0,
            "ref_survived": np.ones(n, bool),
        }
    )
    s = paired.summarize(table, by=None).loc["all"]
    row = s.loc["net_worth_diff"]
    assert row.n == n and row["min"] == diff.min() and row.ci_low < 100.0 < row.ci_high
    assert abs((row.ci_high - row.ci_low) - 2 * 1.96 * 50.0 / np.sqrt(n)) < 2.0  # the normal interval's width
    assert row.won == pytest.approx(np.mean(diff > 0))
    assert s.loc["sales_diff"].won == 0.75 and s.loc["sales_diff"].tied == 0.25
    assert s.loc["survived"]["mean"] == 0.9
    by_day = paired.summarize(table)
    assert sorted(by_day.index.get_level_values(0).unique()) == [30, 90]
    text = paired.format_summary(by_day, "ppo", "oracle", 30)
    assert "start day 90:" in text and "survived the slice: ppo 90.0%" in text


def rbjax(line: str):
    return subprocess.run([sys.executable, "-m", "rbjax", *line.split()], capture_output=True, text=True)


@pytest.mark.slow
def test_cli_task_slices(env, tmp_path, capsys):
    # the golden fixture's oracle stores and programs (4 stores, 30 days a call, one device: the pin shares
    # them; tests/cli/test_default_devices.py runs slices on the default devices): a run saving its states every
    # 30 days gives the plain run's records, bit for bit
    saved = rbjax(
        f"--devices 1 oracle --stores {golden.STORES} --days 90 --seed {golden.SEED} --progress 30 --records "
        f"--out {tmp_path / 'saved'} --save-states {tmp_path / 'states'} --every 30"
    )
    assert saved.returncode == 0 and "wrote 2 snapshots (days 30, 60)" in saved.stdout, saved.stderr
    oracle, oracle_params = make("oracle")
    plain, _ = rollout(
        env,
        oracle,
        oracle_params,
        env.default_params().replace(horizon=np.int32(90)),
        jax.random.split(jax.random.key(golden.SEED), golden.STORES),
        days=90,
        records="full",
        days_per_call=30,
        devices=ONE,
    )
    with np.load(tmp_path / "saved" / "records.npz") as got:
        assert sorted(got.files) == sorted(vars(plain))
        for name in got.files:
            assert np.array_equal(got[name], np.asarray(getattr(plain, name)), equal_nan=True), name
    slices = tmp_path / "slices"
    r = rbjax(
        f"--devices 1 run --policy base_stock --from-states {tmp_path / 'states'} --at 30,60 --days 30 "
        f"--out {slices}"
    )
    assert r.returncode == 0, r.stderr
    assert "start day 60:" in r.stdout and "all slices:" in r.stdout and "net_worth_diff" in r.stdout
    table = pd.read_csv(slices / "slices.csv")
    assert sorted(table.start_day.unique()) == [30, 60] and len(table) == 2 * golden.STORES
    assert (slices / "paired.png").exists()
    # one line and a non-zero exit: a slice past the horizon, a missing day, both directions at once
    for line, words in (
        (f"run --from-states {tmp_path / 'states'} --at 60 --days 60", "runs past the stores' horizon"),
        (f"run --from-states {tmp_path / 'states'} --at 45 --days 5", "no snapshot of day 45"),
        (f"run --from-states {tmp_path / 'states'} --save-states {tmp_path / 'x'}", "one or the other"),
    ):
        err = cli_error(capsys, f"--devices 1 {line}")  # the worker keeps one device
        assert words in err and len(err.strip().splitlines()) == 1, err

"""rbjax.files.snapshots: save/load a batch of stores, continue it bit for bit, fork it into branches.

Every run here is the same program (4 stores a call, 4 days a call, per-store oracle params, full records), so
the file compiles one reset and one day (about 30 s on a 2-core CPU) and every other run is milliseconds.
"""

import dataclasses

import jax
import numpy as np
import pytest

from rbjax.config import EnvConfig
from rbjax.env import Env
from rbjax.files import snapshots
from rbjax.policies.oracle import OracleParams, oracle
from rbjax.runners import continuation
from rbjax.runners.rollout import rollout

STORES, CALL, DAY = 8, 4, 4  # base stores; stores and days a call; the snapshot's day
A = OracleParams.default()
RUN = dict(policy_axes=0, records="full", store_chunk=CALL)


def _equal(a, b) -> list[str]:
    """Paths of the leaves where two pytrees differ (empty: bit for bit equal, NaN equal to NaN)."""
    out = []
    for (p, x), y in zip(jax.tree_util.tree_flatten_with_path(a)[0], jax.tree.leaves(b)):
        if not np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True):
            out.append(jax.tree_util.keystr(p))
    return out


@pytest.fixture(scope="module")
def keys():
    return jax.random.split(jax.random.key(8), STORES)


@pytest.fixture(scope="module")
def straight(env, params, keys):
    """The uninterrupted run: 2 * DAY days (in calls of DAY days, the program every run here shares)."""
    return rollout(
        env, oracle, snapshots.per_branch([A], STORES), params, keys, days=2 * DAY, progress=DAY, **RUN
    )


@pytest.fixture(scope="module")
def base(env, params, keys):
    """The first DAY days: (records, state [STORES, ...])."""
    return rollout(env, oracle, snapshots.per_branch([A], STORES), params, keys, days=DAY, **RUN)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, env, base, keys):
    path = tmp_path_factory.mktemp("snap") / "day4.npz"
    snapshots.save(path, env, base[1], keys, DAY)
    return path


@pytest.mark.slow
def test_continued_snapshot_matches_the_uninterrupted_run(env, straight, base, saved, keys):
    assert not _equal(jax.tree.map(lambda x: x[:, :DAY], straight[0]), base[0])
    snap = snapshots.load(saved, env)
    assert snap.day == DAY and snap.num_stores == STORES and snap.params is None
    assert snap.config == env.config and not _equal(jax.random.key_data(snap.keys), jax.random.key_data(keys))
    assert not _equal(snap.state, base[1])
    rec, final = continuation.resume(
        env, oracle, snapshots.per_branch([A], STORES), snap, DAY, days_per_call=DAY, **RUN
    )
    assert rec.sold.shape[:2] == (STORES, DAY) and rec.sold.sum() > 0
    assert _equal(jax.tree.map(lambda x: x[:, DAY:], straight[0]), rec) == []
    assert _equal(straight[1], final) == []


@pytest.mark.slow
def test_save_is_atomic_and_keeps_non_default_params(env, base, keys, tmp_path):
    params = env.default_params().replace(rent=np.float32(700.0), initial_funds=np.float32(25000.0))
    path = tmp_path / "snap.npz"
    path.write_bytes(b"old")
    snapshots.save(path, env, base[1], keys, DAY, params=params)
    assert [p.name for p in tmp_path.iterdir()] == ["snap.npz"]  # no temporary file left behind
    snap = snapshots.load(path, env)
    assert snapshots.params_fingerprint(snap.params) == snapshots.params_fingerprint(params)
    assert float(snap.env_params(env).rent) == 700.0


@pytest.mark.slow
def test_load_refuses_another_config_or_catalogue(env, saved):
    other = Env(EnvConfig.from_catalog(env.catalog, lot_slots=10), env.catalog)
    with pytest.raises(ValueError, match=r"EnvConfig\.lot_slots is 8 in the snapshot, 10 in this env"):
        snapshots.load(saved, other)
    cat = env.catalog.replace(alpha=env.catalog.alpha * 1.01)
    with pytest.raises(ValueError, match=r"another catalogue: field\(s\) alpha differ"):
        snapshots.load(saved, Env(env.config, cat))


@pytest.mark.slow
def test_bad_files_and_inputs_are_refused(env, base, keys, saved, tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable snapshot"):
        snapshots.load(junk, env)
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="not an rbjax snapshot"):
        snapshots.load(tmp_path / "other.npz", env)
    with pytest.raises(ValueError, match=r"state\.day has shape \(8,\), expected \(3,\)"):
        snapshots.save(tmp_path / "x.npz", env, base[1], keys[:3], DAY)
    with pytest.raises(ValueError, match="typed PRNG keys"):
        snapshots.save(tmp_path / "x.npz", env, base[1], jax.random.key_data(keys), DAY)
    with pytest.raises(ValueError, match="day must be"):
        snapshots.save(tmp_path / "x.npz", env, base[1], keys, -1)
    snap = snapshots.load(saved, env)
    for groups in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="groups must be an int >= 1"):
            snapshots.fork(snap, groups=groups)
    with pytest.raises(ValueError, match="batch size 8, the keys 3"):
        snapshots.fork(snap.state, keys[:3], groups=2)
    with pytest.raises(ValueError, match="needs its keys"):
        snapshots.fork(snap.state, groups=2)
    with pytest.raises(ValueError, match="days must be"):
        continuation.resume(env, oracle, A, snap, 0)


@pytest.fixture(scope="module")
def forks(env, saved):
    """The first store pair of the snapshot, forked into 2 branches each (4 stores: one call), same policy:
    {common_random: (records, final state)}."""
    snap = snapshots.load(saved, env)
    two = dataclasses.replace(snap, state=jax.tree.map(lambda x: x[:2], snap.state), keys=snap.keys[:2])
    out = {}
    for common in (True, False):
        branches = snapshots.fork(two, groups=2, common_random=common)
        assert branches.num_stores == 4 and branches.day == DAY
        out[common] = continuation.resume(env, oracle, snapshots.per_branch([A], 4), branches, DAY, **RUN)
    return out


@pytest.mark.slow
def test_common_random_branches_repeat_the_store(forks, straight):
    rec, final = forks[True]
    for b in range(2):
        store = jax.tree.map(lambda x: x[b, DAY:], straight[0])
        for g in range(2):
            assert _equal(jax.tree.map(lambda x: x[2 * b + g], rec), store) == []  # the uninterrupted future
    assert _equal(jax.tree.map(lambda x: x[0::2], final), jax.tree.map(lambda x: x[1::2], final)) == []


@pytest.mark.slow
def test_independent_branches_differ(forks):
    rec, _ = forks[False]
    for b in range(2):
        assert not np.array_equal(rec.demand[2 * b], rec.demand[2 * b + 1])
        # the same start: both branches share the state at the fork, so the first morning's orders agree
        assert np.array_equal(rec.ordered[2 * b, 0], rec.ordered[2 * b + 1, 0])


@pytest.mark.slow
def test_common_random_numbers_shrink_the_variance_of_a_policy_difference(env, params):
    """Oracle multiplier 6 (A) against 5.5 on the two branches of each of 64 stores, forked on day DAY and run
    2 * DAY days: the difference of final net worth between a store's two branches varies far less over stores
    with common random numbers than with independent streams (``common_random=False``: the same store and
    snapshot, only the later luck independent). Observed variances 2.4e4 against 1.3e5 (ratio 0.19); the test
    asks for a ratio < 0.5. Were ``common_random=True`` to give independent streams, the two variances would
    be two samples of the same one (if it gave these very streams, the same numbers: a ratio of exactly 1), and
    a ratio of two such sample variances of 64 stores each, F(63, 63), is under 0.5 with a probability of about
    0.3 %. (The closer pair of policies keeps the branches closer: against multiplier 5, 64 other stores gave a
    ratio of 0.70, too close to 1 to assert on.)"""
    n = 64
    keys = jax.random.split(jax.random.key(9), n)
    _, state = rollout(env, oracle, snapshots.per_branch([A], n), params, keys, days=DAY, **RUN)
    both = snapshots.per_branch([A, OracleParams.default(multiplier=5.5)], n)
    diff = {}
    for common in (True, False):
        branches, branch_keys = snapshots.fork(state, keys, groups=2, common_random=common)
        _, final = continuation.rollout_from(
            env, oracle, both, params, branches, branch_keys, DAY, 2 * DAY, days_per_call=DAY, **RUN
        )
        nw = np.asarray(final.net_worth, np.float64).reshape(n, 2)
        diff[common] = nw[:, 1] - nw[:, 0]  # the same store's two branches
    crn, independent = np.var(diff[True], ddof=1), np.var(diff[False], ddof=1)
    assert crn > 0  # the policies do differ
    assert crn < 0.5 * independent, (crn, independent)

"""rbjax.runners.rollout: whole random-policy episodes, determinism, batch position, chunks of stores."""

import golden
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.policies import RandomParams, random_policy
from rbjax.runners.rollout import RolloutOptions, rollout

STORES, PER_CALL = golden.STORES, golden.DAYS  # the golden fixture's program: 4 stores, 30 days per call


@pytest.fixture(scope="module")
def episodes(env, params):
    """The golden fixture's four random-policy stores for 180 days (six calls of 30), full records."""
    keys = jax.random.split(jax.random.key(golden.SEED), STORES)
    rec, final = rollout(
        env, random_policy, RandomParams.default(), params, keys, days=180, records="full", progress=PER_CALL
    )
    return jax.tree.map(np.asarray, rec), final


@pytest.mark.slow
def test_calls_of_thirty_days_continue_the_golden_records(episodes):
    want = golden.expected_records("random")
    assert sorted(vars(episodes[0])) == sorted(want)
    for name, value in vars(episodes[0]).items():
        assert np.array_equal(value[:, :PER_CALL], want[name], equal_nan=True), name


@pytest.mark.slow
def test_unit_conservation(episodes):
    rec, final = episodes
    alive = rec.alive[..., None]
    ordered = (rec.ordered * alive).sum(1)
    accounted = (
        rec.sold.sum(1)
        + rec.expired.sum(1)
        + np.asarray(final.lots.store).sum(-1)
        + np.asarray(final.lots.wait).sum(-1)
        + np.asarray(final.pending.qty).sum(1)
    )
    assert rec.ordered.sum() > 0 and (ordered == accounted).all()
    assert (rec.returned <= rec.sold).all()


@pytest.mark.slow
def test_cash_identity(episodes, params):
    rec, final = episodes
    days = rec.alive.sum(1)
    expected = (
        float(params.initial_funds)
        - rec.order_cost.sum(1)
        + rec.revenue.sum(1)
        - rec.refunds.sum(1)
        - float(params.rent) * days
    )
    np.testing.assert_allclose(np.asarray(final.funds), expected, rtol=1e-5, atol=1.0)


@pytest.mark.slow
def test_episodes_finite_and_off_shelf_never_sells(episodes):
    rec, final = episodes
    for leaf in jax.tree.leaves(final):
        if jnp.issubdtype(leaf.dtype, jnp.floating):
            assert np.isfinite(np.asarray(leaf)).all()
    assert np.isfinite(rec.net_worth).all()
    assert rec.sold[..., 40:].sum() == 0  # the random policy shelves products 0..39 only
    assert (rec.sold <= rec.demand).all()
    assert (rec.stockout == (rec.demand > rec.sold)).all()


@pytest.mark.slow
def test_same_key_same_trajectory_and_batched_equals_unbatched(env, params, reset, step, episodes):
    rec, _ = episodes
    key = jax.random.split(jax.random.key(golden.SEED), STORES)[1]
    k_reset, k_run = jax.random.split(key)
    obs, s = reset(k_reset, params)
    policy = jax.jit(random_policy)
    for d in range(12):
        k_pol, k_env = jax.random.split(jax.random.fold_in(k_run, d))
        obs, s, r, term, trunc, info = step(
            k_env, s, policy(RandomParams.default(), obs, None, k_pol), params
        )
        assert (np.asarray(info.sold) == rec.sold[1, d]).all()
        np.testing.assert_allclose(float(info.net_worth), rec.net_worth[1, d], rtol=1e-6)


@pytest.mark.slow
def test_a_store_does_not_depend_on_its_position_in_a_large_batch(env, params, episodes):
    """1,024 stores = 32 copies of 32 seeds: every copy must match the first, record for record.

    Guards an XLA:CPU miscompile: with the review gain written as a float power, stores at positions
    >= B/3 of a 1,024-store batch read another product's gain from day 3 on, so a swept point's results
    depended on where it sat in the batch (an (s, S) point scored 89 days alone and 146 in a sweep).
    """
    from rbjax.policies import BEST_RATED, SSParams, s_S

    seeds, copies = 32, 32
    keys = jnp.concatenate([jax.random.split(jax.random.key(0), seeds)] * copies)
    policy_params = SSParams.default().replace(supplier=jnp.int32(BEST_RATED))
    # one supplier world for every store (the miscompile is not in the suppliers): 1,024 resets without the
    # supplier selection. The world is the first golden store's (a store keeps its world all episode).
    params = params.replace(world=jax.tree.map(lambda x: x[0], episodes[1].world))
    rec, _ = rollout(env, s_S, policy_params, params, keys, days=10, records="full")
    for name, x in zip(rec.__dataclass_fields__, jax.tree.leaves(rec)):
        x = np.asarray(x).reshape((copies, seeds) + x.shape[1:])
        differ = [c for c in range(1, copies) if not np.array_equal(x[c], x[0])]
        assert not differ, f"DayInfo.{name}: copies {differ[:5]} differ from the first"
    assert np.asarray(rec.sold).sum() > 0


def _same(a, b) -> bool:
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: np.array_equal(x, y, equal_nan=True), a, b)))


@pytest.mark.slow
def test_chunks_of_stores_equal_one_batch(env, params, episodes, capsys):
    """7 stores in chunks of 4 (the last padded) reuse the episodes' program (30 days per call) and give each
    store the records and final state it has in one batch: the keys are the episodes' four, reordered and
    repeated."""
    keys = jax.random.split(jax.random.key(golden.SEED), STORES)
    order = [0, 1, 2, 3, 1, 2, 0]
    options = RolloutOptions(records="full", store_chunk=STORES, progress=PER_CALL)  # the object form
    rec, final = rollout(
        env, random_policy, RandomParams.default(), params, keys[np.array(order)], 180, options
    )
    want = jax.tree.map(lambda x: np.asarray(x)[order], episodes)
    assert isinstance(rec.sold, np.ndarray) and rec.sold.shape[:2] == (7, 180)
    assert _same((rec, final), want)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("rollout: 7 stores x 180 days in 2 chunks of 4 stores on ")
    assert lines[1] == "rollout: compiling the reset and the day, then drawing supplier worlds for stores 0-3"
    assert lines[2].startswith("rollout: stores 0-3 compiled and opened in ")
    # the day compiled while the stores opened: the estimate starts with the first call; the first chunk's
    # opening (it compiled) is not counted in it
    assert lines[3].startswith("rollout: stores 0-3, day 30/180,") and lines[3].endswith(
        " + opening 1 more chunk"
    )
    assert lines[9].startswith("rollout: stores 4-6 opened (supplier worlds, pre-opening history) in ")
    assert " left" in lines[10] and "opening" not in lines[10]
    assert lines[-1].startswith("rollout: stores 4-6, day 180/180,") and "left" not in lines[-1]


def test_the_day_is_made_while_the_reset_compiles(env, params, monkeypatch):
    """The reset's program and every call length of the day's (30, and the last call's 15 of 45 days) start
    compiling before any is waited for, the day's from stand-ins of the reset's outputs; the stores open as
    soon as the reset's program is ready, and the days run on the programs compiled for the stand-ins.
    Recorded on stand-in programs: nothing compiles."""
    from rbjax.runners import rollout as module

    events = []

    class Pending:
        def __init__(self, name, out_info, run):
            self.name, self.out_info, self.run = name, out_info, run

        def result(self):
            events.append(("ready", self.name))
            return self.run

    def reset(keys, env_params):
        events.append(("reset",))
        return jnp.zeros(len(keys)), jnp.zeros(len(keys))

    class Reset:
        def start(self, keys, env_params):
            events.append(("start", "reset"))
            one = jax.ShapeDtypeStruct((len(keys),), jnp.float32)
            return Pending("reset", (one, one), reset)

    class Day:
        def start(self, policy_params, env_params, obs, state, key, day, length):
            assert isinstance(obs, jax.ShapeDtypeStruct) and obs.sharding.device_set == {jax.devices()[0]}
            events.append(("start", length))

            def run(policy_params, env_params, obs, state, key, day):
                events.append(("call", length))
                return (obs, state), jnp.zeros((len(key), length))

            return Pending(length, None, run)

    monkeypatch.setattr(module, "compiled", lambda *args: (Reset(), Day()))
    keys = jax.random.split(jax.random.key(golden.SEED), STORES)
    rec, _ = rollout(env, random_policy, RandomParams.default(), params, keys, 45, days_per_call=30)
    assert rec.shape == (STORES, 45)
    assert events[:3] == [("start", "reset"), ("start", 15), ("start", 30)]
    assert events[3:6] == [("ready", "reset"), ("reset",), ("ready", 15)]
    assert events[6:] == [("ready", 30), ("call", 30), ("call", 15)]


def test_bench_and_a_rollout_of_the_same_shapes_share_their_programs(env, params):
    """``rbjax bench`` places its inputs as a rollout does: a rollout after it compiles nothing (here the golden
    oracle's programs). Arrays placed otherwise, even on the same device, make jit compile the programs again."""
    from rbjax.perf.bench import throughput
    from rbjax.policies import OracleParams, oracle

    devices = tuple(jax.devices()[:1])
    throughput(env, params, "oracle", devices, STORES, PER_CALL, records="full")
    lowered = []

    def listen(event, seconds, **kwargs):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(kwargs.get("fun_name", ""))

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        keys = jax.random.split(jax.random.key(golden.SEED), STORES)
        rollout(
            env, oracle, OracleParams.default(), params, keys, days=PER_CALL, records="full", devices=devices
        )
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    # a stored program lowers as jit(call), a plain one as jit(reset) or jit(advance)
    assert not [n for n in lowered if any(p in n for p in ("call", "reset", "advance"))], lowered


@pytest.mark.slow
def test_the_automatic_chunk_is_what_fits_in_memory(env, params, episodes, monkeypatch):
    """With the host's memory faked to hold the fixed part and 4.5 stores' peak footprint twice over, 7 stores
    run as 4 + 3: a batch below any size is sized too."""
    from rbjax.runners import memory
    from rbjax.runners import rollout as module

    per_store = memory.store_peak_bytes(env, "full", 180)
    assert per_store == memory.PEAK_PER_STATE * memory.store_bytes(env) + 180 * memory.record_bytes(
        env, "full"
    )
    assert memory.store_bytes(env) == env.state_bytes(episodes[1]) // STORES  # the estimate is the real state
    monkeypatch.setattr(
        memory, "host_available_bytes", lambda: int(2 * (memory.FIXED_BYTES + 4.5 * per_store))
    )
    assert memory.auto_store_chunk(env, "full", 180, tuple(jax.devices())) == STORES
    order = [2, 0, 1, 3, 1, 3, 2]
    keys = jax.random.split(jax.random.key(golden.SEED), STORES)[np.array(order)]
    chunks = list(
        module.rollout_chunks(
            env, random_policy, RandomParams.default(), params, keys, 180, records="full", progress=PER_CALL
        )
    )
    assert [(c.start, c.stop) for c in chunks] == [(0, 4), (4, 7)]
    assert _same(chunks[1].records, jax.tree.map(lambda x: np.asarray(x)[order[4:]], episodes[0]))


@pytest.mark.slow
def test_records_writer_streams_chunks_into_one_npz(tmp_path, episodes):
    from rbjax.files.record_files import RecordsWriter

    rec = episodes[0]
    with RecordsWriter(tmp_path / "r.npz", STORES) as w:
        w.write(2, jax.tree.map(lambda x: x[2:], rec))
        w.write(0, jax.tree.map(lambda x: x[:2], rec))
    saved = np.load(tmp_path / "r.npz")
    assert sorted(saved.files) == sorted(rec.__dataclass_fields__)
    assert all(np.array_equal(saved[k], v) for k, v in vars(rec).items())
    with (
        pytest.raises(ValueError, match="2 of 3 stores written"),
        RecordsWriter(tmp_path / "short.npz", 3) as w,
    ):
        w.write(0, jax.tree.map(lambda x: x[:2], rec))
        w.write(1, jax.tree.map(lambda x: x[1:2], rec))  # a store written twice does not count twice
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.npz"]  # no partial file, no scratch folder


def test_rollout_options_are_one_object_given_whole_or_by_field():
    """``rollout``, ``rollout_chunks`` and ``rollout_from`` take their options as a ``RolloutOptions`` or its
    fields; a field that is not one, or a bad value, is refused naming it."""
    base = RolloutOptions(records="full", store_chunk=4)
    assert RolloutOptions.given(base, days_per_call=30) == RolloutOptions(
        records="full", store_chunk=4, days_per_call=30
    )
    assert RolloutOptions.given(None, devices=[1]) == RolloutOptions(devices=(1,))  # devices held as a tuple
    with pytest.raises(TypeError, match="no option 'record'"):
        RolloutOptions.given(base, record="full")
    with pytest.raises(ValueError, match="records must be 'summary' or 'full'"):
        RolloutOptions(records="all")
    with pytest.raises(ValueError, match="store_chunk"):
        RolloutOptions(store_chunk=0)

"""Sessions over the session pool (``rbjax.lm``): the stores' past comes from the history file, not from playing
days again; the reference played through a session scores exactly 0; the same calls give the same rewards;
a session's calls never touch another store; an episode stopped early is played to its horizon; errors are
clear."""

import asyncio
import dataclasses
import json
import shutil

import jax
import numpy as np
import pandas as pd
import pytest
from conftest import DAYS, EVERY, STORES, TAIL, TASK_DAYS

from rbjax import policies
from rbjax.agents.engine.batch import AgentEngine
from rbjax.agents.runs import history
from rbjax.agents.runs.loop import make_stores, run_async
from rbjax.agents.runs.policy import PolicyDriver, policy_calls
from rbjax.lm.pool import SessionPool
from rbjax.lm.session import SessionError
from rbjax.lm.tasks import Task

pytestmark = pytest.mark.slow  # a slices run, its tool history and the session programs


@pytest.fixture(scope="module")
def pool(tasks):
    return SessionPool.for_task(tasks[0], slots=8)


def play_reference(pool, session):
    """Drive the oracle through ``session``'s tools, as an agent would (``policy.policy_calls``)."""
    driver = PolicyDriver(pool.engine, *policies.make("oracle", pool.env))
    while not session.done:
        today = pool.engine.today(session.slot)
        for name, args in policy_calls(driver.action(session.slot), today, session.tools.names):
            session.call(name, args)
        session.end_today()
    return session.info()


def test_tasks_file_reads_as_a_table_and_round_trips(tasks_file, tasks):
    table = pd.read_json(tasks_file, lines=True, dtype=False)
    assert len(table) == len(tasks) == STORES and set(table["day"]) == {EVERY}
    assert set(table.columns) == set(Task.__dataclass_fields__)
    rows = [json.loads(line) for line in tasks_file.read_text().splitlines()]
    assert [Task.from_row(r) for r in rows] == tasks
    assert all(t.days == TASK_DAYS and t.scale > 0 and t.prompt[0]["role"] == "user" for t in tasks)
    with pytest.raises(ValueError, match="field 'days'"):
        Task.from_row({**tasks[0].to_row(), "days": "two"})
    with pytest.raises(ValueError, match="field 'store' is missing"):
        Task.from_row({k: v for k, v in tasks[0].to_row().items() if k != "store"})


def test_the_history_file_holds_what_playing_the_days_through_the_tools_gives(env, slices_dir, tasks):
    """The kept history (made with the read calls counted, not run) is the ledgers and news of the source
    policy played through every tool, the runner's morning views and read calls included."""
    from rbjax.files import snapshots

    snap = snapshots.load(slices_dir / f"day_{EVERY:03d}.npz", env)
    params = snap.env_params(env)
    engine = AgentEngine(env, params, snap.keys)
    stores = make_stores(engine, None)
    driver = PolicyDriver(engine, *policies.make("oracle", env))
    asyncio.run(run_async(engine, stores, driver.act, stop=EVERY))
    kept = history.load(
        str(slices_dir / history.history_name(EVERY)),
        stores[0].ledger.__class__(stores[0].ledger.first_cal, len(stores[0].ledger.price), 96, 5),
        EVERY,
        history.file_digest(str(slices_dir / f"day_{EVERY:03d}.npz")),
    )
    for s, store in enumerate(stores):
        (fields, arrays), (kept_fields, kept_arrays) = store.ledger.to_data(), kept.ledgers[s].to_data()
        assert fields == kept_fields
        assert fields["orders"], "the slice should have orders to compare"
        for k in arrays:
            np.testing.assert_array_equal(arrays[k], kept_arrays[k], err_msg=k)
        assert store.news_today == kept.news_today[s]


def test_opening_plays_no_day(pool, tasks, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("opening a task played days again")

    monkeypatch.setattr(history, "warm_up", refuse)
    steps = pool.engine.version
    session = pool.open(tasks[1])
    assert "Current date:" in session.morning and session.day == EVERY
    assert pool.engine.version == steps + 1  # the slot's load, no step
    pool.close(session)


def test_the_reference_with_its_continuation_scores_exactly_zero(pool, tasks):
    for task in tasks:
        session = pool.open(task)
        info = play_reference(pool, session)
        assert info["reward"] == 0.0 and info["gain"] == task.reference_gain
        assert info["reason"] == "horizon" and info["days_played"] == TASK_DAYS == len(info["daily"])
        assert info["day"] == EVERY + TASK_DAYS + TAIL and session.end == info["day"]
        tail = info["tail"]
        assert (
            tail["days"] == tail["days_played"] == TAIL == len(tail["daily"])
            and tail["reference"] == "oracle"
        )
        assert sum(info["daily"]) == pytest.approx(info["decided_gain"], rel=1e-6)
        assert sum(tail["daily"]) == pytest.approx(tail["gain"], rel=1e-6)
        assert info["decided_gain"] + tail["gain"] == pytest.approx(info["gain"], rel=1e-9)
        pool.close(session)


def scripted_day(session):
    """A few decisions: a price change, an order of the first SKU, a note."""
    sku = session.tools.names.skus[0]
    session.call("modify_sku_price", {"sku_id": sku, "new_price": 9.99})
    session.call("place_order", {"items": [{"sku_id": sku, "quantity": 40}], "supplier_id": "supplier_2"})
    session.call("add_note", {"content": "ordered"})


def test_same_calls_same_rewards_and_no_store_touches_another(pool, tasks):
    a, b, other = pool.open(tasks[0]), pool.open(tasks[0]), pool.open(tasks[1])
    seen = other.call("view_inventory")
    texts = {a.id: [], b.id: []}
    while not a.done:
        scripted_day(a)
        texts[a.id].append(a.end_today())  # a alone
        assert other.call("view_inventory") == seen  # a's day left the other store's morning as it was
        scripted_day(b)
        texts[b.id].append(pool.end_days([b])[b.id])
    assert texts[a.id] == texts[b.id]
    ia, ib = a.info(), b.info()
    assert ia["reward"] == ib["reward"] and ia["daily"] == ib["daily"] and ia["reward"] != 0.0
    for s in (a, b, other):
        pool.close(s)


def test_an_episode_stopped_early_is_played_to_its_horizon(pool, tasks):
    quiet, idle = pool.open(tasks[0]), pool.open(tasks[0])
    quiet.finish()
    while not idle.done:
        idle.end_today()
    assert quiet.info()["days_played"] == TASK_DAYS and quiet.info()["decided_days"] == 0
    assert quiet.info()["daily"] == idle.info()["daily"] and quiet.reward == idle.reward
    pool.close(quiet), pool.close(idle)


def test_async_sessions_share_one_step_a_day(pool, tasks):
    async def play(session):
        while not session.done:
            await session.acall("view_funds_and_date")
            await session.acall("end_today")
        return session.info()

    async def main():
        sessions = [pool.open(tasks[i % len(tasks)]) for i in range(6)]
        before = pool.scheduler.flushes
        infos = await asyncio.gather(*(play(s) for s in sessions))
        for s in sessions:
            pool.close(s)
        return infos, pool.scheduler.flushes - before

    infos, flushes = asyncio.run(main())
    assert flushes == TASK_DAYS + TAIL  # 6 sessions x (2 days + 2 of continuation) in 4 steps
    assert {i["reward"] for i in infos[0::2]} == {infos[0]["reward"]}


def test_errors_are_clear_and_leave_the_pool_usable(pool, tasks):
    s = pool.open(tasks[0])
    assert "Unknown tool" in s.call("no_such_tool")
    assert "error" in s.call("place_order", {"items": "lots"}).lower()
    s.finish()
    with pytest.raises(SessionError, match="finished"):
        s.call("view_inventory")
    pool.close(s)
    with pytest.raises(SessionError, match="closed"):
        s.end_today()
    with pytest.raises(SessionError, match="no open session"):
        pool.get(s.id)
    held = [pool.open(tasks[0]) for _ in range(len(pool.free))]
    with pytest.raises(SessionError, match="slots are taken|slots is taken|every one"):
        pool.open(tasks[0])
    for h in held:
        pool.close(h)
    late = dataclasses.replace(tasks[0], days=10_000)
    with pytest.raises(
        ValueError, match="days \\+ 4 of continuation\\): a slice of 10004 days from day 16 runs past"
    ):
        pool.open(late)
    assert len(pool.free) == pool.slots


def test_a_task_of_another_run_is_refused(pool, tasks, slices_dir, tmp_path):
    """A task whose folder was made in another env: the pool reads every day into its own env, and refuses a
    day whose run is not the pool's (here the folder's manifest says another grouping), naming the task; then a
    day whose snapshot cannot be read into its env at all."""
    other = tmp_path / "other"
    shutil.copytree(slices_dir, other)
    manifest = json.loads((other / "slices.json").read_text())
    (other / "slices.json").write_text(json.dumps({**manifest, "grouping": "ref19"}))
    with pytest.raises(ValueError, match="has another env or params than this pool's"):
        pool.open(dataclasses.replace(tasks[0], from_states=str(other)))
    snap = next(other.glob("day_*.npz"))
    snap.write_bytes(b"not a snapshot")
    other_day = dataclasses.replace(tasks[0], from_states=str(other), day=int(snap.stem.split("_")[1]))
    with pytest.raises(ValueError, match=f"task {other_day.id}: its day cannot be read into this pool's env"):
        pool.open(other_day)
    assert len(pool.free) == pool.slots


def test_the_engine_door_refuses_slots_and_states_that_do_not_fit(pool, tasks):
    """``AgentEngine.load`` (the one way stores enter slots) takes one store per distinct slot, or nothing."""
    import jax
    import numpy as np

    start = pool.start_of(tasks[0])
    one = jax.tree.map(lambda x: np.asarray(x)[:1], start.snapshot.state)
    before, version = jax.device_get(pool.engine.state), pool.engine.version
    for slots, states, said in [
        ([0, 0], jax.tree.map(lambda x: np.concatenate([x, x]), one), "distinct"),
        ([pool.slots], one, "distinct stores of 0"),
        ([0, 1], one, "one store per slot"),
        ([0], jax.tree.map(lambda x: x[0], one), "one store per slot"),  # a store without its axis
    ]:
        with pytest.raises(ValueError, match=said):
            pool.engine.load(slots, states, start.snapshot.keys[: len(slots)])
    after = jax.device_get(pool.engine.state)
    assert pool.engine.version == version
    assert all(
        np.array_equal(a, b, equal_nan=True) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after))
    )


def test_rewards_of_each_kind(tasks):
    from rbjax.lm import rewards

    t = tasks[0]
    assert rewards.reward("relative", t.reference_gain, t.reference_gain, t.scale) == 0.0
    assert rewards.reward("beat", t.reference_gain + 1, t.reference_gain, t.scale) == 1.0
    assert rewards.reward("beat", t.reference_gain, t.reference_gain, t.scale) == 0.0
    assert rewards.reward("gain", 12.5, t.reference_gain, t.scale) == 12.5
    assert rewards.scale(-5.0, 100.0, 2) == 200.0 and rewards.scale(1e6, 100.0, 2) == 1e6
    with pytest.raises(ValueError, match="reward must be one of"):
        rewards.check_kind("best")


def test_agents_from_states_take_the_kept_history(env, slices_dir, tasks):
    from rbjax.agents.runs.from_states import open_from_states

    lines = []
    _, sl, _ = open_from_states(str(slices_dir), at=EVERY, days=TASK_DAYS, note=lines.append)
    assert f"tool history from tools_day_{EVERY:03d}.npz" in lines[0]
    ledger = jax.tree.map(np.asarray, sl.stores[0].ledger.to_data()[1])
    kept = history.load(
        str(slices_dir / history.history_name(EVERY)),
        sl.stores[0].ledger,
        EVERY,
    )
    np.testing.assert_array_equal(ledger["units"], kept.ledgers[0].to_data()[1]["units"])


def test_doing_nothing_scores_below_zero(pool, tasks):
    """On the test tasks (3 days from day 16, past the oracle's first weeks) a store that orders nothing for
    its decided days and is then run by the reference ends below the reference's store. (That the
    continuation counts a decision's later effects: the last-day order below.)"""
    for task in tasks:
        idle = pool.open(task)
        info = idle.finish()
        assert info["reward"] < 0.0, (task.id, info)
        assert info["tail"]["days_played"] == TAIL and info["decided_days"] == 0
        pool.close(idle)


def test_a_last_day_order_moves_the_reward_through_the_continuation(pool, tasks, slices_dir):
    """An order of the last decided day is paid and on its way at the horizon, where net worth counts it at
    its cost: the decided days alone cannot tell it from no order (tail 0: the same reward to the bit). Its
    units arrive during the continuation, where they sell and age, so there it moves the reward."""
    from rbjax.lm.tasks import make_tasks

    short = make_tasks(str(slices_dir), days=TASK_DAYS, at=[EVERY], tail=0)[0]

    def play(task, order: bool) -> float:
        s = pool.open(task)
        while s.day < s.stop - 1:
            s.end_today()
        if order:  # the shelf product its quickest supplier brings soonest
            today, names = pool.engine.today(s.slot), s.tools.names
            lead = np.where(today.shelf[:, None], today.lead, 10**6)
            j, k = np.unravel_index(np.argmin(lead), lead.shape)
            assert lead[j, k] < TAIL
            item = {"sku_id": names.skus[j], "quantity": 200}
            assert "**Order placed**" in s.call(
                "place_order", {"items": [item], "supplier_id": names.suppliers[k]}
            )
        s.end_today()
        assert s.done and s.info()["tail"]["days_played"] == task.tail
        reward = s.reward
        pool.close(s)
        return reward

    # float32 funds and pending cost: the order's cost leaves one and enters the other to a float32 ulp
    without = play(short, order=True) - play(short, order=False)
    within = play(tasks[0], order=True) - play(tasks[0], order=False)
    assert abs(without) < 1e-5 and abs(within) > 100 * 1e-5, (without, within)


def test_a_continuation_past_the_horizon_is_refused(slices_dir):
    from rbjax.lm.tasks import make_tasks

    room = DAYS - EVERY - TASK_DAYS
    with pytest.raises(
        ValueError, match=rf"tail {room + 1}: .* passes the run's horizon {DAYS} \(at most {room} days"
    ):
        make_tasks(str(slices_dir), days=TASK_DAYS, at=[EVERY], tail=room + 1)
    with pytest.raises(ValueError, match="tail must be an int >= 0"):
        make_tasks(str(slices_dir), days=TASK_DAYS, at=[EVERY], tail=-1)


def test_tasks_without_a_continuation_score_the_decided_days_alone(slices_dir, tasks):
    """tail 0 is the task's days alone: its reference gain is the tail-2 task's decided part, which the
    session's info reports as the decided gain."""
    from rbjax.lm.tasks import make_tasks

    short = make_tasks(str(slices_dir), days=TASK_DAYS, at=[EVERY], tail=0)
    assert [t.tail for t in short] == [0] * STORES and all(
        t.id + f"-k{TAIL}" == u.id for t, u in zip(short, tasks)
    )
    pool = SessionPool.for_task(short[0], slots=2)
    for t, long in zip(short, tasks):
        s = pool.open(t)
        info = play_reference(pool, s)
        assert info["reward"] == 0.0 and info["tail"]["days_played"] == 0 and info["day"] == EVERY + TASK_DAYS
        assert t.reference_gain != long.reference_gain
        pool.close(s)

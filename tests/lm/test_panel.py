"""The headroom panel (``rbjax.lm.panel``): each member's reward is what a session playing as the member
scores; headroom and spread come from the members' rewards; the members see the task's random numbers."""

import dataclasses

import numpy as np
import pytest
from conftest import EVERY, TAIL, TASK_DAYS

from rbjax import policies
from rbjax.agents.runs.day_start import open_day_start
from rbjax.agents.runs.policy import PolicyDriver, policy_calls
from rbjax.lm import panel
from rbjax.lm.pool import SessionPool
from rbjax.lm.tasks import Task, make_tasks

pytestmark = pytest.mark.slow  # a slices run, its tool history, the panel's program and sessions


@pytest.fixture(scope="module")
def tasks(slices_dir):
    """The tasks of the shared slices (conftest's), with their panel."""
    return make_tasks(str(slices_dir), days=TASK_DAYS, at=[EVERY], tail=TAIL)


@pytest.fixture(scope="module")
def rewards(slices_dir, tasks):
    start = open_day_start(str(slices_dir), EVERY, days=TASK_DAYS)
    gains = [t.reference_gain for t in tasks]
    scales = [t.scale for t in tasks]
    return panel.panel_rewards(start, [t.store for t in tasks], TASK_DAYS, TAIL, "oracle", gains, scales)


def test_the_task_rows_hold_the_panel(tasks, rewards):
    assert rewards.shape == (len(tasks), len(panel.MEMBERS))
    for t, row in zip(tasks, rewards, strict=True):
        assert t.panel == dict(zip(panel.MEMBERS, row.tolist(), strict=True))
        assert t.headroom == -t.panel["null"] and t.spread == max(t.panel.values()) - min(t.panel.values())
        assert Task.from_row(t.to_row()) == t


def test_the_reference_member_scores_about_zero_and_doing_nothing_as_a_session_does(tasks, rewards):
    """The panel's scan and a session's agent engine are two XLA programs: equal to float rounding."""
    pool = SessionPool.for_task(tasks[0], slots=2, credit=False)
    ref, null = panel.MEMBERS.index("reference"), panel.MEMBERS.index("null")
    for t, row in zip(tasks, rewards, strict=True):
        assert abs(row[ref]) < 1e-5
        s = pool.open(t)
        s.finish()  # no decision on any day: prices and shelf kept, no order
        assert row[null] == pytest.approx(s.reward, rel=1e-4, abs=1e-6)
        assert s.reward < 0  # on these stores doing nothing costs (conftest)
        pool.close(s)
    pool.close_all()


def test_the_no_orders_member_is_the_reference_without_its_orders(tasks, rewards):
    pool = SessionPool.for_task(tasks[0], slots=1, credit=False)
    driver = PolicyDriver(pool.engine, *policies.make("oracle", pool.env))
    t = tasks[0]
    s = pool.open(t)
    while s.deciding:
        action = driver.action(s.slot)
        action = action.replace(order=np.zeros_like(action.order))
        for name, args in policy_calls(action, pool.engine.today(s.slot), s.tools.names):
            s.call(name, args)
        s.end_today()
    assert rewards[0, panel.MEMBERS.index("no_orders")] == pytest.approx(s.reward, rel=1e-4, abs=1e-6)
    pool.close_all()


def test_members_differ_and_the_random_numbers_are_the_tasks(slices_dir, tasks, rewards):
    """Every member but the reference moves the reward on some task; with other episode keys the panel's
    rewards change (the members play the task's own futures)."""
    assert (np.abs(rewards[:, 1:]) > 1e-6).any(0).all()
    start = open_day_start(str(slices_dir), EVERY, days=TASK_DAYS)
    start = dataclasses.replace(
        start, snapshot=dataclasses.replace(start.snapshot, keys=start.snapshot.keys[::-1])
    )
    gains, scales = [t.reference_gain for t in tasks], [t.scale for t in tasks]
    moved = panel.panel_rewards(start, [t.store for t in tasks], TASK_DAYS, TAIL, "oracle", gains, scales)
    assert not np.allclose(moved, rewards)

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
    start = open_day_start(str(slices_dir), EVERY)
    gains = [t.reference_gain for t in tasks]
    scales = [t.scale for t in tasks]
    return panel.panel_rewards(start, [t.store for t in tasks], TASK_DAYS, TAIL, "oracle", gains, scales)


def test_the_task_rows_hold_the_panel(tasks, rewards):
    assert rewards.shape == (len(tasks), len(panel.MEMBERS))
    for t, row in zip(tasks, rewards, strict=True):
        assert t.panel == dict(zip(panel.MEMBERS, row.tolist(), strict=True))
        assert t.headroom == -t.panel["null"] and t.spread == max(t.panel.values()) - min(t.panel.values())
        assert Task.from_row(t.to_row()) == t


def test_every_member_scores_what_a_session_playing_its_decisions_scores(tasks, rewards):
    """Member by member, task by task: a session whose days are the member's actions (``PanelPolicy`` with that
    member, driven through the tools as an agent calls them) scores the member's panel reward. The panel's scan
    and a session's agent engine are two XLA programs: equal to float rounding."""
    pool = SessionPool.for_task(tasks[0], slots=len(tasks), credit=False)
    reference = policies.make("oracle", pool.env)
    shared = (reference[1], policies.make("random", pool.env)[1])
    assert all(abs(row[panel.MEMBERS.index("reference")]) < 1e-5 for row in rewards)
    for m, member in enumerate(panel.MEMBERS):
        switch = np.int32(tasks[0].day + TASK_DAYS)
        params = (shared, (np.int32(m), switch, np.float32(panel.ORDER_SIGMA), np.float32(panel.PRICE_SIGMA)))
        driver = PolicyDriver(pool.engine, panel.PanelPolicy(reference[0]), params)
        sessions = [pool.open(t) for t in tasks]
        while any(s.deciding for s in sessions):
            for s in sessions:  # every session's calls, then every end_today: one batched step a day
                for name, args in policy_calls(
                    driver.action(s.slot), pool.engine.today(s.slot), s.tools.names
                ):
                    s.call(name, args)
            for s in sessions:
                s.end_today()
        for t, s, row in zip(tasks, sessions, rewards, strict=True):
            assert row[m] == pytest.approx(s.reward, rel=1e-4, abs=1e-6), (member, t.id)
            pool.close(s)
    for t, row in zip(tasks, rewards, strict=True):  # null is what a session that makes no decision scores
        s = pool.open(t)
        s.finish()
        assert row[panel.MEMBERS.index("null")] == pytest.approx(s.reward, rel=1e-4, abs=1e-6)
        assert s.reward < 0  # on these stores doing nothing costs (conftest)
        pool.close(s)
    pool.close_all()


def test_members_differ_and_the_random_numbers_are_the_tasks(slices_dir, tasks, rewards):
    """Every member but the reference moves the reward on some task; with other episode keys the panel's
    rewards change (the members play the task's own futures)."""
    assert (np.abs(rewards[:, 1:]) > 1e-6).any(0).all()
    start = open_day_start(str(slices_dir), EVERY)
    start = dataclasses.replace(
        start, snapshot=dataclasses.replace(start.snapshot, keys=start.snapshot.keys[::-1])
    )
    gains, scales = [t.reference_gain for t in tasks], [t.scale for t in tasks]
    moved = panel.panel_rewards(start, [t.store for t in tasks], TASK_DAYS, TAIL, "oracle", gains, scales)
    assert not np.allclose(moved, rewards)

"""``rbjax lm tasks`` on the command line: the tasks file, and one-line errors before any work."""

import json

import pytest
from conftest import EVERY, STORES, TAIL, TASK_DAYS

from rbjax.cli import main
from rbjax.lm.panel import MEMBERS

pytestmark = pytest.mark.slow  # a slices run and its tool history


def test_lm_tasks_writes_one_row_per_store(slices_dir, tmp_path, capsys):
    """The module's tasks (TASK_DAYS, TAIL), with the panel: its programs are tests/lm/test_panel.py's."""
    out = tmp_path / "tasks.jsonl"
    main(
        ["--devices", "1", "lm", "tasks", "--from-states", str(slices_dir), "--days", str(TASK_DAYS)]
        + ["--tail", str(TAIL), "--out", str(out)]
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["day"], r["store"], r["days"], r["tail"]) for r in rows] == [
        (EVERY, s, TASK_DAYS, TAIL) for s in range(STORES)
    ]
    assert f"{TAIL} more day(s)" in rows[0]["prompt"][0]["content"]
    said = capsys.readouterr().out
    assert f"wrote {STORES} tasks to {out}" in said and "oracle gain" in said and "headroom" in said
    assert all(set(r["panel"]) == set(MEMBERS) and r["headroom"] == -r["panel"]["null"] for r in rows)


def test_lm_tasks_keeps_the_tasks_with_headroom_and_mixes_horizons(slices_dir, tmp_path, capsys):
    """Two horizons in one file; --min-headroom between the two tasks' headrooms keeps the larger. No tail: the
    panel's 3 days are tests/agents/test_agent_save_states.py's, its 7 the first test's (TASK_DAYS + TAIL)."""
    out = tmp_path / "tasks.jsonl"
    base = [
        "--devices",
        "1",
        "lm",
        "tasks",
        "--from-states",
        str(slices_dir),
        "--tail",
        "0",
        "--out",
        str(out),
    ]
    longer = TASK_DAYS + TAIL
    main([*base, "--days", f"3,{longer}"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["days"], r["store"]) for r in rows) == [
        (d, s) for d in (3, longer) for s in range(STORES)
    ]
    room = sorted(r["headroom"] for r in rows if r["days"] == 3)
    assert room[0] < room[-1]
    main([*base, "--days", "3", "--min-headroom", str((room[0] + room[-1]) / 2)])
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["headroom"] for r in kept] == [room[-1]]
    said = capsys.readouterr().out
    assert f"wrote 1 task to {out}" in said and "(of 2: those with headroom >=" in said
    with pytest.raises(SystemExit, match="none of the 2 tasks has that much headroom"):
        main([*base, "--days", "3", "--min-headroom", "1e9"])


@pytest.mark.parametrize(
    "flags, message",
    [
        ("--days 99", "--days 99"),
        (
            "--days 2",
            "--tail 14: day 16 + 2 decided days + 14 days of continuation passes the run's horizon 24",
        ),
        ("--days 2 --tail 7", "(at most 6 days of continuation fit)"),
        ("--days 2 --tail -1", "--tail -1: expected 0 or more days"),
        ("--days 2 --at 5", "day 5"),
        ("--days 2 --at x", "--at x: expected snapshot days"),
        ("--days 2 --reference nobody", "--reference nobody"),
        ("--days 2 --tail 0 --stores 9", "--stores 9"),
        ("--days 2,x", "--days 2,x: expected days"),
        ("--days 0", "--days 0: expected 1 or more days"),
        ("--days 2 --no-panel --min-headroom 0.1", "--min-headroom needs the panel"),
    ],
)
def test_lm_tasks_errors_are_one_line(slices_dir, tmp_path, flags, message):
    out = tmp_path / "t.jsonl"
    with pytest.raises(SystemExit) as e:
        main(
            [
                "--devices",
                "1",
                "lm",
                "tasks",
                "--from-states",
                str(slices_dir),
                *flags.split(),
                "--out",
                str(out),
            ]
        )
    text = str(e.value.code)
    assert message in text and "\n" not in text and not out.exists()


def test_lm_tasks_refuses_an_unwritable_out_before_working(slices_dir, tmp_path):
    with pytest.raises(SystemExit, match="cannot write"):
        main(
            [
                "lm",
                "tasks",
                "--from-states",
                str(slices_dir),
                "--days",
                "2",
                "--out",
                str(tmp_path / "no" / "t"),
            ]
        )

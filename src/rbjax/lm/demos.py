"""Demonstrations: a teacher policy's decided days played through the 21 tools of a session, as chat rows.

For each task a session is opened as ``rbjax lm serve`` opens it; each morning the teacher's action for the
store (``SessionPool.reference_action``: the action ``rollout`` would compute, the task's random numbers) is
made with the fewest calls that carry it (``teacher_calls``), ``end_today`` last; the continuation and the
reward are the session's own. Every task's store is stepped in one batched step a day. A row holds:

- ``messages``: the episode as served (``rbjax.lm.conversation``: the task's prompt with the first morning,
  then per day one assistant message of tool calls and a tool message per call), ``tools``: the 21 tools;
- ``id`` (the task's), ``task`` (its row, so the file replays alone), ``teacher``, ``reward`` (the
  session's, its pool's kind: relative by default), ``turn_rewards`` (each decided day's credit,
  ``rbjax.lm.credit``), ``info`` (the session's ``info()``);
- ``calls_per_day``, ``call_tokens_per_day`` (what the model says: its calls) and ``result_tokens_per_day``
  (what it reads: the tools' answers), ``tokens``: how they were counted (a tokenizer's name, or
  ``"estimate: 4 characters a token"``).

No rationale is written: a teacher's numbers are its action and the rewards, all in the row; rbjax does not
invent text. ``replay`` plays a file's calls again and compares every answer and reward.

>>> rows = demonstrate(read_tasks("tasks.jsonl"), teacher="plan")
>>> write_rows(rows, "demos.jsonl")    # datasets.load_dataset("json", data_files="demos.jsonl")
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Sequence

import numpy as np

from rbjax import policies
from rbjax.agents.runs.policy import order_calls
from rbjax.arguments import ArgumentError
from rbjax.files.record_files import atomic_file
from rbjax.lm import conversation
from rbjax.lm.pool import SessionPool
from rbjax.lm.tasks import Task

ESTIMATE = "estimate: 4 characters a token"


def teacher_calls(action, today, names) -> list[tuple[str, dict]]:
    """The fewest calls that make ``action`` (numpy leaves of one store) on the morning ``today``: one
    ``modify_sku_price`` per price called, ``set_shelf_skus`` when the shelf changes, one single-line
    ``place_order`` per order line in the action's call order (a multi-line order takes its longest lead for
    every line: not the same action), then ``end_today``."""
    price = np.asarray(action.price, np.float32)
    priced = price != today.prices if action.set_price is None else np.asarray(action.set_price, bool)
    # a price as float32 writes it shortest (it reads back to the same float32)
    calls = [
        ("modify_sku_price", {"sku_id": names.skus[j], "new_price": float(str(price[j]))})
        for j in np.flatnonzero(priced)
    ]
    shelf = np.asarray(action.shelf, bool)
    if not np.array_equal(shelf, today.shelf):
        calls.append(("set_shelf_skus", {"sku_ids": [names.skus[j] for j in np.flatnonzero(shelf)]}))
    rank = None if action.order_rank is None else np.asarray(action.order_rank)
    for j, k, units in order_calls(np.asarray(action.order), rank):
        line = {"items": [{"sku_id": names.skus[j], "quantity": units}], "supplier_id": names.suppliers[k]}
        calls.append(("place_order", line))
    return [*calls, ("end_today", {})]


def token_counter(tokenizer: str | None = None) -> tuple[Callable[[str], int], str]:
    """(count, how): ``count(text)`` tokens of a text with the Hugging Face tokenizer ``tokenizer`` (a local
    folder or a cached hub name; needs ``transformers``), or, without one, ceil(characters / 4)."""
    if tokenizer is None:
        return (lambda text: math.ceil(len(text) / 4)), ESTIMATE
    try:
        from transformers import AutoTokenizer  # lazy: optional (the trl extra)
    except ImportError:
        raise ArgumentError(
            "{tokenizer} needs transformers (pip install transformers)", "tokenizer"
        ) from None
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as e:  # noqa: BLE001 (any loader failure is one line naming the flag)
        raise ArgumentError(
            f"{{tokenizer}} {tokenizer}: {type(e).__name__}: {e}"[:300], "tokenizer"
        ) from None
    return (lambda text: len(tok.encode(text, add_special_tokens=False))), f"tokenizer: {tokenizer}"


def check_teacher(teacher: str, env) -> None:
    """ArgumentError (one line, naming ``teacher``) unless ``teacher`` is a policy the pool can make."""
    if teacher not in policies.NAMES:
        raise ArgumentError(f"{{teacher}} {teacher}: not a policy ({', '.join(policies.NAMES)})", "teacher")
    try:
        policies.make(teacher, env)
    except ValueError as e:
        raise ArgumentError(f"{{teacher}} {teacher}: {e}", "teacher") from None


def open_pool(tasks: Sequence[Task], slots: int, **pool_options) -> SessionPool:
    """A pool for ``tasks`` (at most ``slots`` stores at once); ArgumentError naming ``tasks`` when the file
    holds no task or tasks of runs that cannot share an engine."""
    if not tasks:
        raise ArgumentError("{tasks}: no task", "tasks")
    pool = None
    for t in tasks:  # every task's snapshot opened (and checked to share the pool's run) before any play
        try:
            if pool is None:
                pool = SessionPool.for_task(t, slots=slots, **pool_options)
            else:
                pool.start_of(t)
        except ValueError as e:
            if pool is not None:
                pool.close_all()
            raise ArgumentError(f"{{tasks}}: task {t.id} cannot be opened: {e}", "tasks") from None
    return pool


def demonstrate(
    tasks: Sequence[Task],
    teacher: str,
    form: str = "trl",
    slots: int = 64,
    tokenizer: str | None = None,
    note: Callable[[str], None] | None = None,
    pool: SessionPool | None = None,
) -> list[dict]:
    """One row per task (the module's docstring): ``teacher`` (a policy name) plays the decided days of each,
    ``slots`` tasks at a time in one batched engine. form: ``conversation.FORMATS``. tokenizer: see
    ``token_counter``. note: called with a line per batch of tasks. pool: an open pool to use (its reward kind
    and options; made here when None). ArgumentError (one line) naming ``tasks``, ``teacher``, ``form`` or
    ``tokenizer``."""
    if form not in conversation.FORMATS:
        raise ArgumentError(
            f"{{form}} must be one of {', '.join(conversation.FORMATS)}, got {form!r}", "form"
        )
    count, how = token_counter(tokenizer)

    def calls_of(pool: SessionPool, i: int, s, day: int) -> list[tuple[str, dict]]:
        # every live store's action comes from one call of the teacher (per engine step)
        return teacher_calls(pool.reference_action(teacher, s.slot), pool.engine.today(s.slot), s.tools.names)

    def row_of(i: int, s, opening: list[dict], days: list) -> dict:
        talk, spoken, heard = list(opening), [], []
        for n, (calls, answers) in enumerate(days):
            messages = conversation.day(calls, answers, n, form)
            talk += messages
            spoken.append(count(json.dumps(messages[0]["tool_calls"])))
            heard.append(sum(count(m["content"]) for m in messages[1:]))
        info = s.info()
        return {
            "id": s.task.id,
            "task": s.task.to_row(),
            "teacher": teacher,
            "reward": s.reward,
            "turn_rewards": info["turn_rewards"],
            "calls_per_day": [len(c) for c in conversation.days_of(talk)],
            "call_tokens_per_day": spoken,
            "result_tokens_per_day": heard,
            "tokens": how,
            "info": info,
            "messages": talk,
            "tools": conversation.tools(),
        }

    with pool_for(tasks, slots, pool) as pool:
        check_teacher(teacher, pool.env)
        said = (
            None if note is None else lambda n: note(f"demos: {n} of {len(tasks)} tasks played by {teacher}")
        )
        return play(pool, tasks, calls_of, row_of, said)


@contextlib.contextmanager
def pool_for(tasks: Sequence[Task], slots: int, pool: SessionPool | None = None):
    """``pool``, or a pool opened for ``tasks`` (``open_pool``, at most ``slots`` stores at once) and closed
    after."""
    own = pool is None
    pool = open_pool(tasks, min(slots, len(tasks))) if own else pool
    try:
        yield pool
    finally:
        if own:
            pool.close_all()


def play(
    pool: SessionPool,
    tasks: Sequence[Task],
    calls_of: Callable,
    row_of: Callable,
    note: Callable[[int], None] | None = None,
) -> list:
    """One row per task, the pool's slots at a time, each batch's days stepped together (``_days``): the loop of
    ``demonstrate`` and ``rbjax.lm.replay_demos.replay``. calls_of(pool, i, session, day): task ``i``'s calls
    on its decided day ``day`` (``(name, args)`` pairs; ``end_today`` ends the day, what follows it is not
    made), or None when it has no more; row_of(i, session, opening, days): its row, ``opening`` the
    conversation's opening (``conversation.opening``) and ``days`` [(calls made, their answers)] a day. note:
    called with the rows done after each batch."""
    rows = []
    for at in range(0, len(tasks), pool.slots):
        rows += _days(pool, tasks[at : at + pool.slots], at, calls_of, row_of)
        if note is not None:
            note(len(rows))
    return rows


def _days(pool: SessionPool, tasks: Sequence[Task], first: int, calls_of, row_of) -> list:
    """The rows of ``tasks`` (at most the pool's slots; task ``first + i`` to the callbacks), their days stepped
    together: each deciding session's calls made through its tools, then every day that ``end_today`` ends in
    one batched step; a session still deciding when no more calls come plays the rest as a session does."""
    sessions = []
    for t in tasks:
        try:
            sessions.append(pool.open(t))
        except ValueError as e:
            for s in sessions:
                pool.close(s)
            raise ArgumentError(f"{{tasks}}: {e}", "tasks") from None
    openings = [conversation.opening(s.task.prompt, s.morning) for s in sessions]
    days = [[] for _ in sessions]
    day = 0
    while True:
        made, enders = {}, []
        for i, s in enumerate(sessions):
            calls = calls_of(pool, first + i, s, day) if s.deciding and not s.done else None
            if calls is None:
                continue
            done, answers = [], []
            for name, args in calls:
                done.append((name, args))
                if name == "end_today":
                    enders.append(i)
                    break
                answers.append(s.call(name, args))
            made[i] = (done, answers)
        if not made:
            break
        ended = pool.end_today([sessions[i] for i in enders])
        for i, (done, answers) in made.items():
            if i in enders:
                answers.append(ended[sessions[i].id])
            days[i].append((done, answers))
        day += 1
    rows = []
    for i, s in enumerate(sessions):
        if s.deciding and not s.done:  # no more calls: the rest as a session plays them
            s.finish()
        rows.append(row_of(first + i, s, openings[i], days[i]))
        pool.close(s)
    return rows


def write_rows(rows: Sequence[dict], path: str) -> None:
    """``rows`` as JSON Lines in ``path`` (written atomically)."""
    with atomic_file(path) as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def read_rows(path: str, where: str = "demos") -> list[dict]:
    """The rows of a demonstrations file; ArgumentError naming ``where`` for a missing file or a row that is
    not one (no ``task``, ``messages`` or ``reward``)."""
    if not os.path.isfile(path):
        raise ArgumentError(f"{{{where}}} {path}: no such file", where)
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ArgumentError(f"{{{where}}} {path} line {n}: not JSON ({e.msg})", where) from None
            missing = [k for k in ("task", "messages", "reward") if not isinstance(row, dict) or k not in row]
            if missing:
                raise ArgumentError(
                    f"{{{where}}} {path} line {n}: no {missing[0]!r} (not a demonstration)", where
                )
            rows.append(row)
    return rows

"""The rbjax supermarket tasks as a verifiers 0.4.0 taskset; the simulator itself runs in ``rbjax lm serve``.

One row of the tasks file (``rbjax.lm.tasks.write_tasks``) is one task: a store of a snapshot taken over
for a few days. A rollout's life on the server:

* ``setup``: ``POST /sessions`` with the task's row (``keep``: the session outlives the HTTP connection);
  the session id and the server's URL go into the rollout's state, where the shared toolset
  (``rbjax_retail.tools``) reads them on every call, and the morning's views are added to the prompt. The
  server opens only the tasks it serves, and only as it has them: a row that differs from the served task of
  its id in any field (a tasks file other than the server's) fails ``setup`` with the server's one-line error.
* the model's tool calls go through the toolset to ``POST /sessions/{id}/call``; when ``end_today`` ends
  the last day the server answers ``done`` and ``episode_over`` stops the rollout.
* ``finalize``: ``POST /sessions/{id}/finish`` plays any days the model left to the task's horizon with
  no new decisions (so every rollout of a task is scored over the same days), its info gives the reward
  and each decided day's credit (``trace.info["turn_rewards"]``, summing to the relative reward), then
  ``DELETE /sessions/{id}`` frees the store.

The reward is the server's (``rbjax lm serve --reward relative|gain|beat``), computed with the server's own
task; this package only passes it on.
"""

import json
import logging
import os
from typing import Any

import httpx
import verifiers.v1 as vf

from rbjax_retail.tools import TIMEOUT_S, RetailState, RetailTools, server_url

logger = logging.getLogger(__name__)


class RetailData(vf.TaskData):
    row: dict[str, Any]
    """The tasks file's row as written by rbjax (sent as is to open the session; the server checks it)."""


class RetailTaskConfig(vf.TaskConfig):
    url: str = ""
    """The simulator server (set from the taskset's ``url``)."""


class RetailTask(vf.Task[RetailData, RetailState, RetailTaskConfig]):
    @property
    def key(self) -> str:
        return str(self.data.id)

    def base_url(self) -> str:
        return (self.config.url or server_url()).rstrip("/")

    async def setup(self, trace: vf.Trace, runtime) -> None:
        url = self.base_url()
        body = {"task": self.data.row, "session_id": trace.id, "keep": True}
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            r = await http.post(f"{url}/sessions", json=body)
        out = _json(r, f"POST {url}/sessions")
        trace.state.url, trace.state.session = url, str(out["session"])
        morning = str(out.get("morning") or "")
        if morning:
            _add_to_prompt(trace, morning)

    async def finalize(self, trace: vf.Trace, runtime) -> None:
        state = trace.state
        if not state.session:  # setup failed before a session was opened
            return
        where = f"{state.url}/sessions/{state.session}"
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as http:
            try:
                r = await http.post(f"{where}/finish")
                if r.status_code == 409:  # already finished or closing: read what it holds
                    r = await http.get(where)
                info = _json(r, f"POST {where}/finish").get("info") or {}
                if info.get("reward") is not None:
                    state.reward = float(info["reward"])
                if info.get("gain") is not None:
                    state.gain = float(info["gain"])
                state.days_played = int(info.get("days_played") or len(info.get("daily") or []))
                if info.get("turn_rewards") is not None:  # per-turn credit, where trainers read it
                    state.turn_rewards = [float(x) for x in info["turn_rewards"]]
                    trace.info["turn_rewards"] = state.turn_rewards
                state.done = bool(info.get("done", state.done))
            finally:
                try:
                    await http.delete(where)
                except httpx.HTTPError as e:
                    logger.warning("DELETE %s failed: %s", where, e)

    @vf.reward(weight=1.0)
    async def server_reward(self, trace: vf.Trace) -> float:
        """The reward ``rbjax lm serve`` computed for the finished session."""
        if trace.state.reward is None:
            raise ValueError(f"session {trace.state.session!r}: the server gave no reward")
        return trace.state.reward

    @vf.metric
    async def gain(self, trace: vf.Trace) -> float:
        """The store's net-worth gain over the task's days (dollars)."""
        return float("nan") if trace.state.gain is None else trace.state.gain

    @vf.metric
    async def days_played(self, trace: vf.Trace) -> float:
        return float(trace.state.days_played)

    @vf.stop
    async def episode_over(self, trace: vf.Trace) -> bool:
        """The last day has been ended (or the store went bankrupt): nothing is left to decide."""
        return trace.state.done


class RetailConfig(vf.TasksetConfig):
    tasks: str = ""
    """The tasks file (JSON Lines, ``rbjax.lm.tasks.write_tasks``); default $RBJAX_LM_TASKS."""
    url: str = ""
    """The ``rbjax lm serve`` server; default $RBJAX_LM_URL, else http://127.0.0.1:8777."""
    reward: str = ""
    """Not used here: the server decides the reward (``rbjax lm serve --reward``)."""
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()
    task: RetailTaskConfig = RetailTaskConfig()


class RetailTaskset(vf.Taskset[RetailTask, RetailConfig]):
    @classmethod
    def toolsets(cls, config: RetailConfig) -> list[vf.Toolset]:
        return [RetailTools(config.tools)]  # one forwarding process for every rollout of the eval

    def load(self):
        path = self.config.tasks or os.environ.get("RBJAX_LM_TASKS", "")
        if not path:
            raise ValueError("rbjax-retail: name the tasks file with --env.taskset.tasks or $RBJAX_LM_TASKS")
        if self.config.reward:
            logger.warning("rbjax-retail: reward=%r is ignored; the server decides", self.config.reward)
        url = (self.config.url or self.config.task.url or server_url()).rstrip("/")
        task_config = self.config.task.model_copy(update={"url": url})
        for row in read_rows(path):
            data = RetailData(id=row["id"], name=row["id"], prompt=row["prompt"], row=row)
            yield RetailTask(data, task_config)


def read_rows(path: str) -> list[dict]:
    """The rows of a tasks file; ValueError (one line) for a line that is not a task with an id and a
    prompt."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such tasks file")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{i}: not a JSON line ({e})") from None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row.get("prompt"):
                raise ValueError(f"{path}:{i}: a task needs a string 'id' and a 'prompt'")
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: holds no task")
    return rows


def _json(r: httpx.Response, what: str) -> dict:
    """The JSON body of a 200 answer; RuntimeError (one line) with the server's error otherwise."""
    try:
        out = r.json()
    except ValueError:
        out = {"error": r.text[:300]}
    if r.status_code != 200 or not isinstance(out, dict) or "error" in out:
        err = out.get("error") if isinstance(out, dict) else out
        raise RuntimeError(f"{what}: HTTP {r.status_code}: {err}")
    return out


def _add_to_prompt(trace: vf.Trace, morning: str) -> None:
    """Append the session's first morning (the day's opening views) to the task's last user message, so
    the model starts from what the benchmark's runner shows; a string prompt gets it appended."""
    data = trace.task.data
    prompt = data.prompt
    if isinstance(prompt, str):
        new = prompt + "\n\n" + morning
    else:
        new = list(prompt or [])
        last = next((i for i in range(len(new) - 1, -1, -1) if new[i].role == "user"), None)
        if last is not None and isinstance(new[last].content, str):
            new[last] = new[last].model_copy(update={"content": new[last].content + "\n\n" + morning})
        else:
            new.append(vf.UserMessage(content=morning))
    trace.task.data = data.model_copy(update={"prompt": new})

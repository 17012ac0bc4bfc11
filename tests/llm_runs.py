"""Language-model runs shared by the agent tests: two stores of a scripted model, and a model that fails."""

import re

import jax
import numpy as np

from rbjax.agents.llm.client import InfraError, ScriptedModel
from rbjax.agents.runs.llm_agents import run_llm_agents

STORES = 2
END = '<tool_call>{"name": "end_today", "arguments": {}}</tool_call>'


def day_of(messages) -> int:
    """The 1-based day of a request: its day message says ``# Day N``."""
    for m in messages:
        found = re.search(r"# Day (\d+)", str(m.get("content") or ""))
        if found:
            return int(found.group(1))
    raise AssertionError("no day message")


def play(env, params, out, model, days=3, **kw):
    return run_llm_agents(
        env,
        params.replace(horizon=np.int32(days)),
        jax.random.split(jax.random.key(0), STORES),
        "react",
        model,
        str(out),
        progress_seconds=kw.pop("progress_seconds", 0),
        **kw,
    )


class FailsOn:
    """Ends every day at once; raises ``InfraError`` for ``store`` (None: every store) from ``day`` on."""

    def __init__(self, day=None, store=None):
        self.day, self.store = day, store

    def __call__(self, s):
        day, store = self.day, self.store

        class Model:
            async def complete(self, messages, tools=None):
                if day is not None and day_of(messages) >= day and store in (None, s):
                    raise InfraError("connection refused to http://127.0.0.1:9/v1 (after 4 attempts)")
                return await ScriptedModel([END]).complete(messages, tools)

        return Model()

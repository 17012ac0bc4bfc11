"""A session's episode as chat messages: the form demonstrations (``rbjax.lm.demos``) are written in.

One source for what a model is shown, so that a demonstration reads as a served episode does:

- ``tools()``: the 21 tools in the OpenAI function form, what ``GET /tools`` of ``rbjax lm serve`` serves and
  what every face describes (``agents.tools.specs.openai_functions``);
- ``opening(task.prompt, session.morning)``: the task's chat prompt with the first morning's views appended to
  its last user message, as the verifiers face and TRL's ``environment_factory`` show it (a reset's text is
  added to the prompt); no system prompt, as no session serves one;
- ``day(calls, answers, day, form)``: one assistant message holding the day's tool calls, ``end_today`` last,
  then one tool message per call with the tool's text (``end_today``'s: the day's report and the next
  morning's views, or the episode's end).

Two forms (``FORMATS``):

- ``"trl"``: TRL's conversational tool-calling rows (``SFTTrainer``; transformers' chat templates): a call's
  ``arguments`` a JSON object, a tool message names its tool;
- ``"openai"``: OpenAI's chat fine-tuning rows: each call has an ``id``, its ``arguments`` a JSON string, a
  tool message answers ``tool_call_id``.

``calls_of(message)`` reads the calls of an assistant message of either form back: [(name, arguments)].
"""

from __future__ import annotations

import copy
import json

from rbjax.agents.tools.specs import openai_functions

FORMATS = ("trl", "openai")


def tools() -> list[dict]:
    """[21] the tools as OpenAI functions: {"type": "function", "function": {name, description, parameters}}."""
    return openai_functions()


def opening(prompt: list[dict], morning: str) -> list[dict]:
    """The conversation's first messages: ``prompt`` (a task's [{role, content}]) with ``"\\n\\n" + morning``
    appended to its last user message (a copy; ``prompt`` is left as it is)."""
    messages = copy.deepcopy(list(prompt))
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        raise ValueError("a task's prompt needs a user message to open the conversation")
    messages[users[-1]]["content"] = f"{messages[users[-1]]['content']}\n\n{morning}"
    return messages


def day(calls: list[tuple[str, dict]], answers: list[str], index: int, form: str = "trl") -> list[dict]:
    """One decided day: the assistant's message with ``calls`` [(name, arguments)] and a tool message per call
    with its answer (``answers``, one per call). index: the day's place in the episode (the calls' ids)."""
    if form not in FORMATS:
        raise ValueError(f"form must be one of {FORMATS}, got {form!r}")
    if len(calls) != len(answers):
        raise ValueError(f"{len(calls)} calls but {len(answers)} answers")
    if form == "trl":
        said = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
        heard = [{"role": "tool", "name": n, "content": t} for (n, _), t in zip(calls, answers, strict=True)]
    else:
        ids = [f"call_{index}_{i}" for i in range(len(calls))]
        said = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in zip(ids, calls, strict=True)
        ]
        heard = [{"role": "tool", "tool_call_id": i, "content": t} for i, t in zip(ids, answers, strict=True)]
    return [{"role": "assistant", "content": "", "tool_calls": said}, *heard]


def calls_of(message: dict) -> list[tuple[str, dict]]:
    """[(name, arguments)] of an assistant message of either form (arguments a JSON object or its text)."""
    out = []
    for call in message.get("tool_calls") or []:
        f = call["function"]
        args = f.get("arguments") or {}
        out.append((f["name"], json.loads(args) if isinstance(args, str) else dict(args)))
    return out


def days_of(messages: list[dict]) -> list[list[tuple[str, dict]]]:
    """The calls of each assistant message of a conversation, in order: one list a decided day."""
    return [calls_of(m) for m in messages if m.get("role") == "assistant" and m.get("tool_calls")]

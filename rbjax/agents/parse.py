"""Tool calls from a model's text, in the forms the reference's runner accepts, tried in this order:

1. ``xml``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (``arguments`` may also be a
   JSON string, or be called ``parameters``; an unclosed last block is read to the end of the text);
2. ``function``: ``name(key=value, ...)`` with Python literals, for allowed names only;
3. ``json``: bare ``{"name": ..., "arguments": ...}`` objects (or a list of them) anywhere in the text.

The first form that yields a call wins. Names outside ``allowed`` are dropped silently, only the first
``end_today`` is kept, and arguments that are not valid JSON (or not an object) become ``{}``, so the tool
answers with its own missing-argument error, as the reference does.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


@dataclasses.dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict
    id: str = ""  # the model's call id (native protocol)


def parse_tool_calls(text: str, allowed) -> tuple[list[ToolCall], str]:
    """(calls, method) from ``text``; method is ``xml``, ``function``, ``json`` or ``none``."""
    allowed = set(allowed)
    for method, finder in (("xml", _xml), ("function", _function), ("json", _bare_json)):
        calls = keep_allowed(finder(text or "", allowed), allowed)
        if calls:
            return calls, method
    return [], "none"


def keep_allowed(calls: list[ToolCall], allowed) -> list[ToolCall]:
    """Drop unknown names and every ``end_today`` after the first."""
    kept, ended = [], False
    for c in calls:
        if c.name not in allowed or (c.name == "end_today" and ended):
            continue
        ended |= c.name == "end_today"
        kept.append(c)
    return kept


def arguments(value) -> dict:
    """A call's arguments as a dict: a JSON string is decoded; anything unreadable is ``{}``."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


def _from_object(obj) -> ToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    return ToolCall(obj["name"], arguments(args))


def _xml(text: str, allowed) -> list[ToolCall]:
    calls = []
    for block in _BLOCK.findall(text):
        block = _FENCE.sub("", block.strip())
        try:
            call = _from_object(json.loads(block))
        except json.JSONDecodeError:  # a broken block still names its tool; its arguments are lost
            name = _NAME.search(block)
            call = ToolCall(name.group(1), {}) if name else None
        if call is not None:
            calls.append(call)
    return calls


def _function(text: str, allowed) -> list[ToolCall]:
    if not allowed:
        return []
    start = re.compile(r"\b(" + "|".join(sorted(map(re.escape, allowed))) + r")\(")
    calls, pos = [], 0
    while (m := start.search(text, pos)) is not None:
        call, end = _literal_call(text, m.start(), m.end())
        if call is not None:
            calls.append(call)
        pos = end if call is not None else m.end()
    return calls


def _literal_call(text: str, begin: int, open_end: int) -> tuple[ToolCall | None, int]:
    """The shortest ``name(...)`` from ``begin`` that parses as a call with literal keyword arguments."""
    close = open_end - 1
    while (close := text.find(")", close + 1)) != -1:
        try:
            node = ast.parse(text[begin : close + 1], mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, ast.Call) or node.args:
            return None, close + 1
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except ValueError:
            args = {}
        return ToolCall(node.func.id, args), close + 1
    return None, open_end


def _bare_json(text: str, allowed) -> list[ToolCall]:
    decoder, calls, pos = json.JSONDecoder(), [], 0
    while (pos := _next_open(text, pos)) != -1:
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            pos += 1
            continue
        for item in obj if isinstance(obj, list) else [obj]:
            call = _from_object(item)
            if call is not None:
                calls.append(call)
        pos = end
    return calls


def _next_open(text: str, pos: int) -> int:
    brace, bracket = text.find("{", pos), text.find("[", pos)
    found = [p for p in (brace, bracket) if p != -1]
    return min(found) if found else -1

"""Chat models behind the agent frameworks: one protocol, an OpenAI-compatible client, a scripted model.

The frameworks see only ``ChatModel.complete(messages, tools=None) -> Completion``. ``OpenAIChatModel``
talks to any OpenAI-compatible endpoint (a hosted API, or vLLM / SGLang on your own GPU) through the
``openai`` package's async client (the optional extra ``rbjax[agents]``): streamed replies with the
reasoning kept apart from the answer, usage from the final chunk, a limit on requests in flight, a
time-out on the whole request, and the reference's retry rule written out here (the SDK's own retries are
off). ``ScriptedModel`` replays fixed replies, for tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import re
from collections.abc import Callable, Sequence
from typing import Protocol

from rbjax.agents.parse import ToolCall, arguments

RETRY_STATUS = (408, 409, 429)  # and every status >= 500
_RETRY_WORDS = re.compile(r"time ?out|timed out|connection|rate limit", re.IGNORECASE)
KEY_VARIABLES = ("OPENAI_API_KEY", "API_KEY", "OPENROUTER_API_KEY", "DASHSCOPE_API_KEY")


@dataclasses.dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_prompt_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["uncached_prompt_tokens"] = self.prompt_tokens - self.cached_prompt_tokens
        return d


@dataclasses.dataclass
class Completion:
    text: str  # the answer (content)
    reasoning: str = ""  # a reasoning model's thinking, streamed apart from the answer
    tool_calls: list[ToolCall] | None = None  # native protocol only
    usage: Usage = dataclasses.field(default_factory=Usage)
    attempts: int = 1  # requests sent, retries included


class ChatError(RuntimeError):
    """The model gave no reply after the retries; the message says why (never the key)."""


class InfraError(ChatError):
    """The endpoint failed, not the model (after the retries): no connection, HTTP 5xx, 401/403, a time-out,
    or a stream that was empty, cut short or carried an error. Never scored as a model's turn: the store
    pauses where it was and the run stops with one line naming the cause, to be continued by ``--resume``."""


class ChatModel(Protocol):
    async def complete(self, messages: list[dict], tools: list[dict] | None = None) -> Completion: ...


# ---------------------------------------------------------------------------------------------- scripted
Reply = str | Completion | Exception


class ScriptedModel:
    """Fixed replies: ``replies`` is a list (one per call, in order) or ``fn(messages, call) -> reply``.

    A reply is text, a ``Completion``, or an exception to raise (as ``ChatError``). ``latency`` seconds
    (a number, or ``fn(call) -> seconds``) pass before each reply. After the list runs out every reply is
    ``after``. ``calls`` keeps the messages of every request (``keep=False``: only their count, ``n``),
    ``last_tools`` the last request's tools.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | Callable[[list[dict], int], Reply],
        latency: float | Callable[[int], float] = 0.0,
        after: str = '<tool_call>{"name": "end_today", "arguments": {}}</tool_call>',
        keep: bool = True,
    ):
        self.replies, self.latency, self.after, self.keep = replies, latency, after, keep
        self.calls: list[list[dict]] = []
        self.n, self.last_tools = 0, None

    async def complete(self, messages, tools=None) -> Completion:
        n, self.n, self.last_tools = self.n, self.n + 1, tools
        if self.keep:
            self.calls.append([dict(m) for m in messages])
        wait = self.latency(n) if callable(self.latency) else self.latency
        if wait:
            await asyncio.sleep(wait)
        if callable(self.replies):
            reply = self.replies(messages, n)
        else:
            reply = self.replies[n] if n < len(self.replies) else self.after
        if isinstance(reply, Exception):
            raise ChatError(str(reply))
        if isinstance(reply, Completion):
            return reply
        words = len(str(reply).split())
        prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4
        return Completion(text=str(reply), usage=Usage(prompt, words, prompt + words))


# ---------------------------------------------------------------------------------------------- OpenAI
def api_key_from_env(variable: str | None = None) -> str | None:
    """The key from ``variable``, else the first of ``KEY_VARIABLES`` that is set."""
    for name in (variable,) if variable else KEY_VARIABLES:
        if os.environ.get(name):
            return os.environ[name]
    return None


def retryable(error: Exception) -> bool:
    """The reference's rule: status 408/409/429/>=500, a time-out, a lost connection, a rate limit."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status in RETRY_STATUS or status >= 500
    if isinstance(error, (TimeoutError, asyncio.TimeoutError, ConnectionError)):
        return True
    return bool(_RETRY_WORDS.search(f"{type(error).__name__} {error}"))


def backoff(attempt: int, base: float = 2.0, cap: float = 10.0, jitter: float = 0.3) -> float:
    """Seconds before retry ``attempt`` (1, 2, ...): ``min(base * 2^(attempt-1), cap) + U(0, jitter)``."""
    return min(base * 2 ** (attempt - 1), cap) + random.uniform(0.0, jitter)


@dataclasses.dataclass
class Sampling:
    """Request settings; the defaults are the paper runs' (TOOLS.md 4.6). ``None`` leaves a field out."""

    temperature: float | None = 0.6
    top_p: float | None = 0.95
    max_tokens: int | None = 10_000
    presence_penalty: float | None = 1.1
    max_completion_tokens: int | None = None  # OpenAI's GPT-5 models take this instead of max_tokens
    extra_body: dict | None = None  # e.g. {"enable_thinking": True} for DashScope

    def request_fields(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


class OpenAIChatModel:
    """A model behind an OpenAI-compatible ``base_url``.

    concurrency: requests in flight at once (one semaphore for every agent sharing this model).
    timeout: seconds for a whole request, stream included; ``retries`` more attempts follow a retryable
    failure (``retryable``), after ``backoff(n, retry_base)`` seconds.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 32,
        timeout: float = 600.0,
        retries: int = 3,
        retry_base: float = 2.0,
        sampling: Sampling | None = None,
    ):
        try:
            from openai import AsyncOpenAI
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError("language models need the openai package: pip install 'rbjax[agents]'") from e
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.model, self.timeout, self.retries, self.retry_base = model, timeout, retries, retry_base
        self.sampling = sampling or Sampling()
        self._secret = api_key or api_key_from_env() or "EMPTY"  # local servers accept any key
        self._client = AsyncOpenAI(base_url=base_url, api_key=self._secret, max_retries=0, timeout=timeout)
        self._slots = asyncio.Semaphore(concurrency)
        self.base_url = str(self._client.base_url)
        self.requests = 0

    def __getstate__(self):
        raise TypeError("OpenAIChatModel holds an API key and is never pickled")

    async def complete(self, messages, tools=None) -> Completion:
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._slots:
                    self.requests += 1
                    reply = await asyncio.wait_for(self._stream(messages, tools), self.timeout)
                reply.attempts = attempt
                return reply
            except Exception as e:  # noqa: BLE001 - every failure is classified below
                if attempt > self.retries or not retryable(e):
                    raise ChatError(self._clean(f"{type(e).__name__}: {e}", attempt)) from None
            await asyncio.sleep(backoff(attempt, self.retry_base))

    async def _stream(self, messages, tools) -> Completion:
        extra = {"tools": tools, "tool_choice": "auto"} if tools else {}
        stream = await self._client.chat.completions.create(
            model=self.model,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **self.sampling.request_fields(),
            **extra,
        )
        text, reasoning, calls, usage = [], [], {}, Usage()
        async for chunk in stream:
            if chunk.usage is not None:
                usage = _usage(chunk.usage)
            for choice in chunk.choices or ():
                delta = choice.delta
                if delta is None:
                    continue
                text.append(delta.content or "")
                extra_fields = getattr(delta, "model_extra", None) or {}
                reasoning.append(extra_fields.get("reasoning_content") or extra_fields.get("reasoning") or "")
                for tc in delta.tool_calls or ():
                    slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = tc.id or slot["id"]
                    if tc.function is not None:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
        native = [ToolCall(c["name"], arguments(c["arguments"]), c["id"]) for _, c in sorted(calls.items())]
        return Completion("".join(text), "".join(reasoning), native if tools else None, usage)

    def _clean(self, message: str, attempts: int) -> str:
        if self._secret and self._secret != "EMPTY":
            message = message.replace(self._secret, "***")
        return f"{message} (after {attempts} attempt{'s' * (attempts > 1)})"

    async def close(self) -> None:
        await self._client.close()


def _usage(u) -> Usage:
    details = getattr(u, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    extra = getattr(u, "model_extra", None) or {}
    cached = cached or extra.get("cached_tokens") or extra.get("prompt_cache_hit_tokens") or 0
    return Usage(
        int(u.prompt_tokens or 0), int(u.completion_tokens or 0), int(u.total_tokens or 0), int(cached)
    )

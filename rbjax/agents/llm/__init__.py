"""The model side: the chat client (``client``: ``ChatModel``, ``OpenAIChatModel``, ``ScriptedModel``), tool
calls parsed from text (``parse``), the prompts (``prompts``) and the paper's frameworks (``frameworks``:
``LLMAgent``, ReAct, Reflection, Plan-and-Act).

Imports: ``rbjax.agents.formats`` and ``tools`` (schemas); never the engine."""

from rbjax.agents.old_paths import forward

__getattr__ = forward("rbjax.agents.llm")  # rbjax 0.1.0's rbjax.agents.llm module: its names, with a warning

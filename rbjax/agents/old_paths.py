"""The agent layer's module paths before its folders (rbjax 0.1.0), kept for one release with a warning.

``import rbjax.agents.llm_run`` (or ``from rbjax.agents.run import prepare_folder``) still works: it gives a
stand-in module whose names are looked up, in order, in the modules that hold them now, and warns
(``DeprecationWarning``) with the new path. ``engine``, ``sandbox``, ``tools`` and ``llm`` are folders now:
their old names (``rbjax.agents.engine.AgentEngine``, ...) are forwarded by the folder's ``__getattr__``
(``forward``).
``docs/api.md`` lists every move.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

# old module -> the modules its public names live in now (searched in order)
MOVED = {
    "rbjax.agents.ledger": ("rbjax.agents.engine.ledger",),
    "rbjax.agents.scheduler": ("rbjax.agents.engine.scheduler",),
    "rbjax.agents._sandbox_worker": ("rbjax.agents.sandbox.worker",),
    "rbjax.agents.seccomp": ("rbjax.agents.sandbox.seccomp",),
    "rbjax.agents.specs": ("rbjax.agents.tools.specs",),
    "rbjax.agents.views": ("rbjax.agents.tools.views",),
    "rbjax.agents.draft": ("rbjax.agents.tools.draft",),
    "rbjax.agents.news_text": ("rbjax.agents.tools.news_text",),
    "rbjax.agents.trace": ("rbjax.agents.tools.trace",),
    "rbjax.agents.diag_fields": ("rbjax.agents.tools.diag_fields",),
    "rbjax.agents.parse": ("rbjax.agents.llm.parse",),
    "rbjax.agents.prompts": ("rbjax.agents.llm.prompts",),
    "rbjax.agents.frameworks": ("rbjax.agents.llm.frameworks",),
    "rbjax.agents.run": ("rbjax.agents.runs.loop", "rbjax.agents.runs.folder", "rbjax.agents.runs.policy"),
    "rbjax.agents.policy_agent": ("rbjax.agents.runs.policy",),
    "rbjax.agents.llm_run": (
        "rbjax.agents.runs.llm_agents",
        "rbjax.agents.runs.checkpoints",
        "rbjax.agents.runs.logs",
        "rbjax.agents.runs.identity",
        "rbjax.agents.runs.folder",
    ),
    "rbjax.agents.slices": ("rbjax.agents.runs.slices",),
    "rbjax.agents.diagnostics": ("rbjax.agents.analysis.diagnostics",),
    "rbjax.agents.replay": (
        "rbjax.agents.analysis.replay",
        "rbjax.agents.analysis.rescore",
        "rbjax.agents.runs.folder",
    ),
}
# folders that were modules: old module -> (where its names live now, its public names)
FOLDERS = {
    "rbjax.agents.sandbox": (
        ("rbjax.agents.sandbox.parent",),
        (
            "MAX_CODE",
            "TRUNCATED",
            "MAX_MESSAGE",
            "STARTUP_LIMIT",
            "BANNED_NODES",
            "BANNED_NAMES",
            "WORKER",
            "check",
            "run",
            "capped",
            "render",
        ),
    ),
    "rbjax.agents.engine": (("rbjax.agents.engine.batch",), ("AgentEngine", "batch_bucket")),
    "rbjax.agents.tools": (
        ("rbjax.agents.tools.store",),
        ("MAX_TOOL_TEXT", "TEXT_CUT", "MAX_NOTE", "ToolResult", "StoreTools"),
    ),
    "rbjax.agents.llm": (
        ("rbjax.agents.llm.client",),
        (
            "RETRY_STATUS",
            "KEY_VARIABLES",
            "CHARS_PER_TOKEN",
            "log",
            "Usage",
            "Completion",
            "ChatError",
            "InfraError",
            "estimate_tokens",
            "ChatModel",
            "Reply",
            "ScriptedModel",
            "api_key_from_env",
            "retryable",
            "backoff",
            "Sampling",
            "OpenAIChatModel",
        ),
    ),
}


def lookup(old: str, targets: tuple[str, ...], name: str):
    """``name`` of the old module ``old`` from the first of ``targets`` that has it, with a warning."""
    for target in targets:
        module = importlib.import_module(target)
        if hasattr(module, name):
            warnings.warn(
                f"{old}.{name} moved to {target}.{name}; the old path goes in the next release",
                DeprecationWarning,
                stacklevel=3,
            )
            return getattr(module, name)
    raise AttributeError(f"module {old!r} has no attribute {name!r} (it moved: see docs/api.md)")


def forward(folder: str):
    """A folder's module ``__getattr__`` that forwards the names of the module it replaced (only those: any
    other name, a submodule not yet imported included, is the import system's)."""
    targets, names = FOLDERS[folder]

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {folder!r} has no attribute {name!r}")
        return lookup(folder, targets, name)

    return __getattr__


class OldModule(types.ModuleType):
    """The stand-in of a moved module: every attribute looked up where it lives now."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return lookup(self.__name__, MOVED[self.__name__], name)


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of a moved module's old path give its ``OldModule``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        warnings.warn(
            f"{spec.name} moved to {' and '.join(MOVED[spec.name])}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return OldModule(spec.name)

    def exec_module(self, module) -> None:
        pass


def install() -> None:
    if not any(isinstance(f, Finder) for f in sys.meta_path):
        sys.meta_path.append(Finder())

"""``execute_code``, contained: ``parent`` checks a snippet and runs ``worker.py`` (a stdlib-only script) in a
fresh process under the limits and the system-call filter of ``seccomp``; the worker's only way out is the
pipe back to the parent, which answers its read-tool calls.

Imports: ``rbjax.agents.formats`` only."""

from rbjax.agents.old_paths import forward

__getattr__ = forward(
    "rbjax.agents.sandbox"
)  # rbjax 0.1.0's rbjax.agents.sandbox module: its names, with a warning

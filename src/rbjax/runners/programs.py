"""The one cache of compiled programs: every module that builds a jitted program (or an env) once per process
keeps it here, under a key that names what the program depends on.

A key is ``(kind, env, *parts)``:

- ``kind``: which program, named by its module ("rollout.advance", "paired.gaps", "engine.programs", ...), or
  "env": the process's one Env for a set of options (``env_and_params``), which every command shares;
- ``env``: the ``Env`` it runs, by identity (its config and catalogue fix every shape), or None; the env is
  kept alive with the program, so its id stays unique while the entry lives;
- ``parts``: whatever else changes the trace, each hashable: a policy (a function, by identity), the records
  kind, vmap axes (by ``repr``: pytrees of None and 0), the devices (a tuple), or plain settings (a data folder,
  a grouping, days).

``jax.clear_caches()`` drops what XLA compiled for these programs, and ``executables.forget()`` what the
stored programs (``rbjax.runners.executables``) hold; the entries here then load from disk or recompile on
their next call.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_PROGRAMS: dict[tuple, tuple[Any, Any]] = {}  # (kind, id(env) or None, *parts) -> (env, what build made)


def cached(kind: str, build: Callable[[], T], env: Any = None, parts: tuple[Hashable, ...] = ()) -> T:
    """What ``build()`` returns, built once per process for ``(kind, env, *parts)`` (see the module's docstring).

    kind: the program's name; build: a function of no arguments making it (a jitted function, a dict of them,
    an (env, params) pair...); env: the Env it is built for (keyed by identity, kept alive), or None; parts: the
    rest of the key, a tuple of hashables."""
    key = (kind, None if env is None else id(env), *parts)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = (env, build())
    return _PROGRAMS[key][1]


def env_and_params(
    data: str | None = None, grouping: str = "20", supplier_attempts: int = 50, days: int = 180
):
    """(Env, its checked default params with ``horizon = days``), as ``rbjax.env.make_env`` makes them, but one
    Env per process for each (data, grouping, supplier_attempts), kept here: every command, replay, slice and
    task of one process then runs the same Env, so the same compiled programs. Raises ``rbjax.env.OptionError``
    naming the option."""
    import os

    from rbjax.env import make_env, params_for_days

    folder = None if data is None else os.path.realpath(data)  # one folder however it is named
    env, _ = cached(
        "env",
        lambda: make_env(folder, grouping, supplier_attempts),
        parts=(folder, grouping, supplier_attempts),
    )
    return env, params_for_days(env, days)

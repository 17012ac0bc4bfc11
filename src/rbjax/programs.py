"""The one holder of compiled programs, and of the process's env for each set of options.

Every module that builds a jitted program (or an env) once keeps it here, under a key that names what the
program depends on: ``cached(kind, build, env, parts)``.

- ``kind``: which program, named by its module ("rollout.advance", "paired.gaps", "engine.programs", ...);
- ``env``: the ``Env`` it runs, or None. An env's programs live on the env itself (its ``_programs``), so they
  go when the env goes: the holder is weakly keyed to them (an env's programs never keep it alive; the
  process's envs by options, and what the programs of no env hold, stay until ``clear()``);
- ``parts``: whatever else changes the trace, each hashable: a policy (a function, by identity), the records
  kind, vmap axes (by ``repr``), the devices (a tuple), or plain settings.

``env_and_params(options)`` gives the process's one Env for a set of ``EnvOptions``: every command, replay,
slice and task of one process then runs the same Env, so the same compiled programs. ``clear()`` drops all of it
(the envs by options, every env's programs, the programs of no env, and what XLA compiled for them); the next
call builds them again, loading from disk what ``rbjax.runners.executables`` stored.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rbjax.env import Env, EnvOptions
    from rbjax.params import EnvParams

T = TypeVar("T")

_ENVS: weakref.WeakSet = weakref.WeakSet()  # the envs holding programs, for ``clear``
_NO_ENV: dict[tuple, Any] = {}  # (kind, *parts) -> the program, for programs of no env
_BY_OPTIONS: dict[Hashable, Any] = {}  # EnvOptions.key() -> the process's Env for them


def cached(kind: str, build: Callable[[], T], env: Any = None, parts: tuple[Hashable, ...] = ()) -> T:
    """What ``build()`` returns, built once for ``(kind, env, *parts)`` until ``clear()`` (see the module's
    docstring). kind: the program's name; build: a function of no arguments making it; env: the Env it is built
    for (its programs are kept on it), or None; parts: the rest of the key, a tuple of hashables."""
    if env is None:
        held = _NO_ENV
    else:
        held = env.__dict__.get("_programs")
        if held is None:
            held = env.__dict__["_programs"] = {}
            _ENVS.add(env)
    key = (kind, *parts)
    if key not in held:
        held[key] = build()
    return held[key]


def held(kind: str) -> dict[tuple, Any]:
    """{parts: what was built} of every program of no env of ``kind`` held now (``cached(kind, ..., None,
    parts)``): a face's pools, for a look at them."""
    return {key[1:]: value for key, value in _NO_ENV.items() if key[0] == kind}


def clear(keep_envs: bool = False) -> None:
    """Drop every program the holder keeps (each env's, those of no env, with the executables a stored program
    holds), the process's envs by options (unless ``keep_envs``: the tests keep their session's env), and what
    XLA compiled (``jax.clear_caches``): the one call that empties rbjax's caches of programs."""
    import jax

    for env in list(_ENVS):
        env.__dict__.get("_programs", {}).clear()
    _NO_ENV.clear()
    if not keep_envs:
        _BY_OPTIONS.clear()
    jax.clear_caches()


def env_and_params(options: EnvOptions | None = None, **fields) -> tuple[Env, EnvParams]:
    """(Env, its checked default params with ``horizon = options.days``) for ``options`` (an ``EnvOptions``;
    None: the defaults; ``fields`` replace some of them: ``env_and_params(grouping="ref19")``), the process's one
    Env for its data folder, grouping and supplier attempts until ``clear()``. Raises ``rbjax.env.OptionError``
    naming the option."""
    import dataclasses

    from rbjax.env import EnvOptions, params_for_days

    options = dataclasses.replace(options or EnvOptions(), **fields)
    key = options.env_key()
    if key not in _BY_OPTIONS:
        _BY_OPTIONS[key] = options.make_env()
    env = _BY_OPTIONS[key]
    return env, params_for_days(env, options.days)

"""Programs kept on disk as exported StableHLO, so that a new process does not trace them again.

JAX's persistent compilation cache saves compiling, but a new process still traces a program and lowers it
to StableHLO before the cache can be asked: for the day and the reset that was most of a warm run's set-up
(``benchmarks/main_job.py``). ``StoredProgram`` keeps each program as JAX exported it (``jax.export``: the
lowered module, its shardings and donations) in ``<compilation cache>/rbjax-programs/``. A new process reads it,
which takes milliseconds, and compiles it, which JAX's cache answers. The key names everything the program
depends on:

- what it is: the program's name and the caller's ``parts`` (the env's configuration and catalogue, the policy
  by module and name, records kind, vmap axes, static arguments);
- what it was made from: a hash of every source file of the rbjax package, the jax and jaxlib versions, the
  JAX settings that change a trace (64-bit mode, the PRNG implementation) and ``XLA_FLAGS``;
- where it runs: the platform, the device kinds and ids, the process count;
- its arguments: the pytree structure and every leaf's shape, dtype, weak type and sharding.

A change to any of them is another key, so a stale program is never loaded (``tests/runners/
test_executables.py`` changes each). A file that cannot be read is traced again and replaced. Only programs
whose every part is known by value are kept: a policy that is a closure, or defined outside rbjax, is not (it
could change without its name changing), and runs as a plain ``jax.jit``. ``RBJAX_PROGRAM_CACHE=0`` turns the
store off. Each file also holds the output's pytree structure, pickled, so give the folder the trust you give
JAX's cache (which holds native code).

Why StableHLO and not XLA's serialised executables (``jax.experimental.serialize_executable``), which would save
the compiling too: on XLA:CPU an executable that JAX's cache supplied serialises without its code, loads, and
fails when called (after deleting its donated inputs), and nothing in JAX's API tells such an executable apart.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

FORMAT = 2  # bump when the file layout changes
FOLDER = "rbjax-programs"


@functools.cache
def source_hash() -> str:
    """SHA-256 of the rbjax package's Python sources (paths and contents), computed once per process."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def environment() -> tuple:
    """What the process compiles with: versions, trace-changing settings, compiler flags and devices."""
    import jaxlib

    devices = tuple((d.platform, d.device_kind, d.id, d.process_index) for d in jax.devices())
    return (
        jax.__version__,
        jaxlib.__version__,
        bool(jax.config.jax_enable_x64),
        str(jax.config.jax_default_prng_impl),
        bool(jax.config.jax_threefry_partitionable),
        os.environ.get("XLA_FLAGS", ""),
        devices,
        jax.process_count(),
    )


def signature(args: Sequence[Any]) -> tuple:
    """The abstract arguments: their pytree structure and each leaf's shape, dtype, weak type and sharding."""
    leaves, tree = jax.tree.flatten(args)

    def leaf(x):
        if isinstance(x, jax.ShapeDtypeStruct):  # an argument still to come: as the array it stands for
            return (x.shape, str(x.dtype), bool(x.weak_type), repr(x.sharding))
        if isinstance(x, jax.Array):
            aval = x.aval if hasattr(x, "aval") else jax.typeof(x)
            return (x.shape, str(x.dtype), bool(getattr(aval, "weak_type", False)), repr(x.sharding))
        x = np.asarray(x)
        return (x.shape, str(x.dtype), "host")

    return (str(tree), tuple(leaf(x) for x in leaves))


def fingerprint(*parts: Any) -> str:
    """SHA-256 of the reprs of ``parts`` (each must have a repr that names its value)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def folder() -> Path | None:
    """The store's folder inside JAX's persistent compilation cache, or None (no cache, or turned off)."""
    if os.environ.get("RBJAX_PROGRAM_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    cache = jax.config.jax_compilation_cache_dir
    if not cache or not jax.config.jax_enable_compilation_cache:
        return None
    return Path(cache) / FOLDER


class StoredProgram:
    """A function jitted once per argument signature, its trace kept on disk (``jax.export``) and its executable
    in memory.

    fn: the function (not jitted); name, parts: the program's identity (``parts`` reprs that name values: no
    object addresses), or ``parts=None`` for a program that cannot be named by value (it is then only kept in
    memory and runs as a plain ``jax.jit``, as every program does with no store folder); static_argnums,
    donate_argnums: as ``jax.jit``'s. A stored program sharded over several devices must get arguments placed
    on them (``placement.place``); one over several processes' devices cannot be stored (give parts=None).
    ``compile(*args)`` returns the program for these arguments (static ones included) as a function of the
    other arguments; calling the program compiles (or loads) and runs it. ``loaded`` counts the programs read
    from disk, ``built`` those traced in this process; ``seconds`` holds the time spent in each phase ("trace",
    "store", "load", "lower", "compile").
    """

    def __init__(
        self,
        fn: Callable,
        name: str,
        parts: tuple | None,
        static_argnums: Sequence[int] = (),
        donate_argnums: Sequence[int] = (),
    ) -> None:
        self.fn, self.name, self.parts = fn, name, parts
        self.static, self.donate = tuple(static_argnums), tuple(donate_argnums)
        self._executables: dict[str, Any] = {}
        self.loaded = self.built = 0
        self.seconds = dict.fromkeys(("trace", "store", "load", "lower", "compile"), 0.0)

    def key(self, args: Sequence[Any]) -> str:
        """The file name (a hash) of the program for these arguments."""
        static = tuple(repr(args[i]) for i in self.static)
        return fingerprint(
            FORMAT,
            self.name,
            self.parts,
            static,
            signature(self._dynamic(args)),
            source_hash(),
            environment(),
        )

    def _dynamic(self, args: Sequence[Any]) -> list:
        return [a for i, a in enumerate(args) if i not in self.static]

    def compile(self, *args) -> Callable:
        """The program for ``args`` (static ones included), as a function of the dynamic arguments: from
        memory, from disk (then compiled, which JAX's cache answers), or traced, stored and compiled now.
        A dynamic argument may be a ``jax.ShapeDtypeStruct`` (its sharding set) standing for the array that
        will come."""
        key = self.key(args)
        try:
            return self._pending(key, args).result()
        except BaseException:  # not kept: the next call tries again
            self._executables.pop(key, None)
            raise

    def start(self, *args) -> Pending:
        """``compile`` in two halves: traces or loads and lowers the program now, and compiles it on a thread
        (XLA's compiler releases the GIL, so this thread can trace or compile another program meanwhile).
        Returns a ``Pending``: its ``out_info`` (the output's shapes and dtypes) is known at once, its
        ``result()`` waits for the program."""
        return self._pending(self.key(args), args)

    def _pending(self, key: str, args: Sequence[Any]) -> Pending:
        if key not in self._executables:
            self._executables[key] = self._start(args, key)
        return self._executables[key]

    def _start(self, args: Sequence[Any], key: str) -> Pending:
        where = folder() if self.parts is not None else None
        if where is None:  # nothing to store: a plain jit, as jax.jit runs it
            return self._jitted(args)
        dynamic = self._dynamic(args)
        leaves, in_tree = jax.tree.flatten(dynamic)
        path = where / f"{key}.bin"
        stored = self._timed("load", self._load, path) if path.exists() else None
        if stored is None:
            stored = self._timed("trace", self._export, args, in_tree, leaves)
            self.built += 1
            self._timed("store", self._save, path, stored)
        else:
            self.loaded += 1
        exported, out_tree = stored
        donated = _flat_positions(dynamic, [i - sum(s < i for s in self.static) for i in self.donate])
        # a program sharded over several devices takes them from its arguments' shardings
        lowered = self._timed("lower", jax.jit(exported.call, donate_argnums=donated).trace(*leaves).lower)

        def finish():
            executable = self._timed("compile", lowered.compile)
            return lambda *dynamic: jax.tree.unflatten(out_tree, executable(*jax.tree.leaves(list(dynamic))))

        return Pending(jax.tree.unflatten(out_tree, jax.tree.leaves(lowered.out_info)), finish)

    def __call__(self, *args):
        return self.compile(*args)(*self._dynamic(args))

    def _jitted(self, args: Sequence[Any]) -> Pending:
        """The program of a plain ``jax.jit``, traced and lowered now, compiled by the ``Pending``."""
        jitted = jax.jit(self.fn, static_argnums=self.static, donate_argnums=self.donate)
        traced = self._timed("trace", jitted.trace, *args)
        lowered = self._timed("lower", traced.lower)
        self.built += 1
        static = {i: args[i] for i in self.static}

        def run(*dynamic_args):
            given = iter(dynamic_args)
            return jitted(*(static[i] if i in static else next(given) for i in range(len(args))))

        def finish():
            self._timed("compile", lowered.compile)
            return run

        return Pending(lowered.out_info, finish)

    def _export(self, args: Sequence[Any], in_tree, leaves: list):
        """(the exported program of the flat dynamic leaves, the output's pytree structure)."""
        from jax import export

        out_tree = []

        def flat(*flat_leaves):
            dynamic = iter(jax.tree.unflatten(in_tree, flat_leaves))
            full = [a if i in self.static else next(dynamic) for i, a in enumerate(args)]
            out = self.fn(*full)
            out_tree.append(jax.tree.structure(out))
            return jax.tree.leaves(out)

        return export.export(jax.jit(flat))(*leaves), out_tree[0]

    def _timed(self, phase: str, fn: Callable, *args):
        clock = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.seconds[phase] += time.perf_counter() - clock

    def _load(self, path: Path):
        from jax import export

        try:
            with open(path, "rb") as f:
                blob, out_tree = pickle.load(f)
            return export.deserialize(bytearray(blob)), out_tree
        except Exception as e:  # a truncated or foreign file: trace again and replace it
            warnings.warn(
                f"rbjax: stored program {path.name} could not be read ({e}); tracing it again", stacklevel=3
            )
            return None

    def _save(self, path: Path, stored) -> None:
        exported, out_tree = stored
        try:
            blob = pickle.dumps((bytes(exported.serialize()), out_tree), protocol=pickle.HIGHEST_PROTOCOL)
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as f:
                f.write(blob)
            os.replace(f.name, path)
        except Exception as e:  # a full disk, a read-only folder: run on without storing
            print(f"rbjax: program {self.name} not stored ({e})", file=sys.stderr)


class Pending:
    """A program being compiled (``StoredProgram.start``) by ``finish`` on a compiling thread: ``out_info``, the
    output's pytree of ``jax.ShapeDtypeStruct`` (no shardings); ``result()``, the program once compiled (the
    compiler's error, if it failed)."""

    def __init__(self, out_info, finish: Callable[[], Callable]) -> None:
        self.out_info = out_info
        self._future = _compiler().submit(finish)

    def result(self) -> Callable:
        return self._future.result()


@functools.cache
def _compiler():
    """The thread that compiles, one program at a time, while the caller traces and lowers the next. XLA:CPU
    already spreads a program's code generation over the cores; a second compiling thread saved no time on the
    main job and raised its peak memory by 0.7 GB (docs/performance.md, "The day made while the reset
    compiles")."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="rbjax-compile")


def _flat_positions(args: list, which: Sequence[int]) -> tuple[int, ...]:
    """The positions, among the leaves of ``args``, of the leaves of the arguments ``which``."""
    positions, start = [], 0
    for i, a in enumerate(args):
        n = len(jax.tree.leaves(a))
        if i in which:
            positions.extend(range(start, start + n))
        start += n
    return tuple(positions)


def remembered(name: str, parts: tuple | None, compute: Callable[[], int]) -> int:
    """``compute()`` (a whole number that takes a trace to find, such as a state's bytes), kept on disk under the
    same kind of key as a program (``name``, ``parts``, the sources and the process's environment), so a new
    process does not trace for it; parts=None: computed each time."""
    where = folder() if parts is not None else None
    path = (
        None
        if where is None
        else where / f"{fingerprint(FORMAT, name, parts, source_hash(), environment())}.int"
    )
    if path is not None:
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            pass
    value = int(compute())
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
                f.write(str(value))
            os.replace(f.name, path)
        except OSError:
            pass
    return value


def policy_name(policy: Callable) -> str | None:
    """``module:qualname`` of a policy that is a module-level rbjax function without a closure, else None (its
    behaviour could change without its name changing, so its programs are not stored)."""
    module, qualname = getattr(policy, "__module__", None), getattr(policy, "__qualname__", "")
    if not module or not module.startswith("rbjax.") or "<" in qualname:
        return None
    if getattr(policy, "__closure__", None) or getattr(sys.modules.get(module), qualname, None) is not policy:
        return None
    return f"{module}:{qualname}"


def env_name(env) -> str | None:
    """The env by value: its class, configuration and a hash of its catalogue (arrays and static fields); None
    for an env class defined outside rbjax (its code is not in ``source_hash``)."""
    kind = type(env)
    if not kind.__module__.startswith("rbjax."):
        return None
    h = hashlib.sha256(str(jax.tree.structure(env.catalog)).encode())
    for leaf in jax.tree.leaves(env.catalog):
        a = np.asarray(leaf)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    return f"{kind.__module__}:{kind.__qualname__} {env.config!r} catalogue {h.hexdigest()}"

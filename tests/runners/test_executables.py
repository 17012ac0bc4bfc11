"""rbjax.runners.executables: compiled programs kept on disk, keyed by everything they depend on."""

import uuid
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.runners import executables
from rbjax.runners.executables import StoredProgram

SALT = float(uuid.uuid4().int % 1000)  # a program new to every test run


def _double(x, y, n):
    return x * 2.0 + y * n + SALT


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The store's folder in tmp_path."""
    monkeypatch.setattr(executables, "folder", lambda: tmp_path / executables.FOLDER)
    return tmp_path / executables.FOLDER


def _program(name="double", parts=("a",)):
    return StoredProgram(_double, name, parts, static_argnums=(2,))


ARGS = (jnp.ones(3, jnp.float32), jnp.arange(3, dtype=jnp.float32), 2)


def test_a_new_process_loads_the_program_instead_of_tracing_it(store):
    first = _program()
    out = first(*ARGS)
    assert (first.built, first.loaded) == (1, 0) and len(list(store.glob("*.bin"))) == 1
    again = _program()  # a fresh object: what a new process makes
    traced = []
    again.fn = lambda *a: traced.append(a)  # tracing it again would fail
    np.testing.assert_array_equal(again(*ARGS), out)
    assert (again.built, again.loaded) == (0, 1) and not traced
    assert again.seconds["load"] > 0 and again.seconds["trace"] == 0
    again(*ARGS)  # the second call: from memory
    assert again.loaded == 1
    again._executables.clear()  # what rbjax.programs.clear() does, dropping the program
    again(*ARGS)
    assert again.loaded == 2


def _key(monkeypatch, **change):
    """The key of ARGS after one change (each undone by monkeypatch)."""
    args = list(ARGS)
    name, parts = change.pop("name", "double"), change.pop("parts", ("a",))
    if "args" in change:
        args = change.pop("args")
    for what, value in change.items():
        if what == "source":
            monkeypatch.setattr(executables, "source_hash", lambda: value)
        elif what == "xla_flags":
            monkeypatch.setenv("XLA_FLAGS", value)
        elif what == "jax_version":
            monkeypatch.setattr(jax, "__version__", value)
        elif what == "x64":
            monkeypatch.setattr(executables, "environment", _with_x64(executables.environment))
    return _program(name, parts).key(args)


def _with_x64(environment):
    return lambda: (*environment()[:2], not environment()[2], *environment()[3:])


@pytest.mark.parametrize(
    "change",
    [
        dict(name="triple"),
        dict(parts=("b",)),
        dict(args=[ARGS[0], ARGS[1], 3]),  # a static argument
        dict(args=[jnp.ones(4, jnp.float32), ARGS[1], 2]),  # a shape
        dict(args=[jnp.ones(3, jnp.float16), ARGS[1], 2]),  # a dtype
        dict(args=[ARGS[0], np.arange(3, dtype=np.float32), 2]),  # a host array for a device one
        dict(args=[(ARGS[0],), ARGS[1], 2]),  # the pytree structure
        dict(source="another"),  # an edited rbjax source file
        dict(xla_flags="--xla_cpu_use_thunk_runtime=false"),
        dict(jax_version="0.0.1"),
        dict(x64=True),
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_change_to_any_part_of_the_key_misses(change, monkeypatch):
    unchanged = _key(monkeypatch)
    assert _key(monkeypatch) == unchanged  # stable
    assert _key(monkeypatch, **change) != unchanged


def test_the_key_names_weak_types_and_devices(monkeypatch):
    weak = [jnp.asarray(1.0), ARGS[1], 2]  # from a Python float: weakly typed
    strong = [jnp.asarray(1.0, jnp.float32), ARGS[1], 2]
    assert _program().key(weak) != _program().key(strong)
    before, real = _program().key(ARGS), executables.environment
    other_devices = (("cpu", "cpu", 7, 0),)
    monkeypatch.setattr(executables, "environment", lambda: (*real()[:6], other_devices, real()[7]))
    assert _program().key(ARGS) != before


def test_a_broken_file_is_compiled_again_and_replaced(store):
    _program()(*ARGS)
    (path,) = store.glob("*.bin")
    path.write_bytes(b"not an executable")
    fresh = _program()
    with pytest.warns(UserWarning, match="could not be read"):
        out = fresh(*ARGS)
    np.testing.assert_array_equal(out, ARGS[0] * 2 + ARGS[1] * 2 + SALT)
    assert fresh.built == 1 and path.read_bytes() != b"not an executable"
    assert _program()(*ARGS) is not None and not list(store.glob("*.tmp"))


def test_unnamed_programs_stay_in_memory(store):
    program = _program(parts=None)
    program(*ARGS)
    assert program.built == 1 and not store.exists()


def test_the_store_follows_the_compilation_cache_and_can_be_turned_off(monkeypatch):
    cache = jax.config.jax_compilation_cache_dir  # the tests' (tests/conftest.py)
    assert cache and executables.folder() == Path(cache) / executables.FOLDER
    monkeypatch.setenv("RBJAX_PROGRAM_CACHE", "0")
    assert executables.folder() is None


def _local_policy(policy_params, obs, privileged, key):
    return None


def test_only_rbjax_functions_without_closures_name_a_policy():
    from rbjax import policies

    assert executables.policy_name(policies.oracle) == "rbjax.policies.oracle:oracle"
    assert executables.policy_name(_local_policy) is None  # outside rbjax: could change under its name
    assert executables.policy_name(lambda *a: None) is None
    bound = 3
    assert executables.policy_name(lambda *a: bound) is None


def test_envs_are_named_by_value(env):
    from rbjax.config import EnvConfig
    from rbjax.env import Env

    assert executables.env_name(env) == executables.env_name(Env())
    other = Env(EnvConfig.from_catalog(env.catalog, grouping="ref19"))
    assert executables.env_name(other) != executables.env_name(env)

    class Mine(Env):
        pass

    assert executables.env_name(Mine()) is None


def test_donated_arguments_and_pytrees_pass_through_a_stored_program(store):
    def step(state, scale, n):
        return {"x": state["x"] * scale + n + SALT, "y": (state["y"], state["x"])}, jnp.sum(state["x"])

    state = {"x": jnp.arange(4.0), "y": jnp.ones(2, jnp.int32)}
    want = jax.jit(step, static_argnums=(2,))(state, 2.0, 3)
    for _ in range(2):  # traced and stored, then loaded
        program = StoredProgram(step, "step", ("p",), static_argnums=(2,), donate_argnums=(0,))
        given = {"x": jnp.arange(4.0), "y": jnp.ones(2, jnp.int32)}
        got = program(given, 2.0, 3)
        assert jax.tree.structure(got) == jax.tree.structure(want)
        jax.tree.map(np.testing.assert_array_equal, got, want)
        assert given["x"].is_deleted()  # donated
    assert program.loaded == 1


def test_remembered_values_are_computed_once_per_key(store):
    calls = []
    compute = lambda: calls.append(1) or 42
    assert executables.remembered("n", ("a",), compute) == 42
    assert executables.remembered("n", ("a",), compute) == 42 and len(calls) == 1  # read from disk
    assert executables.remembered("n", ("b",), compute) == 42 and len(calls) == 2  # another key
    assert executables.remembered("n", None, compute) == 42 and len(calls) == 3  # not named by value


@pytest.mark.parametrize("stored", [True, False])
def test_a_program_compiles_from_stand_ins_on_a_compiling_thread(stored, store, monkeypatch):
    """``start`` lowers now and compiles on another thread; a program compiled for ``jax.ShapeDtypeStruct``
    stand-ins is the one the arrays they stand for then run (not traced or compiled again)."""
    if not stored:
        monkeypatch.setattr(executables, "folder", lambda: None)
    program = _program("stand-ins", ("a", stored))
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    stand_ins = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=device) for a in ARGS[:2]]
    threads = []
    compile_on = jax.stages.Lowered.compile
    monkeypatch.setattr(
        jax.stages.Lowered, "compile", lambda self, *a: threads.append(_thread_name()) or compile_on(self, *a)
    )
    pending = program.start(*stand_ins, ARGS[2])
    assert jax.tree.map(lambda x: (x.shape, x.dtype), pending.out_info) == ((3,), jnp.float32)
    arrays = [jax.device_put(a, jax.devices()[0]) for a in ARGS[:2]]
    np.testing.assert_array_equal(program(*arrays, ARGS[2]), _double(*ARGS))
    assert program.built == 1 and len(program._executables) == 1  # one key: the stand-ins' and the arrays'
    assert threads == ["rbjax-compile"]


def _thread_name() -> str:
    import threading

    return threading.current_thread().name.rsplit("_", 1)[0]


def test_a_failed_compile_is_not_kept(store, monkeypatch):
    program = _program("fails", ("a",))
    monkeypatch.setattr(
        jax.stages.Lowered, "compile", lambda self, *a: (_ for _ in ()).throw(MemoryError("x"))
    )
    with pytest.raises(MemoryError):
        program(*ARGS)
    monkeypatch.undo()
    monkeypatch.setattr(executables, "folder", lambda: store)
    np.testing.assert_array_equal(program(*ARGS), _double(*ARGS))

"""rbjax.programs: the one holder of programs, the process's one Env per set of options, one ``clear()``."""

import argparse
import gc
import subprocess
import sys
import weakref

import pytest

from rbjax import programs
from rbjax.cli.common import make_env
from rbjax.env import Env, EnvOptions, OptionError


def flags(**over) -> argparse.Namespace:
    d = EnvOptions()
    return argparse.Namespace(
        **{
            "data": d.data,
            "grouping": d.grouping,
            "supplier_attempts": d.supplier_attempts,
            "days": d.days,
            **over,
        }
    )


def test_commands_of_one_process_share_one_env_per_options(env):
    """Two commands' envs are one object (so one set of compiled programs), the session fixture's too; other
    options give another env; each call's params have its own days."""
    (a, pa), (b, pb) = make_env(flags()), make_env(flags(days=30))
    assert a is b is env and int(pa.horizon) == EnvOptions.days and int(pb.horizon) == 30
    other, _ = programs.env_and_params(grouping="ref19")
    assert other is not env and other is programs.env_and_params(EnvOptions(grouping="ref19", days=7))[0]
    assert len(set(other.config.category_of)) == 19


def test_a_bad_option_is_refused_naming_it():
    with pytest.raises(OptionError, match="days"):
        programs.env_and_params(days=0)
    with pytest.raises(OptionError, match="supplier_attempts"):
        programs.env_and_params(supplier_attempts=0)


def test_programs_live_on_their_env_and_one_clear_drops_them_all(env):
    """A program is built once per (kind, env, parts); it goes with its env (the holder keeps no env alive);
    ``clear()`` drops every env's programs, the env-less ones and the envs by options."""
    built = []
    build = lambda: built.append(1) or len(built)  # noqa: E731
    a = programs.cached("test.kind", build, env, ("x",))
    assert programs.cached("test.kind", build, env, ("x",)) == a and len(built) == 1
    assert programs.cached("test.kind", build, env, ("y",)) == 2  # other parts: another program
    assert programs.cached("test.kind", build, None, ("x",)) == 3  # no env: its own place

    other = Env(env.config, env.catalog)
    programs.cached("test.kind", (lambda e: lambda: e)(other), other)  # a program refers to its env: a cycle
    gone = weakref.ref(other)
    del other
    gc.collect()
    assert gone() is None  # weakly held: no process-wide cache keeps an env alive

    programs.clear(keep_envs=True)  # as conftest does between groups: the session's env stays
    assert programs.cached("test.kind", build, env, ("x",)) == 4  # built again
    assert programs.cached("test.kind", build, None, ("x",)) == 5
    assert programs.env_and_params()[0] is env
    programs.clear(keep_envs=True)  # nothing of this test left behind


def test_one_clear_drops_the_envs_by_options_too():
    """In a fresh process (this one's session env stays): after ``clear()`` the options give a new env."""
    code = (
        "from rbjax import programs\n"
        "first = programs.env_and_params(supplier_attempts=1)[0]\n"
        "assert programs.env_and_params(supplier_attempts=1)[0] is first\n"
        "programs.clear()\n"
        "assert programs.env_and_params(supplier_attempts=1)[0] is not first\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]

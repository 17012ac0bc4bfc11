"""rbjax.runners.programs: the process's one Env per set of options, shared by every command run in it."""

import argparse

import pytest

from rbjax.cli.common import make_env
from rbjax.env import OptionError
from rbjax.runners import programs


def flags(**over) -> argparse.Namespace:
    return argparse.Namespace(
        **{"data": None, "grouping": "20", "supplier_attempts": 50, "days": 180, **over}
    )


def test_commands_of_one_process_share_one_env_per_options(env):
    """Two commands' envs are one object (so one set of compiled programs), the session fixture's too; other
    options give another env; each call's params have its own days."""
    (a, pa), (b, pb) = make_env(flags()), make_env(flags(days=30))
    assert a is b is env and int(pa.horizon) == 180 and int(pb.horizon) == 30
    other, _ = programs.env_and_params(grouping="ref19")
    assert other is not env and other is programs.env_and_params(grouping="ref19", days=7)[0]
    assert len(set(other.config.category_of)) == 19


def test_a_bad_option_is_refused_naming_it():
    with pytest.raises(OptionError, match="days"):
        programs.env_and_params(days=0)
    with pytest.raises(OptionError, match="supplier_attempts"):
        programs.env_and_params(supplier_attempts=0)

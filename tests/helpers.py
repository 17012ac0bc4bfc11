"""Small builders shared by the scenario tests: a fixed supplier world, actions, subprocess scripts."""

import importlib
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.model import supplier_world
from rbjax.state import Action

J, K = 96, 5


def need(module: str):
    """Import ``module``, a dependency of the ``dev`` extra: where it is missing, skip the caller (a test file
    at import, or a test), except under CI (the environment variable CI=true, as .ci/run sets it), where a
    missing dev dependency is a broken install and fails instead of hiding the tests behind skips."""
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        try:
            return importlib.import_module(module)
        except ImportError as error:
            raise ImportError(
                f"{module} is a dev dependency, and CI=true: pip install -e '.[dev]' ({error})"
            ) from error
    return pytest.importorskip(module)


def fixed_world(env, params, tmin=3, tmax=3):
    """A world whose every lead time is drawn from [tmin, tmax]."""
    world = supplier_world.make_world(jax.random.key(7), params, env.config)
    return world.replace(
        transport_min=jnp.full((J, K), tmin, jnp.int8), transport_max=jnp.full((J, K), tmax, jnp.int8)
    )


def act(state, shelf=(), order=None, price=None):
    """An action that shelves ``shelf``, orders ``order`` [J, K] and sets ``price`` (default: keep)."""
    mask = (
        jnp.zeros(J, bool).at[jnp.asarray(shelf, jnp.int32)].set(True) if len(shelf) else jnp.zeros(J, bool)
    )
    o = jnp.zeros((J, K), jnp.float32) if order is None else order
    return Action(price=state.prices if price is None else price, shelf=mask, order=o)


def oracle_layout(state, action: Action) -> Action:
    """``action`` with ``set_price`` and a float32 ``order_rank``, the oracle's layout, filled as ``Env.step``
    reads a None (a price call where the price differs, calls in product order): the same day, and with every
    dense action in one layout, one compiled step."""
    price_call = action.price.astype(state.prices.dtype) != state.prices
    return action.replace(
        set_price=price_call if action.set_price is None else action.set_price.astype(bool),
        order_rank=jnp.arange(J, dtype=jnp.float32)
        if action.order_rank is None
        else action.order_rank.astype(jnp.float32),
    )


def uncommitted(tree):
    """``tree``'s arrays as fresh ones on the default device, uncommitted, as a plain jit's outputs from
    uncommitted inputs are: jit writes a committed argument's sharding into the program, so the same step of
    a committed state (a rollout's, a placed one) is another program to compile."""

    def fresh(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(jnp.asarray(np.asarray(jax.random.key_data(x))))
        return jnp.asarray(np.asarray(x))

    return jax.tree.map(fresh, tree)


def order_of(j, units, k=0):
    """[J, K] one order line: ``units`` of product j from supplier k."""
    return jnp.zeros((J, K), jnp.float32).at[j, k].set(units)


def run_script(script: str, done: str) -> None:
    """Run ``script`` in a fresh Python (its own JAX configuration); it must print ``done``."""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert done in out.stdout


COMMANDS = """
import sys, jax
from rbjax.cli import main
for line in sys.argv[1:]:
    print("$ rbjax", line, flush=True)
    main(line.split())
print("all done on", len(jax.devices()), "devices")
"""


def rbjax_commands(*lines: str, cwd, stderr: bool = False) -> str:
    """Run the ``rbjax`` command ``lines`` one after another in one fresh process on the CLI's default devices
    (one per core), in ``cwd``; each must succeed. Returns what it printed (and its stderr with ``stderr``)."""
    out = subprocess.run(
        [sys.executable, "-c", COMMANDS, *lines], cwd=cwd, capture_output=True, text=True, timeout=1200
    )
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-3000:])
    return out.stdout + (out.stderr if stderr else "")


def order_lines(rows, L=6):
    """OrderLines from (product, supplier, units, lead, order) rows, padded to L."""
    from rbjax.state import OrderLines

    cols = np.zeros((5, L), np.int32)
    cols[:, : len(rows)] = np.asarray(rows, np.int32).T if rows else 0
    live = np.arange(L) < len(rows)
    return OrderLines(*(jnp.asarray(c) for c in cols), live=jnp.asarray(live))


def cli_error(capsys, line: str) -> str:
    """Run ``rbjax LINE`` in this process; it must exit non-zero. Returns what it printed to stderr."""
    from rbjax.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(line.split())
    code = exit_.value.code
    assert code not in (0, None), line
    return (code + "\n" if isinstance(code, str) else "") + capsys.readouterr().err

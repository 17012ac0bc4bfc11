import os
import tempfile

# One persistent compilation cache for the session, shared by the pytest-xdist workers (same run id) and
# the subprocesses and notebook kernels the tests start: a program compiled once (same shapes, same
# devices) is not compiled again.
_run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), f"rbjax-test-jax-cache-{_run}")
    if _run
    else tempfile.mkdtemp(prefix="rbjax-test-jax-cache-"),
)

import jax  # noqa: E402
import pytest

from rbjax.env import Env

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "retailbench")


@pytest.fixture(scope="session")
def env():
    return Env()


@pytest.fixture(scope="session")
def params(env):
    return env.default_params()


@pytest.fixture(scope="session")
def step(env):
    """Single-store jitted step shared by the scenario tests (one compile for the whole session)."""
    return jax.jit(env.step)


@pytest.fixture(scope="session")
def reset(env):
    return jax.jit(env.reset)

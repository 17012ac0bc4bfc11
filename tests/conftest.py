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

# Cache every program, not only those that took a second to compile: the CLI, notebook and wheel tests start
# fresh processes that would otherwise compile the same many small programs again (train ppo: 24 s -> 17 s).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import jax  # noqa: E402
import pytest

# Tests that compile the same programs share a pytest-xdist group (one worker, one after another), so the later
# ones load them from the persistent cache instead of compiling them again; every other test is grouped by file.
GROUPS = {
    "tests/test_golden.py": "ppo",  # its random-policy rollout (4 stores x 30 days) is test_rl.py's mid-episode states
    "tests/test_rl.py": "ppo",
    "tests/test_cli.py::test_cli_train_and_eval_ppo": "ppo",
    "tests/test_notebooks.py::test_notebook_runs[ppo_baseline.ipynb]": "ppo",
    "tests/test_cli.py::test_cli_info_and_oracle": "oracle-16x180",
    "tests/test_notebooks.py::test_notebook_runs[oracle_sweep.ipynb]": "oracle-16x180",
    "tests/test_wheel.py": "oracle-16x180",
    "tests/test_oracle.py": "oracle-16x180",
    "tests/test_cli.py::test_cli_sweep_writes_tables_and_plots": "oracle-16x180",
    "tests/test_metrics.py::test_sweep_rows_map_to_their_points_and_seeds_are_shared": "oracle-16x180",
    "tests/test_agent_run.py": "agent-engine",  # one engine batch of 16 stores (runs of 4, 8, 16 share it)
    "tests/test_agent_llm.py": "agent-engine",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            module = item.nodeid.split("::")[0]
            group = GROUPS.get(item.nodeid) or GROUPS.get(module) or module
            item.add_marker(pytest.mark.xdist_group(group))


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

import os
import tempfile

# One persistent compilation cache, shared by the pytest-xdist workers and the subprocesses and notebook
# kernels the tests start: a program compiled once (same shapes, same devices) is not compiled again. A
# developer's runs share one across runs too (~/.cache/rbjax/test-xla: the developers' loop, `pytest -m "not
# slow"`, then compiles only the programs a change touched; JAX keys each entry by the program, the compiler
# and its flags, so a stale entry is never used). CI (CI=true) and RBJAX_TEST_FRESH_CACHE=1 start from an empty
# cache per run, so the suite's time there includes every compilation.
_run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
_fresh = any(
    os.environ.get(v, "").strip().lower() in ("true", "1", "yes") for v in ("CI", "RBJAX_TEST_FRESH_CACHE")
)
if _fresh:
    _cache = (
        os.path.join(tempfile.gettempdir(), f"rbjax-test-jax-cache-{_run}")
        if _run
        else tempfile.mkdtemp(prefix="rbjax-test-jax-cache-")
    )
else:
    _cache = os.path.join(os.path.expanduser("~"), ".cache", "rbjax", "test-xla")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _cache)

# Cache every program, not only those that took a second to compile: the CLI, notebook and wheel tests start
# fresh processes that would otherwise compile the same many small programs again (train ppo: 24 s -> 17 s).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import jax  # noqa: E402
import pytest

# Tests that compile the same programs share a pytest-xdist group (one worker, one after another), so the later
# ones load them from the persistent cache instead of compiling them again; every other test is grouped by file.
GROUPS = {
    # the golden fixture's programs (4 stores, 30 days per call): test_rollout's episodes run them for 180 days
    "tests/test_golden.py": "golden",
    "tests/runners/test_rollout.py": "golden",
    "tests/rl/test_rl.py": "ppo",  # its mid-episode states are the golden random rollout (from the other worker)
    "tests/test_notebooks.py::test_notebook_runs[ppo_baseline.ipynb]": "ppo",
    "tests/cli/test_cli.py::test_cli_info_and_oracle": "oracle",
    "tests/test_notebooks.py::test_notebook_runs[oracle_sweep.ipynb]": "oracle",
    "tests/test_wheel.py": "oracle",
    "tests/policies/test_oracle.py": "oracle",
    "tests/cli/test_cli.py::test_cli_sweep_writes_tables_and_plots": "oracle",
    "tests/results/test_metrics.py::test_sweep_rows_map_to_their_points_and_seeds_are_shared": "oracle",
    # test_orders' NaN-rank step is test_oracle's step (float ranks); orders and inventory reset on a fixed world
    "tests/model/test_orders.py": "oracle",
    "tests/model/test_inventory.py": "oracle",
    # test_env's scenarios play the single-store reset and step of the scenario tests above (the session
    # fixtures): after them on one worker they load those programs, where on the other worker they compiled them
    "tests/test_env.py": "oracle",
    "tests/agents/test_agent_run.py": "agent-engine",  # one engine batch of 16 stores (runs of 4, 8, 16 share it)
    "tests/agents/test_agent_llm.py": "agent-engine",
    "tests/agents/test_agent_resume.py": "agent-engine",
    "tests/agents/test_agent_replay.py": "agent-engine",
    "tests/agents/test_agent_slices.py": "agent-engine",
    "tests/agents/test_run_folders.py": "agent-engine",
    # the language-model tasks of tests/lm/conftest.py's slices run (2 stores, 24 days, tasks of 3 days and a
    # 4-day tail), their panels (a batch of 112 stores) and the sessions that play them: one worker, one after
    # another, so that each program compiles once (docs/lm_training.md's first try has their shapes)
    **{
        f"tests/lm/test_{name}.py": "lm-tasks"
        for name in "agents_tasks lm_cli panel demos sessions server trl_face turn_rewards first_try".split()
    },
    "tests/agents/test_agent_save_states.py": "lm-tasks",
}
# The order the groups start in (the others follow in file order): the golden programs first, as the other
# groups reuse them through the cache, and beside them the one group that shares nothing with them (its processes
# keep their own cache); then the longest groups, so that the two workers end close together. (The groups that
# use the golden programs, ppo first, start once a worker is free, when the golden group has compiled them: two
# workers compiling one program at once each pay for it.)
FIRST = (
    "golden",
    "tests/cli/test_default_devices.py",  # its own processes compile the multi-device programs
    "ppo",
    "oracle",
    "wrappers",
    "agent-engine",
    "lm-tasks",
    "tests/runners/test_distributed.py",
)


def _group(item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return marker.kwargs.get("name") or marker.args[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            module = item.nodeid.split("::")[0]
            group = GROUPS.get(item.nodeid) or GROUPS.get(module) or module
            item.add_marker(pytest.mark.xdist_group(group))
    rank = {group: i for i, group in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(_group(item), len(FIRST)))


from helpers import oracle_layout

from rbjax.programs import env_and_params

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "retailbench")


@pytest.fixture(scope="session")
def env():
    """The process's one default Env, the one the commands run in-process use (``programs.env_and_params``),
    so the tests and the commands share their compiled programs."""
    return env_and_params()[0]


@pytest.fixture(scope="session")
def params(env):
    return env.default_params()


@pytest.fixture(scope="session")
def step(env):
    """The single-store jitted step of the scenario tests, one program for the whole session: each action is
    given the oracle's layout and the params no fixed world (``helpers.oracle_layout``, exactly as the step
    reads them), so every test's dense actions and worlds share it (an Action's optional fields and a world in
    the params are each another program). Actions with ``lines`` are a second program."""
    jitted = jax.jit(env.step)

    def run(key, state, action, params):
        return jitted(key, state, oracle_layout(state, action), params.replace(world=None))

    return run


@pytest.fixture(scope="session")
def reset(env):
    return jax.jit(env.reset)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Drop every compiled program when a worker's next test is of another group (``GROUPS``; by default a
    file), once the last test's fixtures are torn down (a finalizer may still compile): a worker that keeps
    hundreds of XLA:CPU executables alive crashed inside XLA's compiler late in the suite (its memory maps add
    up). Inside a group they stay: its tests share them by design, and dropping them would make each file
    trace, lower and load them from the persistent cache again (about 10 s for the agents' engine)."""
    result = yield
    if nextitem is None or _group(nextitem) != _group(item):
        from rbjax import programs

        programs.clear(keep_envs=True)
    return result

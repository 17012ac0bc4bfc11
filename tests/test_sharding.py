"""Issue 5: sharding over 2 forced CPU devices gives the records of one device; the profiler runs."""
import subprocess
import sys

import numpy as np

SCRIPT = """
import jax, numpy as np
import rbjax
rbjax.devices.split_cpu(2)
from rbjax.policies import oracle, OracleParams
assert len(jax.devices()) == 2
env = rbjax.Env()
params = env.default_params()
keys = jax.random.split(jax.random.key(3), 5)             # odd: the sharded batch is padded
one, _ = rbjax.rollout(env, oracle, OracleParams.default(), params, keys, days=4, devices=jax.devices()[:1])
two, state = rbjax.rollout(env, oracle, OracleParams.default(), params, keys, days=4)
assert state.funds.shape == (5,)
for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)):
    assert a.shape == b.shape and np.array_equal(np.asarray(a), np.asarray(b))
assert int(np.asarray(two.order_lines).sum()) > 0
print("identical")
"""


def _run_script(script: str, done: str) -> None:
    """Run ``script`` in a fresh Python (its own JAX configuration); it must print ``done``."""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert done in out.stdout


def test_sharded_rollout_equals_single_device():
    _run_script(SCRIPT, "identical")


def test_bench_quick_writes_its_tables(tmp_path):
    from rbjax.cli import main
    main(["bench", "--quick", "--out", str(tmp_path)])
    md = (tmp_path / "bench.md").read_text()
    assert "store-days/s" in md and "floor kernel" in md and "Step / floor" in md
    import pandas as pd
    table = pd.read_csv(tmp_path / "bench.csv")
    assert len(table) >= 1 and (table.store_days_per_s > 0).all()
    modules = pd.read_csv(tmp_path / "modules.csv")
    assert {"deliver", "category demand", "observe"} <= set(modules.module) and np.isfinite(modules.ms).all()
    assert (tmp_path / "bench.png").exists()


def test_importing_rbjax_turns_off_the_miscompiling_cpu_fusions():
    """rbjax.devices.guard_cpu_compiler: the YNNPACK flag on the affected jaxlib versions, none with
    RBJAX_KEEP_YNN=1, and the user's own XLA_FLAGS setting wins."""
    import os
    from rbjax.perf import devices
    probe = "import os, rbjax; print(os.environ.get('XLA_FLAGS', ''))"
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", devices.KEEP_YNN)}
    run = lambda **extra: subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                                         env={**base, **extra}).stdout.split()
    affected = devices.YNN_VERSIONS[0] <= devices._jaxlib_version() < devices.YNN_VERSIONS[1]
    assert (devices.YNN_FLAG in run()) == affected
    assert devices.YNN_FLAG not in run(RBJAX_KEEP_YNN="1")
    assert run(XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=ynn_reduce") == [
        "--xla_cpu_experimental_ynn_fusion_type=ynn_reduce"]


def test_drift_summary_separates_rounding_from_diverged_paths():
    from rbjax.perf.bench import DRIFT_COUNTS, drift_summary
    zeros = np.zeros((2, 4))
    f64 = {k: zeros.copy() for k in DRIFT_COUNTS} | {"funds": np.full((2, 4), 100.0), "net_worth": np.full((2, 4), 200.0)}
    f32 = {k: v.copy() for k, v in f64.items()}
    f32["funds"][:, :] += 0.5            # rounding on every day of both stores
    f32["sold"][1, 2] = 1                # store 1 draws differently on day 2 ...
    f32["funds"][1, 2:] += 50.0          # ... and diverges from there
    res = drift_summary(f32, f64)
    assert res["funds"] == 50.5 and res["funds_same_path"] == 0.5
    assert res["net_worth"] == 0.0 and res["net_worth_same_path"] == 0.0
    assert res["same_path_stores"] == 1 and res["median_first_split_day"] == 3.0   # days 4 and 2


FLOAT64 = """
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
import rbjax
from rbjax.config import EnvConfig
from rbjax.policies import oracle, OracleParams
cat = rbjax.load_catalog()
env = rbjax.Env(EnvConfig.from_catalog(cat, float64=True), cat)
rec, state = rbjax.rollout(env, oracle, OracleParams.default(), env.default_params(),
                           jax.random.split(jax.random.key(0), 2), days=3, devices=jax.devices()[:1])
assert state.funds.dtype == np.float64 and np.isfinite(np.asarray(rec.net_worth)).all()
assert int(np.asarray(rec.sold).sum()) > 0
print("float64 ok")
"""


def test_float64_engine_runs():
    """The float64 option (``EnvConfig(float64=True)`` with x64 on), which the bench's drift run uses."""
    _run_script(FLOAT64, "float64 ok")

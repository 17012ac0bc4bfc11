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


def test_sharded_rollout_equals_single_device():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "identical" in out.stdout


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
    from rbjax import devices
    probe = "import os, rbjax; print(os.environ.get('XLA_FLAGS', ''))"
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", devices.KEEP_YNN)}
    run = lambda **extra: subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                                         env={**base, **extra}).stdout.split()
    affected = devices.YNN_VERSIONS[0] <= devices._jaxlib_version() < devices.YNN_VERSIONS[1]
    assert (devices.YNN_FLAG in run()) == affected
    assert devices.YNN_FLAG not in run(RBJAX_KEEP_YNN="1")
    assert run(XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=ynn_reduce") == [
        "--xla_cpu_experimental_ynn_fusion_type=ynn_reduce"]

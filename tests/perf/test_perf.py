"""rbjax.perf: the profiler's tables, the CPU compiler guard, the float drift summary."""

import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # bench in fresh processes


def test_bench_quick_writes_its_table_and_says_how_to_compare(tmp_path):
    from rbjax.cli import main

    # 4 stores: the golden oracle program; the README's machines were timed at 256, so nothing is compared
    main(["bench", "--quick", "--stores", "4", "--out", str(tmp_path)])
    md = (tmp_path / "bench.md").read_text()
    assert "| oracle |" in md and "store-days/s" in md and "nan" not in md
    assert "timed at 256 stores x 30 days; run `rbjax bench --quick` without --stores" in md
    import pandas as pd

    table = pd.read_csv(tmp_path / "bench.csv")
    assert len(table) == 1 and (table.store_days_per_s > 0).all() and table.batch[0] == 4


def test_importing_rbjax_turns_off_the_miscompiling_cpu_fusions():
    """rbjax.devices.guard_cpu_compiler: the YNNPACK flag on the affected jaxlib versions, none with
    RBJAX_KEEP_YNN=1, and the user's own XLA_FLAGS setting wins."""
    import os

    from rbjax.perf import devices

    probe = "import os, rbjax; print(os.environ.get('XLA_FLAGS', ''))"
    base = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", devices.KEEP_YNN)}
    run = lambda **extra: subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env={**base, **extra}
    ).stdout.split()
    affected = devices.YNN_VERSIONS[0] <= devices._jaxlib_version() < devices.YNN_VERSIONS[1]
    assert (devices.YNN_FLAG in run()) == affected
    assert devices.YNN_FLAG not in run(RBJAX_KEEP_YNN="1")
    assert run(XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=ynn_reduce") == [
        "--xla_cpu_experimental_ynn_fusion_type=ynn_reduce"
    ]


def test_drift_summary_separates_rounding_from_diverged_paths():
    from rbjax.perf.bench import DRIFT_COUNTS, drift_summary

    zeros = np.zeros((2, 4))
    f64 = {k: zeros.copy() for k in DRIFT_COUNTS} | {
        "funds": np.full((2, 4), 100.0),
        "net_worth": np.full((2, 4), 200.0),
    }
    f32 = {k: v.copy() for k, v in f64.items()}
    f32["funds"][:, :] += 0.5  # rounding on every day of both stores
    f32["sold"][1, 2] = 1  # store 1 draws differently on day 2 ...
    f32["funds"][1, 2:] += 50.0  # ... and diverges from there
    res = drift_summary(f32, f64)
    assert res["funds"] == 50.5 and res["funds_same_path"] == 0.5
    assert res["net_worth"] == 0.0 and res["net_worth_same_path"] == 0.0
    assert res["same_path_stores"] == 1 and res["median_first_split_day"] == 3.0  # days 4 and 2


def test_bench_profile_names_the_days_kernels_and_their_sources(tmp_path):
    import pandas as pd

    # a fresh process, as a user runs it (in a test worker that had compiled much before, XLA's compiler once
    # crashed compiling this program; alone it never did). The profile runs on one device; ``--devices 1``
    # also keeps the tests' compiler flags, so its 4 stores open with the golden records' compiled reset
    line = ["--devices", "1", "bench", "--profile", "--stores", "4", "--out", str(tmp_path)]
    subprocess.run([sys.executable, "-m", "rbjax", *line], check=True)
    table = pd.read_csv(tmp_path / "profile.csv")
    assert len(table) > 10 and (table.ms >= 0).all() and table.ms.sum() > 0
    assert abs(table.share.sum() - 1.0) < 1e-6 and (table.calls > 0).all()
    sources = table.source
    # the kernels are traced back to the model's functions, which hold most of the day's time
    assert sources.str.match(r"model/\w+\.py:\w+").any()
    assert table.ms[sources.str.startswith(("model/", "policies/", "env.py"))].sum() > 0.6 * table.ms.sum()
    assert list(tmp_path.glob("trace/plugins/profile/*/*.trace.json.gz"))
    assert "| rbjax function |" in (tmp_path / "profile.md").read_text()


def test_kernel_sources_reads_the_stack_frames_of_an_hlo_module():
    from rbjax.perf.op_profile import kernel_sources

    hlo = """HloModule jit_day, is_scheduled=true

FileNames
1 "/site/rbjax/model/demand.py"
2 "/site/rbjax/kernels/rng.py"
3 "/site/rbjax/env.py"

FunctionNames
1 "attraction"
2 "bits_at"
3 "step"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=2}
2 {file_name_id=2 function_name_id=2 line=5 end_line=5 column=1 end_column=2}
3 {file_name_id=3 function_name_id=3 line=7 end_line=7 column=1 end_column=2}

StackFrames
1 {file_location_id=3 parent_frame_id=1}
2 {file_location_id=1 parent_frame_id=2}
3 {file_location_id=2 parent_frame_id=3}

%fused_computation (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  %exponential.1 = f32[4]{0} exponential(%param_0), metadata={op_name="jit(day)/exp" stack_frame_id=3}
  ROOT %add.2 = f32[4]{0} add(%exponential.1, %param_0), metadata={op_name="jit(day)/add" stack_frame_id=2}
}

ENTRY %main.3 (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %exp_fusion = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused_computation
  %copy.1 = f32[4]{0} copy(%x), metadata={op_name="jit(day)/copy" stack_frame_id=1}
}
"""
    sources = kernel_sources(hlo)
    # the rng helper's frame is skipped for the model function that called it (XLA prints parent + 1)
    assert sources["exp_fusion"] == "model/demand.py:attraction"
    assert sources["copy.1"] == "env.py:step"


def test_setup_splits_the_cpu_and_points_the_cache_as_the_cli_does(tmp_path):
    """rbjax.setup in a fresh process: one CPU device per core and the cache of $JAX_COMPILATION_CACHE_DIR by
    default, an explicit count and folder otherwise, and a clear error once JAX has started."""
    from helpers import run_script

    script = f"""
import os
os.environ["JAX_COMPILATION_CACHE_DIR"] = {str(tmp_path / "env")!r}
import jax, rbjax
rbjax.setup()
assert len(jax.devices("cpu")) == os.cpu_count(), jax.devices("cpu")
assert jax.config.jax_compilation_cache_dir == {str(tmp_path / "env")!r}
jax.numpy.ones(3).block_until_ready()
try:
    rbjax.setup(devices=2, cache="none")
except RuntimeError as e:
    assert "before the first JAX computation" in str(e), e
else:
    raise AssertionError("setup after JAX started must raise")
print("done")
"""
    run_script(script, "done")
    script = f"""
import jax, rbjax
rbjax.setup(devices=3, cache={str(tmp_path / "own")!r})
assert len(jax.devices("cpu")) == 3 and jax.config.jax_compilation_cache_dir == {str(tmp_path / "own")!r}
print("done")
"""
    run_script(script, "done")
    assert (tmp_path / "own").is_dir() and (tmp_path / "env").is_dir()


def test_bytes_accessed_counts_what_a_program_reads_and_writes():
    import jax
    import jax.numpy as jnp

    from rbjax.perf.profiling import bytes_accessed

    x = jnp.zeros(1000, jnp.float32)
    one_pass = bytes_accessed(jax.jit(lambda x: x + 1).lower(x).compile())
    assert one_pass >= 8000  # reads 4,000 bytes and writes 4,000
    # two passes through memory (a sort between them) move more than one
    assert bytes_accessed(jax.jit(lambda x: jnp.sort(x) + 1).lower(x).compile()) > one_pass


def test_program_counts_equations_instructions_and_kernels():
    import jax
    import jax.numpy as jnp

    from rbjax.perf.program import count_equations, hlo_counts, measure

    def body(c, x):
        return c + jnp.sin(x), c

    def f(x):
        return jax.lax.scan(body, 0.0, x)[0] * 2.0

    x = jnp.arange(8.0)
    jaxpr = jax.make_jaxpr(f)(x).jaxpr
    scan = next(e for e in jaxpr.eqns if e.primitive.name == "scan")
    assert count_equations(jaxpr) == len(jaxpr.eqns) + len(scan.params["jaxpr"].eqns)  # the body counts
    row = measure("f", f, x)
    assert row["jaxpr_equations"] == count_equations(jax.make_jaxpr(f)(x))
    assert 0 < row["kernels"] <= row["hlo_instructions"]
    assert min(row["trace_s"], row["lower_s"], row["compile_s"]) > 0
    hlo = """HloModule m

%fused_computation (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %c = f32[] constant(2)
  %b = f32[4]{0} broadcast(f32[] %c), dimensions={}
  ROOT %m = f32[4]{0} multiply(f32[4]{0} %p0, f32[4]{0} %b)
}

ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4]{0} parameter(0)
  %f = f32[4]{0} fusion(f32[4]{0} %x), kind=kLoop, calls=%fused_computation
  %s = f32[4]{0} sine(f32[4]{0} %f)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(f32[4]{0} %f, f32[4]{0} %s)
}
"""
    assert hlo_counts(hlo) == (8, 2)  # kernels: the fusion and the sine


def test_bench_program_writes_its_table(tmp_path, monkeypatch):
    import jax.numpy as jnp
    import pandas as pd

    from rbjax.cli import main
    from rbjax.perf import program

    small = {"reset": (lambda x: x + 1.0, (jnp.ones(3),)), "day": (lambda x: jnp.cumsum(x), (jnp.ones(3),))}
    monkeypatch.setattr(program, "programs", lambda env, params, stores: small)  # the real ones: minutes
    main(["bench", "--program", "--stores", "2", "--out", str(tmp_path)])
    table = pd.read_csv(tmp_path / "program.csv")
    assert list(table.program) == ["reset", "day"] and (table.jaxpr_equations > 0).all()
    assert "| reset |" in (tmp_path / "program.md").read_text()
    for bad in (["--program", "--profile"], ["--program", "--stores", "0"]):
        with pytest.raises(SystemExit) as e:
            main(["bench", *bad, "--out", str(tmp_path)])
        assert e.value.code == 2

"""The README's main job and the sweep command, run as a user would (subprocesses)."""
import subprocess
import sys

import pandas as pd
import pytest

from rbjax import Env
from rbjax.rl.train import load


def rbjax(*args, check=True):
    return subprocess.run([sys.executable, "-m", "rbjax", *args], capture_output=True, text=True, check=check)


def test_cli_info_and_oracle(tmp_path):
    assert "96 products in 20 categories" in rbjax("info").stdout
    # the size of notebooks/oracle_sweep.ipynb's rollout, on one device: the compiled program is shared
    out = rbjax("--devices", "1", "oracle", "--stores", "16", "--days", "180", "--progress", "0",
                "--out", str(tmp_path)).stdout
    assert "oracle policy, 16 stores x 180 days" in out and "final_net_worth" in out and "131,510" in out
    table = pd.read_csv(tmp_path / "oracle_stores.csv")
    assert len(table) == 16 and (table.survival_days == 180).all() and (tmp_path / "oracle_net_worth.png").exists()


def test_cli_sweep_writes_tables_and_plots(tmp_path):
    out = rbjax("sweep", "--multiplier", "4,6", "--shelf", "30,40", "--seeds", "2", "--days", "3",
                "--out", str(tmp_path)).stdout
    table = pd.read_csv(tmp_path / "sweep.csv")
    assert len(table) == 8 and set(table.multiplier) == {4, 6} and set(table.shelf_capacity) == {30, 40}
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 4 and (tmp_path / "final_net_worth.png").exists()
    assert "best mean final net worth" in out


def test_cli_rejects_bad_input():
    r = rbjax("run", "--stores", "0", check=False)
    assert r.returncode != 0 and "--stores" in r.stderr
    r = rbjax("sweep", "--multiplier", "4,x", check=False)
    assert r.returncode != 0 and "--multiplier" in r.stderr
    r = rbjax("sweep", check=False)
    assert r.returncode != 0 and "at least one parameter" in r.stderr


def test_cli_train_and_eval_ppo(tmp_path):
    # tests/test_rl.py's SMALL setting: the compiled training program comes from the persistent cache
    out = rbjax("train", "ppo", "--stores", "32", "--rollout-days", "8", "--steps", str(32 * 8 * 24),
                "--minibatches", "4", "--hidden", "32", "--days", "40", "--progress", "0", "--out", str(tmp_path)).stdout
    assert "24 updates" in out and "store-days/s" in out
    assert {"config.json", "policy.msgpack", "curve.csv", "curve.png"} <= {p.name for p in tmp_path.iterdir()}
    assert len(pd.read_csv(tmp_path / "curve.csv")) == 24
    out = rbjax("--devices", "1", "eval", "--policy", "ppo", "--checkpoint", str(tmp_path), "--stores", "8",
                "--days", "40", "--progress", "0").stdout
    assert "ppo policy, 8 stores x 40 days" in out and "final_net_worth" in out
    assert "24,351" in out or "24350.98" in out                 # beside the best LLM row
    # continue from the checkpoint (same program: the start policy is always an argument of the compiled run)
    first, _ = load(tmp_path, Env())
    more = rbjax("train", "ppo", "--stores", "32", "--rollout-days", "8", "--steps", str(32 * 8 * 24),
                 "--minibatches", "4", "--hidden", "32", "--days", "40", "--progress", "0", "--init", str(tmp_path),
                 "--out", str(tmp_path / "more"))
    assert "24 updates" in more.stdout
    second, _ = load(tmp_path / "more", Env())
    assert float(second.globals_.count) == pytest.approx(2 * float(first.globals_.count), rel=1e-3)  # stats went on
    r = rbjax("train", "ppo", "--hidden", "16", "--init", str(tmp_path), "--steps", "100000", check=False)
    assert r.returncode != 0 and "hidden=32" in r.stderr
    r = rbjax("eval", "--policy", "ppo", "--stores", "8", "--days", "5", check=False)
    assert r.returncode != 0 and "--checkpoint" in r.stderr
    r = rbjax("eval", "--policy", "ppo", "--checkpoint", str(tmp_path / "missing"), "--days", "5", check=False)
    assert r.returncode != 0 and "not a PPO checkpoint" in r.stderr


def test_cli_points_the_compilation_cache_at_its_folder(tmp_path, monkeypatch):
    import jax
    from rbjax.cli import _use_compilation_cache
    before = jax.config.jax_compilation_cache_dir
    try:
        _use_compilation_cache(str(tmp_path / "a"))
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "a")
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "b"))
        _use_compilation_cache(None)
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "b")
        _use_compilation_cache("none")     # off: the setting is left alone
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "b")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)

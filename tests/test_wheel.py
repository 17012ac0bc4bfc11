"""A built wheel carries the shipped catalogue and PPO checkpoint: installed in a fresh virtual environment,
outside the repository, ``rbjax info``, ``rbjax oracle`` and ``rbjax eval --policy ppo`` work."""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and installs a wheel

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_installs_with_its_data_and_runs_outside_the_repository(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    wheel = next(dist.glob("rbjax-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the fresh environment borrows the test environment's dependencies (jax, flax, ...), not its rbjax
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    # a user's shell: no PYTHONPATH pointing at a checkout (benchmarks/suite_time.py sets one for its tree)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def rbjax(*args):
        out = subprocess.run(
            [str(python), "-m", "rbjax", *args], capture_output=True, text=True, cwd=work, env=clean
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    where = subprocess.run(
        [str(python), "-c", "import rbjax; print(rbjax.__file__, rbjax.PPO_CHECKPOINT)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=work,
        env=clean,
    ).stdout
    assert str(site) in where and str(ROOT) not in where
    assert "96 products in 20 categories" in rbjax("info")
    # the golden oracle program and test_rl.py's evaluation program: both come from the persistent cache
    oracle = rbjax(*"--devices 1 oracle --stores 4 --days 180 --progress 30 --records --out oracle".split())
    assert "oracle policy, 4 stores x 180 days" in oracle and (work / "oracle" / "records.npz").exists()
    checkpoint = where.split()[1]
    common = "--devices 1 eval --policy ppo --greedy --stores 256 --days 40 --progress 0 --supplier-attempts 1".split()
    ppo = rbjax(*common, "--checkpoint", checkpoint)
    assert "ppo policy, 256 stores x 40 days" in ppo

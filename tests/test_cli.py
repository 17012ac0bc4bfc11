"""The README's main job: the CLI prints the catalogue and a rollout's metrics."""
import subprocess
import sys


def test_cli_info_and_run():
    out = subprocess.run([sys.executable, "-m", "rbjax", "info"], capture_output=True, text=True, check=True).stdout
    assert "96 products in 20 categories" in out
    out = subprocess.run([sys.executable, "-m", "rbjax", "run", "--stores", "2", "--days", "5", "--progress", "0"],
                         capture_output=True, text=True, check=True).stdout
    assert "2 stores x 5 days" in out and "final net worth" in out


def test_cli_rejects_bad_input():
    r = subprocess.run([sys.executable, "-m", "rbjax", "run", "--stores", "0"], capture_output=True, text=True)
    assert r.returncode != 0 and "--stores" in r.stderr

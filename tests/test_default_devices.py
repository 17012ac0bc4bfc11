"""The commands of the README and ``docs/`` as a user runs them: the CLI's default devices (one per core: 2 on
CI), no ``--devices 1``. Five stores do not divide two devices, and a ``--store-chunk`` run goes in chunks.

The policy commands run in one fresh process (its devices split as the CLI splits them; the later commands
share its compiled programs), so the suite pays for one multi-device compilation of each program. The agent
commands always run on one device (``rbjax.cli``: the host's threads serve XLA's multi-threaded kernels), each
in its own process, as a user runs them.
"""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import rbjax

WORKER = """
import sys, jax
from rbjax.cli import main
for line in sys.argv[1:]:
    print("$ rbjax", line, flush=True)
    main(line.split())
print("all done on", len(jax.devices()), "devices")
"""


def _rbjax(*lines: str, cwd) -> str:
    out = subprocess.run(
        [sys.executable, "-c", WORKER, *lines], cwd=cwd, capture_output=True, text=True, timeout=1200
    )
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-3000:])
    return out.stdout


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the default is one device")
def test_the_documented_commands_run_on_the_default_devices(tmp_path):
    ppo = rbjax.PPO_CHECKPOINT
    out = _rbjax(
        "oracle --stores 5 --days 6 --seed 3 --save-states S --every 3 --records --out O --progress 0",
        "run --policy oracle --from-states S --days 3 --out C --store-chunk 2",
        "run --policy oracle --stores 5 --days 6 --seed 3 --store-chunk 2 --records --out R --progress 3",
        "sweep --multiplier 2,4 --seeds 3 --days 6 --out W",
        f"eval --policy ppo --checkpoint {ppo} --stores 5 --days 6 --greedy",
        cwd=tmp_path,
    )
    assert f"all done on {os.cpu_count()} devices" in out
    # chunked (3 chunks of 2 stores) and in segments with snapshots: the same records, bit for bit
    with np.load(tmp_path / "O" / "records.npz") as a, np.load(tmp_path / "R" / "records.npz") as b:
        assert sorted(a) == sorted(b)
        for name in a:
            assert np.array_equal(a[name], b[name]), name
        final = a["net_worth"][:, -1].astype(np.float64)
    # the oracle continued from day 3 beside the oracle, 2 slices a call: the run's own last day, both ways
    slices = pd.read_csv(tmp_path / "C" / "slices.csv")
    assert len(slices) == 5 and (slices["net_worth_diff"] == 0).all()
    assert np.array_equal(slices["ref_net_worth"].to_numpy(), final[slices["store"]])
    sweep = pd.read_csv(tmp_path / "W" / "sweep.csv")
    assert len(sweep) == 6 and np.isfinite(sweep["final_net_worth"]).all()


def test_the_agent_commands_run_as_a_user_runs_them(tmp_path):
    """Each in its own process, as typed (the snapshot from a run on the default devices)."""
    cli = lambda line: _rbjax(line, cwd=tmp_path)
    cli("oracle --stores 5 --days 4 --seed 3 --save-states S --every 2 --progress 0")
    out = cli("agents run --model policy:oracle --from-states S --at 2 --days 2 --out A --progress 0")
    assert "all done on 1 devices" in out  # agents always run on one device
    slices = pd.read_csv(tmp_path / "A" / "slices.csv")  # the oracle through the tools beside the oracle
    assert len(slices) == 5 and (slices["net_worth_diff"] == 0).all(), slices

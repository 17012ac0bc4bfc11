"""The commands of the README and ``docs/`` as a user runs them: the CLI's default devices (one per core: 2 on
CI), no ``--devices 1``. Five stores do not divide two devices, and ``--store-chunk`` runs go in chunks.

They run in one fresh process (its devices split as the CLI splits them; the later commands share its compiled
programs: every fresh-store command runs chunks of 2 stores, so they share one reset), so the suite pays for one
multi-device compilation of each program: the snapshot path, chunks and per-store params (a sweep) are the three
ways a chunk's inputs reach the devices (``placement.place``), and a bare ``eval`` (no ``--checkpoint``) runs
the shipped PPO policy, greedy as the README's row. ``bench --profile`` runs on the default devices in
``tests/perf/test_perf.py``; the agent commands and ``train`` always run on one device (``rbjax.cli``), the
default of the in-process tests.
"""

import os

import numpy as np
import pandas as pd
import pytest
from helpers import rbjax_commands

pytestmark = pytest.mark.slow  # fresh processes on the default devices


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: the default is one device")
def test_the_documented_commands_run_on_the_default_devices(tmp_path):
    # the suite's compilation cache, named as a user names one: the planner's commands on these devices
    # (tests/policies/test_planner.py) load the 2-store reset compiled here instead of compiling it again
    K = os.environ["JAX_COMPILATION_CACHE_DIR"]
    chunked = (
        f"run --policy oracle --stores 5 --days 6 --seed 3 --store-chunk 2 --records --progress 3 --cache {K}"
    )
    out = rbjax_commands(
        "oracle --stores 5 --days 6 --seed 3 --store-chunk 2 --save-states S --every 3 --records --out O --progress 0"
        f" --cache {K}",
        f"run --policy oracle --from-states S --days 3 --out C --cache {K}",
        chunked + " --out R",
        f"sweep --multiplier 2,4 --seeds 3 --days 6 --out W --cache {K}",
        f"eval --stores 5 --days 6 --store-chunk 2 --cache {K}",  # a bare eval: the shipped PPO, greedy
        cwd=tmp_path,
    )
    # a new process loads the chunked run's programs from the cache instead of tracing and compiling them
    again = rbjax_commands(chunked + " --out R2", cwd=tmp_path, stderr=True)
    assert "rollout: stores 0-1 opened (compiled programs loaded from the cache) in " in again
    with np.load(tmp_path / "R" / "records.npz") as a, np.load(tmp_path / "R2" / "records.npz") as b:
        assert all(np.array_equal(a[name], b[name]) for name in a)
    assert f"all done on {os.cpu_count()} devices" in out
    # in segments with snapshots and straight through (both in 3 chunks of 2 stores, so that they share their
    # programs: tests/runners/test_rollout.py has chunks against one batch): the same records, bit for bit
    with np.load(tmp_path / "O" / "records.npz") as a, np.load(tmp_path / "R" / "records.npz") as b:
        assert sorted(a) == sorted(b)
        for name in a:
            assert np.array_equal(a[name], b[name]), name
        final = a["net_worth"][:, -1].astype(np.float64)
    # the oracle continued from day 3 beside the oracle (the snapshot's state placed on both devices): the run's
    # own last day, both ways
    slices = pd.read_csv(tmp_path / "C" / "slices.csv")
    assert len(slices) == 5 and (slices["net_worth_diff"] == 0).all()
    assert np.array_equal(slices["ref_net_worth"].to_numpy(), final[slices["store"]])
    assert "ppo policy, 5 stores x 6 days" in out
    sweep = pd.read_csv(tmp_path / "W" / "sweep.csv")
    assert len(sweep) == 6 and np.isfinite(sweep["final_net_worth"]).all()

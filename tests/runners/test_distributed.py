"""Several devices and several hosts: two processes joined by ``jax.distributed`` on the loopback address.

Each process splits its CPU into two devices; a snapshot of three stores' opening morning continues over all
four (``continuation.resume``: the stores placed from host arrays, padded to four) and every process receives
all of them. Both must equal the golden fixture's single-device records and final states. (This also covers
several devices in one process, as ``rbjax`` uses them on a multi-core CPU.) The opening comes from this
process, from the golden batch's compiled reset: each worker compiles the day, not a reset of its own as well.
"""

import socket
import subprocess
import sys
from pathlib import Path

import golden
import jax
import numpy as np
import pytest

from rbjax.files import snapshots
from rbjax.runners.rollout_programs import open_stores

pytestmark = pytest.mark.slow  # two processes

WORKER = """
import sys
sys.path.insert(0, TESTS)
import rbjax, jax, numpy as np
rbjax.devices.split_cpu(2)
jax.distributed.initialize(ADDRESS, num_processes=2, process_id=PROCESS, initialization_timeout=120)
assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
import golden
from rbjax.files import snapshots
from rbjax.policies import random_policy, RandomParams
from rbjax.runners.continuation import resume
env = rbjax.Env()
snap = snapshots.load(OPENING, env)  # three stores (odd: padded to 4 over 4 devices) on day 0
rec, state = resume(env, random_policy, RandomParams.default(), snap, days=golden.DAYS, records="full")
expected = np.load(golden.FIXTURE)
for name, value in golden.record_arrays(rec).items():
    assert np.array_equal(value, expected[f"random/records/{name}"][:3]), name
for name, value in golden.state_arrays(state).items():
    assert np.array_equal(value, expected[f"random/state/{name}"][:3]), name
print("identical on process", PROCESS)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def opening(env, params, path) -> None:
    """The golden batch's first three stores on their opening morning, as a snapshot of day 0 (the reset of the
    four, as ``rollout`` opens them: ``split(key)[0]`` a store)."""
    keys = jax.random.split(jax.random.key(golden.SEED), golden.STORES)
    k_reset = jax.vmap(lambda k: jax.random.split(k)[0])(keys)
    _, state = open_stores(env, k_reset, params, (jax.devices()[0],))
    snapshots.save(path, env, jax.tree.map(lambda x: np.asarray(x)[:3], state), keys[:3], day=0)


def test_two_processes_on_the_loopback_address_equal_one_process(env, params, tmp_path):
    address = f"127.0.0.1:{_free_port()}"
    opening(env, params, tmp_path / "opening.npz")
    script = WORKER.replace("TESTS", repr(str(Path(__file__).parents[1]))).replace("ADDRESS", repr(address))
    script = script.replace("OPENING", repr(str(tmp_path / "opening.npz")))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script.replace("PROCESS", str(p))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in (0, 1)
    ]
    try:
        outs = [w.communicate(timeout=400) for w in workers]
    finally:
        for w in workers:
            w.kill()
    for p, (w, (out, err)) in enumerate(zip(workers, outs)):
        assert w.returncode == 0 and f"identical on process {p}" in out, err[-3000:]

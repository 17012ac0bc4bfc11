"""Several devices and several hosts: two processes joined by ``jax.distributed`` on the loopback address.

Each process splits its CPU into two devices; the rollout shards the stores over all four and every process
receives all of them. Both must equal the golden fixture's single-device records and final states. (This also
covers several devices in one process, as ``rbjax`` uses them on a multi-core CPU.)
"""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # two processes

WORKER = """
import sys
sys.path.insert(0, TESTS)
import rbjax, jax, numpy as np
rbjax.devices.split_cpu(2)
jax.distributed.initialize(ADDRESS, num_processes=2, process_id=PROCESS, initialization_timeout=120)
assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
import golden
from rbjax.policies import random_policy, RandomParams
env = rbjax.Env()
keys = jax.random.split(jax.random.key(golden.SEED), golden.STORES)[:3]  # odd: padded to 4 over 4 devices
rec, state = rbjax.rollout(env, random_policy, RandomParams.default(), env.default_params(), keys,
                           days=golden.DAYS, records="full")
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


def test_two_processes_on_the_loopback_address_equal_one_process():
    address = f"127.0.0.1:{_free_port()}"
    script = WORKER.replace("TESTS", repr(str(Path(__file__).parents[1]))).replace("ADDRESS", repr(address))
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

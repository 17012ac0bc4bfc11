"""The chunk sizer against measured peaks: ``memory.chunk_peak_bytes`` beside the peak resident memory of
runs of 256, 1,024 and 4,096 oracle stores x 180 days in one call each, and of a large batch in automatic
chunks.

    python benchmarks/memory.py [--sizes 256,1024,4096] [--large 20000]

Each run is a fresh process on one device (the estimate covers the process: runtime, compilation, stores).
Writes benchmarks/out/memory.md; the estimate should lie within 2x of the measured peak, and the large run
within 4 GB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).parent / "out"

CHILD = """
import json, resource, sys, time
import jax
import rbjax
from rbjax.policies import OracleParams, oracle
from rbjax.results import metrics
from rbjax.runners import memory as M
from rbjax.runners import rollout as R
stores, chunk = int(sys.argv[1]), int(sys.argv[2]) or None
env = rbjax.Env()
start = time.perf_counter()
for c in R.rollout_chunks(env, oracle, OracleParams.default(), env.default_params(),
                          jax.random.split(jax.random.key(0), stores), 180, store_chunk=chunk, to_host=True):
    metrics.store_metrics(c.records)
size = chunk or min(M.auto_store_chunk(env, "summary", 180, tuple(jax.devices())), stores)
print(json.dumps(dict(
    peak=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    estimate=M.chunk_peak_bytes(env, "summary", 180, size), chunk=size, seconds=time.perf_counter() - start)))
"""


def measure(stores: int, chunk: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(stores), str(chunk)], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,1024,4096")
    ap.add_argument("--large", type=int, default=20000, help="stores of the automatic-chunk run (0: skip)")
    a = ap.parse_args()
    rows = [(n, measure(n, n)) for n in map(int, a.sizes.split(","))]
    if a.large:
        rows.append((a.large, measure(a.large, 0)))
    lines = [
        "# Chunk sizer: estimated against measured peak memory (oracle, 180 days, summary records, one device)",
        "",
        "| stores | stores per call | estimate (GB) | measured peak (GB) | estimate / peak | wall (s) |",
        "|---|---|---|---|---|---|",
    ]
    for n, r in rows:
        lines.append(
            f"| {n:,} | {r['chunk']:,} | {r['estimate'] / 1e9:.2f} | {r['peak'] / 1e9:.2f} | "
            f"{r['estimate'] / r['peak']:.2f} | {r['seconds']:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    OUT.mkdir(exist_ok=True)
    (OUT / "memory.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

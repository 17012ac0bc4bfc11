"""Simulator throughput, the full profile: ``rbjax bench`` with its defaults, tables in benchmarks/out.

    python benchmarks/throughput.py [--batches 1,16,256,1024,4096,16384,65536] [--days 10]

Store-days/s against batch size and device count (oracle and null policy), compile time, module costs,
the floor kernel ratio, peak memory and the float32 drift; see ``rbjax.bench``. The host is split into
one device per core; ``rbjax --devices N bench`` chooses another count.
"""

import sys
from pathlib import Path

from rbjax.cli import main

if __name__ == "__main__":
    main(["bench", "--out", str(Path(__file__).parent / "out"), *sys.argv[1:]])

"""The server of rbjax's OpenEnv package (``openenv.yaml``): the OpenEnv face over the tasks of ``$RBJAX_TASKS``.

    RBJAX_TASKS=tasks.jsonl python -m uvicorn server.app:app --host 0.0.0.0 --port 8000
    RBJAX_TASKS=tasks.jsonl python server/app.py [--port 8000]

The app of ``rbjax lm serve --face openenv --tasks FILE`` (``rbjax.lm.faces.openenv_env.make_app``), for
OpenEnv's tools, which start a package's server by module; ``server/Dockerfile`` bakes a tasks file into the
image. ``$RBJAX_SLOTS``: the stores served at once (default 64). A client: ``examples/lm_openenv_client.py``, or
OpenEnv's own ``GenericEnvClient`` and ``MCPToolClient``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import rbjax

TASKS = os.environ.get("RBJAX_TASKS", "tasks.jsonl")
if not Path(TASKS).is_file():
    raise SystemExit(
        f"RBJAX_TASKS={TASKS}: no such tasks file (make one with `rbjax lm tasks --from-states DIR --out FILE`)"
    )
rbjax.setup(devices=1)  # as `rbjax lm serve`: one device, XLA's multi-threaded kernels, the compilation cache

from rbjax.lm.faces.openenv_env import make_app  # noqa: E402  (after setup: JAX's backend starts here)

# background: /health answers at once (OpenEnv probes a server within 30 s); the first reset waits for the pool
app = make_app(TASKS, slots=int(os.environ.get("RBJAX_SLOTS", "64")), background=True)


def main(host: str = "0.0.0.0", port: int = 8000) -> None:
    """Serve ``app`` with uvicorn (``python server/app.py``; the app is built when the module is imported)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=8000)
    a = ap.parse_args()
    main(a.host, a.port)

"""Golden records: 4 stores x 30 days under three policies, every record and the final state, bit for bit.

Regenerate (only for a deliberate change of records, in its own commit that says why):

    python tests/golden.py

The fixture names state arrays by ``STATE_NAMES`` (a stable name per state leaf), so a change of the
state's layout that keeps every value passes without regenerating.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np

FIXTURE = Path(__file__).parent / "assets" / "golden_records.npz"
STORES, DAYS, SEED = 4, 30, 2024
POLICIES = ("oracle", "random", "s_S")


def _policies():
    from rbjax import policies

    return {
        "oracle": (policies.oracle, policies.OracleParams.default()),
        "random": (policies.random_policy, policies.RandomParams.default()),
        "s_S": (policies.s_S, policies.SSParams.default()),
    }


# state leaf path -> the name the fixture stores it under (the fixture predates the nested state)
STATE_NAMES = {
    **{f"lots.{k}": f"lot_{k}" for k in ("store", "wait", "arrival", "cost", "quality", "supplier")},
    **{f"pending.{k}": f"pend_{k}" for k in ("qty", "cost", "quality", "supplier")},
    **{
        f"reviews.{k}": f"rev_{k}"
        for k in ("count", "sum", "window_count", "window_sum", "old_count", "old_sum")
    },
    "reviews.rating0": "rating0",
    "sales.price": "hist_price",
    "sales.units": "hist_units",
    **{f"suppliers.{k}": k for k in ("quality_tier", "price_tier", "quote_price", "quote_quality")},
    "suppliers.log": "supplier_log",
    **{f"news.{k}": f"news_{k}" for k in ("mode", "target", "need", "signed", "remain")},
}


def state_arrays(state) -> dict[str, np.ndarray]:
    """{stable name: array} for every leaf of a batch of states."""
    flat, _ = jax.tree_util.tree_flatten_with_path(state)
    out = {}
    for path, leaf in flat:
        name = jax.tree_util.keystr(path, simple=True, separator=".")
        name = STATE_NAMES.get(name, name)
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        out[name] = np.asarray(leaf)
    return out


def record_arrays(records) -> dict[str, np.ndarray]:
    """{field: array} of a rollout's full records."""
    return {k: np.asarray(v) for k, v in vars(records).items()}


def expected_records(policy: str) -> dict[str, np.ndarray]:
    """{field: array [STORES, DAYS, ...]} of one policy's records in the fixture."""
    prefix = f"{policy}/records/"
    with np.load(FIXTURE) as data:
        return {k.removeprefix(prefix): data[k] for k in data.files if k.startswith(prefix)}


def compute() -> dict[str, np.ndarray]:
    """The golden arrays, keyed "<policy>/records/<field>" and "<policy>/state/<name>"."""
    import rbjax
    from rbjax.programs import env_and_params

    env = env_and_params()[0]  # the tests' env (conftest), so that they share the golden programs
    params = env.default_params()
    keys = jax.random.split(jax.random.key(SEED), STORES)
    out = {}
    for name, (policy, policy_params) in _policies().items():
        records, state = rbjax.rollout(
            env, policy, policy_params, params, keys, days=DAYS, records="full", devices=jax.devices()[:1]
        )
        out |= {f"{name}/records/{k}": v for k, v in record_arrays(records).items()}
        out |= {f"{name}/state/{k}": v for k, v in state_arrays(state).items()}
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    arrays = compute()
    FIXTURE.parent.mkdir(exist_ok=True)
    np.savez_compressed(FIXTURE, **arrays)
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size:,} bytes, {len(arrays)} arrays)")

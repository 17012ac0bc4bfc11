"""Steps per second of the RL faces beside the engine's, measured in one run at the same batch.

    python benchmarks/rl_faces.py [--stores 256] [--days 30] [--repeats 3]

Rows, all driven by random levers (``rbjax.rl.levers``) for ``--stores`` stores x ``--days`` days:
- engine: ``Env.step`` with the decoded action, vmapped, in one ``lax.scan`` (no flat observation, no
  auto-reset): what the faces add to;
- GymnaxEnv: gymnax's ``step`` (flat observation, auto-reset from the pool), vmapped, in one ``lax.scan``, as
  PureJaxRL and rejax run it;
- VectorEnv: ``VectorEnv.step`` called from Python once per day with numpy actions (Gymnasium's loop,
  what CleanRL-style code does), the conversion to and from numpy included.
Every loop starts from the same B opening stores (drawn once, outside the timing); compilation is excluded
(one warm-up call each). Writes benchmarks/out/rl_faces.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rbjax import Env
from rbjax.rl import levers
from rbjax.wrappers import GymnaxEnv, VectorEnv

OUT = Path(__file__).parent / "out"


def engine_run(env: Env, params, stores: int, days: int):
    """A jitted function(key, state [B]) -> total reward: ``Env.step`` on decoded random levers."""
    J = env.config.num_products

    def run(key, state):
        def day(state, k):
            k_act, k_step = jax.random.split(k)
            x = jax.random.uniform(k_act, (stores, 4 * J), minval=-1.0, maxval=1.0)
            obs = jax.vmap(env.observe, (0, None))(state, params)
            action, _ = jax.vmap(levers.decode)(x, obs)
            out = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(k_step, stores), state, action, params)
            return out[1], out[2].sum()

        return jax.lax.scan(day, state, jax.random.split(key, days))[1].sum()

    return jax.jit(run)


def gymnax_run(face: GymnaxEnv, stores: int, days: int):
    """A jitted function(key, state [B]) -> total reward: gymnax's ``step`` (auto-reset) on random levers."""
    params = face.default_params

    def run(key, state):
        def day(state, k):
            k_act, k_step = jax.random.split(k)
            x = jax.random.uniform(k_act, (stores, face.num_actions), minval=-1.0, maxval=1.0)
            out = jax.vmap(face.step, (0, 0, 0, None))(jax.random.split(k_step, stores), state, x, params)
            return out[1], out[2].sum()

        return jax.lax.scan(day, state, jax.random.split(key, days))[1].sum()

    return jax.jit(run)


def timed(fn, repeats: int) -> float:
    """Best wall seconds of ``repeats`` calls after one warm-up call."""
    jax.block_until_ready(fn(0))
    best = float("inf")
    for i in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(i + 1))
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=256)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    B, T = args.stores, args.days

    env = Env()
    params = env.default_params()
    face = GymnaxEnv(env)
    envs = VectorEnv(B, env)
    engine = engine_run(env, params, B, T)
    gymnax = gymnax_run(face, B, T)
    keys = jax.random.split(jax.random.key(0), B)
    _, opened = jax.jit(jax.vmap(env.reset, (0, None)))(keys, params)  # the same openings for every loop
    _, wrapped = jax.jit(jax.vmap(face.reset, (0, None)))(keys, face.default_params)
    wrapped = wrapped.replace(env=opened, obs=jax.vmap(env.observe, (0, None))(opened, params))
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (T, B, envs.single_action_space.shape[0])).astype(np.float32)

    def vector(seed):
        # the same openings as the other loops (a copy: VectorEnv donates its state to each step)
        envs._state = jax.tree.map(jnp.copy, wrapped)
        for t in range(T):
            out = envs.step(actions[t])
        return jnp.asarray(out[1])

    seconds = {
        "engine (Env.step in lax.scan)": timed(lambda s: engine(jax.random.key(s), opened), args.repeats),
        "GymnaxEnv (gymnax step in lax.scan)": timed(
            lambda s: gymnax(jax.random.key(s), wrapped), args.repeats
        ),
        "VectorEnv (Gymnasium step from Python)": timed(vector, args.repeats),
    }
    base = B * T / seconds["engine (Env.step in lax.scan)"]
    lines = [
        f"{B} stores x {T} days, random levers, best of {args.repeats} (compilation excluded).",
        "",
        "| loop | store-days/s | / engine |",
        "|---|---|---|",
    ]
    for name, s in seconds.items():
        rate = B * T / s
        lines.append(f"| {name} | {rate:,.0f} | {rate / base:.2f} |")
    text = "\n".join(lines)
    print(text)
    OUT.mkdir(exist_ok=True)
    (OUT / "rl_faces.md").write_text(text + "\n")


if __name__ == "__main__":
    main()

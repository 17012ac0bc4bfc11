"""Training runs on disk: train PPO, write the learning curve and a checkpoint, load it back.

A run directory holds ``config.json`` (PPOConfig and the env config), ``policy.msgpack`` (network weights
and observation statistics), ``curve.csv`` (one row per update) and ``curve.png``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from flax import serialization

from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.rl import ppo
from rbjax.rl.features import feature_sizes
from rbjax.rl.normalize import RunningStats

FILES = ("config.json", "policy.msgpack")


@dataclasses.dataclass
class TrainResult:
    policy_params: ppo.PPOPolicyParams
    curve: pd.DataFrame  # one row per update
    config: ppo.PPOConfig
    compile_s: float
    train_s: float

    @property
    def store_days_per_s(self) -> float:
        return self.config.num_updates * self.config.num_envs * self.config.num_steps / self.train_s


def train_ppo(
    env: Env,
    env_params: EnvParams,
    config: ppo.PPOConfig,
    seed: int = 0,
    out: str | Path | None = None,
    every: int = 10,
    verbose: bool = True,
    init: ppo.PPOPolicyParams | None = None,
) -> TrainResult:
    """Compile and run ``ppo.make_train`` (one jit), print progress every ``every`` updates (0: no progress
    callback, which lets JAX's persistent cache keep the compiled program), save to ``out``.
    ``init``: policy params to continue training from (``load`` a checkpoint; same ``hidden`` size)."""
    printer = (lambda line: print(line, file=sys.stderr, flush=True)) if verbose else (lambda line: None)
    log = ppo.ProgressLog(config, every=max(every, 1), printer=printer)
    train = jax.jit(ppo.make_train(env, config, progress=log if every > 0 else None))
    key = jax.random.key(seed)
    start = time.perf_counter()
    fresh = ppo.initial_policy(env, config, key)  # always passed: one compiled program with or without init
    if init is None:
        init = fresh
    elif jax.tree.map(jnp.shape, init.net) != jax.tree.map(jnp.shape, fresh.net):
        raise ValueError(f"init: the checkpoint's network does not match hidden={config.hidden}")
    init = init.replace(greedy=jnp.asarray(False))
    compiled = train.lower(key, env_params, init).compile()
    compile_s = time.perf_counter() - start
    printer(
        f"ppo: compiled in {compile_s:.0f} s; {config.num_updates} updates of "
        f"{config.num_envs} stores x {config.num_steps} days"
    )
    log.start = start = time.perf_counter()
    runner, metrics = compiled(key, env_params, init)
    jax.block_until_ready(metrics)
    train_s = time.perf_counter() - start
    curve = pd.DataFrame({k: np.asarray(v) for k, v in metrics.items()})
    curve.insert(0, "update", np.arange(1, len(curve) + 1))
    curve.insert(1, "store_days", curve["update"] * config.num_envs * config.num_steps)
    if log.times:
        curve.insert(
            2, "wall_s", np.asarray(log.times[: len(curve)] + [np.nan] * (len(curve) - len(log.times)))
        )
    result = TrainResult(ppo.policy_params(runner), curve, config, compile_s, train_s)
    if out is not None:
        save(out, result.policy_params, config, env)
        curve.to_csv(Path(out) / "curve.csv", index=False)
        from rbjax.runners.plots import plot_learning_curve

        plot_learning_curve(curve).savefig(Path(out) / "curve.png", dpi=110, bbox_inches="tight")
    return result


def save(out: str | Path, policy_params: ppo.PPOPolicyParams, config: ppo.PPOConfig, env: Env) -> None:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(
        ppo=dataclasses.asdict(config),
        num_products=env.config.num_products,
        num_suppliers=env.config.num_suppliers,
        grouping=env.config.grouping,
    )
    (out / "config.json").write_text(json.dumps(meta, indent=2))
    (out / "policy.msgpack").write_bytes(serialization.to_bytes(policy_params))


def load(path: str | Path, env: Env) -> tuple[ppo.PPOPolicyParams, ppo.PPOConfig]:
    """Read a run directory written by ``save``; checks it matches ``env``'s shapes."""
    path = Path(path)
    missing = [f for f in FILES if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{path} is not a PPO checkpoint: missing {', '.join(missing)}")
    meta = json.loads((path / "config.json").read_text())
    for name in ("num_products", "num_suppliers"):
        if meta[name] != getattr(env.config, name):
            raise ValueError(
                f"checkpoint {path} was trained with {name}={meta[name]}, "
                f"the env has {getattr(env.config, name)}"
            )
    config = ppo.PPOConfig(**meta["ppo"])
    F, G = feature_sizes(env.config.num_suppliers)
    template = ppo.PPOPolicyParams(
        net=ppo.init_params(env, config, jax.random.key(0)),
        products=RunningStats.zeros(F),
        globals_=RunningStats.zeros(G),
        greedy=jnp.asarray(False),
    )
    return serialization.from_bytes(template, (path / "policy.msgpack").read_bytes()), config

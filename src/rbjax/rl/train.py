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
from rbjax.rl.ppo_policy import PPOPolicyParams, make_policy

FILES = ("config.json", "policy.msgpack")


@dataclasses.dataclass
class TrainResult:
    """What ``train_ppo`` returns: the trained policy, its learning curve and the timings."""

    policy_params: PPOPolicyParams
    curve: pd.DataFrame  # one row per update
    config: ppo.PPOConfig
    compile_s: float
    train_s: float

    @property
    def store_days_per_s(self) -> float:
        """Store-days simulated and learned from per second of training (compilation excluded)."""
        return self.config.num_updates * self.config.num_envs * self.config.num_steps / self.train_s


def train_ppo(
    env: Env,
    env_params: EnvParams,
    config: ppo.PPOConfig,
    seed: int = 0,
    out: str | Path | None = None,
    every: int = 10,
    verbose: bool = True,
    init: PPOPolicyParams | None = None,
) -> TrainResult:
    """Compile and run ``ppo.make_train`` (one jit), print progress every ``every`` updates (0: no progress
    callback, which lets JAX's persistent cache keep the compiled program), save to ``out``.
    ``init``: policy params to continue training from (``load`` a checkpoint; same ``hidden`` size)."""
    printer = (lambda line: print(line, file=sys.stderr, flush=True)) if verbose else (lambda line: None)
    log = ProgressLog(config, every=max(every, 1), printer=printer)
    train = jax.jit(ppo.make_train(env, config, progress=log if every > 0 else None))
    key = jax.random.key(seed)
    start = time.perf_counter()
    fresh = ppo.initial_policy(env, config, key)  # always passed: one compiled program with or without init
    if init is None:
        init = fresh
    elif jax.tree.map(jnp.shape, init.net) != jax.tree.map(jnp.shape, fresh.net):
        raise ValueError(f"init: the checkpoint's network does not match hidden={config.hidden}")
    init = init.replace(greedy=jnp.asarray(False))
    printer(
        f"ppo: compiling the training program ({config.num_updates} updates of {config.num_envs} stores x "
        f"{config.num_steps} days; this can take minutes on a CPU) ..."
    )
    compiled = train.lower(key, env_params, init).compile()
    compile_s = time.perf_counter() - start
    printer(f"ppo: compiled in {compile_s:.0f} s; training")
    log.start = start = time.perf_counter()
    runner, metrics = compiled(key, env_params, init)
    jax.block_until_ready(metrics)
    train_s = time.perf_counter() - start
    curve = learning_curve(metrics, config, int(env_params.horizon), log.times)
    result = TrainResult(ppo.policy_params(runner), curve, config, compile_s, train_s)
    _check_finite(result)
    if out is not None:
        save(out, result.policy_params, config, env)
        curve.to_csv(Path(out) / "curve.csv", index=False)
        from rbjax.results.plots import plot_learning_curve

        plot_learning_curve(curve).savefig(Path(out) / "curve.png", dpi=110, bbox_inches="tight")
    return result


def learning_curve(
    metrics: dict, config: ppo.PPOConfig, horizon: int, times: list[float] | None = None
) -> pd.DataFrame:
    """One row per update from ``ppo.make_train``'s metrics (dict of [num_updates] arrays): update,
    store_days, wall_s (with ``times``, the progress callback's seconds per update) and the metrics.

    ``episode_net_worth`` and ``survival`` are over the episodes that ended in the update: NaN when none did.
    ``survival`` (the share of them that reached the ``horizon``) is also NaN in the updates before an episode
    could have reached it (update x num_steps < horizon): until then only failing episodes end.
    """
    curve = pd.DataFrame({k: np.asarray(v) for k, v in metrics.items()})
    curve.insert(0, "update", np.arange(1, len(curve) + 1))
    curve.insert(1, "store_days", curve["update"] * config.num_envs * config.num_steps)
    if times:
        curve.insert(2, "wall_s", np.asarray(times[: len(curve)] + [np.nan] * (len(curve) - len(times))))
    none_ended = curve["episodes"] == 0
    curve["episode_net_worth"] = curve["episode_net_worth"].where(~none_ended)
    curve["survival"] = curve["survival"].where(~none_ended & (curve["update"] * config.num_steps >= horizon))
    return curve


def _check_finite(result: TrainResult) -> None:
    """Stop with a clear error (and save nothing) when a loss or a parameter went non-finite."""
    losses = [c for c in result.curve.columns if "loss" in c]
    bad = ~np.isfinite(result.curve[losses].to_numpy(np.float64)).all(1)
    if bad.any():
        first = int(result.curve.update.to_numpy()[np.argmax(bad)])
        raise FloatingPointError(
            f"PPO diverged: non-finite loss from update {first} of {len(bad)} (lr={result.config.lr}); "
            "nothing was saved"
        )
    if not all(
        np.isfinite(np.asarray(x)).all()
        for x in jax.tree.leaves(result.policy_params)
        if np.asarray(x).dtype.kind == "f"
    ):
        raise FloatingPointError("PPO diverged: non-finite network parameters; nothing was saved")


def save(out: str | Path, policy_params: PPOPolicyParams, config: ppo.PPOConfig, env: Env) -> None:
    """Write ``config.json`` (the PPOConfig and the env's shapes) and ``policy.msgpack`` into ``out``."""
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


def load(path: str | Path, env: Env) -> tuple[PPOPolicyParams, ppo.PPOConfig]:
    """Read a run directory written by ``save``; checks it matches ``env``'s shapes and holds finite numbers.

    Raises FileNotFoundError for a missing file and ValueError naming the file for anything else wrong.
    """
    path = Path(path)
    missing = [f for f in FILES if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{path} is not a PPO checkpoint: missing {', '.join(missing)}")
    config_file, weights_file = path / "config.json", path / "policy.msgpack"
    try:
        meta = json.loads(config_file.read_text())
        # checkpoints written before the supplier prior existed were trained without one
        config = ppo.PPOConfig(**{"supplier_prior": 0.0, **meta["ppo"]})
        trained = {name: meta[name] for name in ("num_products", "num_suppliers")}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{config_file}: not a PPO run config ({type(e).__name__}: {e})") from None
    for name, value in trained.items():
        if value != getattr(env.config, name):
            raise ValueError(
                f"checkpoint {path} was trained with {name}={value}, the env has {getattr(env.config, name)}"
            )
    F, G = feature_sizes(env.config.num_suppliers)
    template = PPOPolicyParams(
        net=ppo.init_params(env, config, jax.random.key(0)),
        products=RunningStats.zeros(F),
        globals_=RunningStats.zeros(G),
        greedy=jnp.asarray(False),
    )
    try:
        state = serialization.msgpack_restore(weights_file.read_bytes())
    except Exception as e:  # msgpack raises several unrelated types for corrupt bytes
        raise ValueError(f"{weights_file}: not a readable msgpack file ({type(e).__name__})") from None
    try:
        params = serialization.from_state_dict(template, state)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{weights_file}: its keys do not match the network of {config_file} ({e})"
        ) from None
    for (where, want), got in zip(jax.tree_util.tree_flatten_with_path(template)[0], jax.tree.leaves(params)):
        name = jax.tree_util.keystr(where, simple=True, separator=".")
        if np.shape(got) != np.shape(want):
            raise ValueError(
                f"{weights_file}: {name} has shape {np.shape(got)}, the network needs {np.shape(want)}"
            )
        if np.asarray(got).dtype.kind == "f" and not np.isfinite(np.asarray(got)).all():
            raise ValueError(f"{weights_file}: {name} holds non-finite values (a diverged training run?)")
    return params, config


def load_policy(env: Env, checkpoint: str | Path, greedy: bool = False):
    """The trained policy in a checkpoint folder (``save``) as the registry gives it (``rbjax.policies.make("ppo",
    env, checkpoint)``): (the rollout policy ``make_policy(...)``, its ``PPOPolicyParams``); ``greedy``: its
    most likely action instead of a sample. A missing file or a checkpoint that does not fit ``env``: ValueError.
    """
    try:
        params, config = load(checkpoint, env)
    except FileNotFoundError as e:
        raise ValueError(str(e)) from None
    return make_policy(env.config.num_suppliers, config.hidden, config.supplier_prior), params.replace(
        greedy=np.bool_(greedy)
    )


class ProgressLog:
    """Host-side progress callback: prints a line every ``every`` updates and keeps wall times."""

    def __init__(self, config: ppo.PPOConfig, every: int = 1, printer=print):
        """``printer``: where the lines go; the clock starts now (``train_ppo`` restarts it after compiling)."""
        self.config, self.every, self.printer = config, max(1, every), printer
        self.start, self.times = time.perf_counter(), []

    def __call__(self, i, metrics):
        """Update ``i`` ([] int) ended with ``metrics`` (dict of [] arrays): keep its time, maybe print."""
        i = int(i)
        self.times.append(time.perf_counter() - self.start)
        if (i + 1) % self.every == 0 or i + 1 == self.config.num_updates:
            steps = (i + 1) * self.config.num_envs * self.config.num_steps
            episodes = (
                f"episode net worth {float(metrics['episode_net_worth']):,.0f}  survival "
                f"{float(metrics['survival']):.2f}"
                if metrics["episodes"]
                else "no episode ended yet"
            )
            self.printer(
                f"update {i + 1}/{self.config.num_updates}  {steps:,} store-days  "
                f"{steps / self.times[-1]:,.0f}/s  {episodes}  entropy {float(metrics['entropy']):.2f}"
                + (
                    f"  skipped non-finite steps {int(metrics['skipped_steps'])}"
                    if metrics["skipped_steps"]
                    else ""
                )
                + (f"  non-finite inputs {int(metrics['nonfinite'])}" if metrics["nonfinite"] else "")
            )

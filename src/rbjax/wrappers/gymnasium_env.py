"""Gymnasium faces: ``VectorEnv`` (N stores in one jitted batched step, numpy in and out) and ``StoreEnv``
(one store as a ``gymnasium.Env``, for code and checkers that take single environments).

>>> envs = VectorEnv(num_envs=64)                       # draws a pool of 256 openings once
>>> obs, info = envs.reset(seed=0)                      # obs [64, 4524] float32
>>> obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())

Auto-reset follows Gymnasium 1.x: ``autoreset_mode="next_step"`` (Gymnasium's default: the step after a
store's episode ended resets it, ignores its action and returns reward 0) or ``"same_step"`` (the store is
reset on the step that ended it; its last observation is ``info["final_obs"]``, masked by
``info["_final_obs"]``). Episode statistics sit in ``info[stats_key]`` (default ``"episode"``: ``r`` the
scaled return, ``l`` the length, ``net_worth`` the final net worth, ``survived``), masked by
``info["_" + stats_key]``; pick another key if you also wrap with ``RecordEpisodeStatistics``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

try:
    import gymnasium
    from gymnasium.vector import AutoresetMode
    from gymnasium.vector.utils import batch_space
except ImportError as error:  # pragma: no cover - exercised without the extra installed
    raise ImportError("rbjax.wrappers.VectorEnv needs gymnasium: pip install 'rbjax[rl]'") from error

from rbjax.checks import need_count
from rbjax.env import Env
from rbjax.params import EnvParams
from rbjax.wrappers.store import DEFAULT_POOL, REWARD_SCALE, Store

_MODES = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}


def _spaces(store: Store) -> tuple[gymnasium.spaces.Box, gymnasium.spaces.Box]:
    bound = store.obs_bound
    obs = gymnasium.spaces.Box(-bound, bound, (store.obs_size,), np.float32)
    return obs, gymnasium.spaces.Box(-1.0, 1.0, (store.num_levers,), np.float32)


def _check_seed(seed: Any) -> None:
    if seed is not None and not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise ValueError(f"seed must be an int >= 0 or None, got {seed!r}")


def _key_from(np_random: np.random.Generator) -> jax.Array:
    return jax.random.key(int(np_random.integers(2**31)))


def _actions(actions: Any, shape: tuple[int, ...]) -> np.ndarray:
    try:
        array = np.asarray(actions, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(f"actions must be numbers of shape {shape}: {error}") from None
    if array.shape != shape:
        raise ValueError(f"actions must have shape {shape} (stores x levers), got {array.shape}")
    return array


class VectorEnv(gymnasium.vector.VectorEnv):
    """N RetailBench stores as a Gymnasium vector env (see the module docstring).

    Observations [N, D] float32 (D = ``store.obs_size``), actions [N, A] float32 levers in [-1, 1] (A =
    ``store.num_levers``, 4 per product); ``seed`` draws the reset pool (``pool_size`` openings)."""

    def __init__(
        self,
        num_envs: int,
        env: Env | None = None,
        *,
        pool_size: int = DEFAULT_POOL,
        reward_scale: float = REWARD_SCALE,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        stats_key: str = "episode",
        seed: int = 0,
        env_params: EnvParams | None = None,
    ):
        num_envs = need_count("num_envs", num_envs, whole=True)
        mode = _MODES.get(autoreset_mode, autoreset_mode)
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(f"autoreset_mode must be 'next_step' or 'same_step', got {autoreset_mode!r}")
        self.num_envs = int(num_envs)
        self.store = Store(env)
        self.params = self.store.make_params(jax.random.key(seed), pool_size, reward_scale, env_params)
        self.single_observation_space, self.single_action_space = _spaces(self.store)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {"autoreset_mode": mode}
        self.autoreset_mode = mode
        self.stats_key = stats_key
        self._reset_fn = jax.jit(self._reset_batch)
        self._step_fn = jax.jit(self._step_batch, donate_argnums=(1,))
        self._state = None
        self._key = None
        self._autoreset = np.zeros(self.num_envs, bool)

    # ------------------------------------------------------------------ jitted batches
    def _reset_batch(self, key, params, mask, obs, state):
        keys = jax.random.split(key, self.num_envs)
        if state is None:
            return jax.vmap(self.store.reset, (0, None))(keys, params)
        return jax.vmap(self.store.reset_where, (0, 0, 0, 0, None))(keys, mask, obs, state, params)

    def _step_batch(self, key, state, actions, reset_first, same_step, params):
        """Both auto-reset modes in one program (``same_step`` [] bool): "next_step" restarts the stores that
        ended on the previous call (``reset_first`` [N] bool), their step dropped; "same_step" restarts those
        that end on this call at once (its ``reset_first`` is never set)."""
        keys = jax.random.split(key, (self.num_envs, 2))

        def one(k, s, a, r):
            obs, s2, reward, terminated, truncated, info = self.store.step(k[0], s, a, params)
            final_obs = obs
            obs, s2 = self.store.reset_where(
                k[1], r | (same_step & (terminated | truncated)), obs, s2, params
            )
            reward, terminated, truncated = jnp.where(r, 0.0, reward), terminated & ~r, truncated & ~r
            info["returned_episode"] &= ~r
            info["net_worth"] = jnp.where(r, s2.env.net_worth.astype(jnp.float32), info["net_worth"])
            info["invalid_levers"] = jnp.where(r, 0, info["invalid_levers"])
            return obs, s2, reward, terminated, truncated, info, final_obs

        return jax.vmap(one)(keys, state, actions, reset_first)

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset every store (or those in ``options["reset_mask"]`` [N] bool). Returns (obs [N, D] float32,
        {})."""
        _check_seed(seed)
        super().reset(seed=None if seed is None else int(seed))
        mask = None if options is None else options.get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != bool:
                raise ValueError(f"options['reset_mask'] must be bool of shape ({self.num_envs},)")
            if self._state is None:
                raise ValueError("options['reset_mask'] needs a first reset() of every store")
        if self._key is None or seed is not None:
            self._key = _key_from(self.np_random)
        self._key, key = jax.random.split(self._key)
        if mask is None:
            obs, self._state = self._reset_fn(key, self.params, None, None, None)
            self._autoreset[:] = False
        else:
            obs, self._state = self._reset_fn(key, self.params, jnp.asarray(mask), self._obs, self._state)
            self._autoreset[mask] = False
        self._obs = obs
        return np.asarray(obs), {}

    def step(self, actions):
        """One day for every store from ``actions`` [N, A]: (obs [N, D] float32, reward [N] float32,
        terminated [N] bool, truncated [N] bool, info). info: ``net_worth`` [N] float32, ``invalid_levers``
        [N] int32, and the episode statistics (see the module docstring) when a store's episode ended."""
        if self._state is None:
            raise RuntimeError("VectorEnv.step: call reset() first")
        actions = _actions(actions, (self.num_envs, self.store.num_levers))
        self._key, key = jax.random.split(self._key)
        obs, self._state, reward, terminated, truncated, info, final_obs = self._step_fn(
            key,
            self._state,
            jnp.asarray(actions),
            jnp.asarray(self._autoreset),
            jnp.asarray(self.autoreset_mode == AutoresetMode.SAME_STEP),
            self.params,
        )
        self._obs = obs
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        done = terminated | truncated
        infos: dict[str, Any] = {
            "net_worth": np.asarray(info["net_worth"]),
            "invalid_levers": np.asarray(info["invalid_levers"]),
        }
        if done.any():
            infos[self.stats_key] = {
                "r": np.where(done, np.asarray(info["returned_episode_returns"]), 0.0),
                "l": np.where(done, np.asarray(info["returned_episode_lengths"]), 0),
                "net_worth": np.where(done, np.asarray(info["final_net_worth"]), 0.0),
                "survived": done & np.asarray(info["survived"]),
            }
            infos["_" + self.stats_key] = done
            if self.autoreset_mode == AutoresetMode.SAME_STEP:
                infos["final_obs"] = np.asarray(final_obs)
                infos["_final_obs"] = done
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._autoreset = done
        return np.asarray(obs), np.asarray(reward), terminated, truncated, infos


class StoreEnv(gymnasium.Env):
    """One store as a ``gymnasium.Env`` (no auto-reset, as Gymnasium's single envs): for
    ``gymnasium.utils.env_checker.check_env`` and libraries that vectorise single envs themselves.

    Observation [D] float32, action [A] float32 levers in [-1, 1] (``Store``)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        env: Env | None = None,
        *,
        pool_size: int = DEFAULT_POOL,
        reward_scale: float = REWARD_SCALE,
        seed: int = 0,
        env_params: EnvParams | None = None,
    ):
        self.store = Store(env)
        self.params = self.store.make_params(jax.random.key(seed), pool_size, reward_scale, env_params)
        self.observation_space, self.action_space = _spaces(self.store)
        self._reset_fn = jax.jit(self.store.reset)
        self._step_fn = jax.jit(self.store.step)
        self._state = None
        self._key = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """A store on its opening morning: (obs [D] float32, {}). ``options`` is not read."""
        _check_seed(seed)
        super().reset(seed=None if seed is None else int(seed))
        if self._key is None or seed is not None:
            self._key = _key_from(self.np_random)
        self._key, key = jax.random.split(self._key)
        obs, self._state = self._reset_fn(key, self.params)
        return np.asarray(obs), {}

    def step(self, action):
        """One day from ``action`` [A]: (obs [D] float32, reward float, terminated bool, truncated bool, info:
        dict of [] numpy arrays as ``Store.step``'s)."""
        if self._state is None:
            raise RuntimeError("StoreEnv.step: call reset() first")
        action = _actions(action, (self.store.num_levers,))
        self._key, key = jax.random.split(self._key)
        obs, self._state, reward, terminated, truncated, info = self._step_fn(
            key, self._state, jnp.asarray(action), self.params
        )
        info = {k: np.asarray(v) for k, v in info.items()}
        return np.asarray(obs), float(reward), bool(terminated), bool(truncated), info

"""The batched engine behind many agents: one ``EnvState`` of B stores on the device, stepped for the stores
whose agents ended their day.

Keys follow ``rbjax.rollout``: store s with key ``keys[s]`` resets with the first half of
``split(keys[s])`` and plays day t with ``split(fold_in(second half, t))`` (policy key, step key). So a
store's day depends on its key and its own calls only, never on which other stores stepped with it, and an
agent run matches ``rollout`` with the same keys.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rbjax import programs
from rbjax.agents.engine.ledger import Today
from rbjax.env import Env
from rbjax.kernels.rng import day_keys
from rbjax.model import orders
from rbjax.params import EnvParams
from rbjax.runners.batches import batch_bucket
from rbjax.state import Action, OrderLines


class AgentEngine:
    """B stores; ``step(actions)`` steps those in ``actions`` ({store: draft action}), the rest stay.

    The device batch is ``batch_bucket(B)`` stores (runs of 1 to 16 stores share one compilation).

    Everything returned is numpy. ``max_lines``: order lines per store-day (``OrderLines`` length L).
    Shapes: B stores (``keys`` [B], one typed key a store), J products, K suppliers, L order lines; P =
    ``batch_bucket(B)`` device rows, rows B.. padding (copies of the last store at reset; never stepped).
    Per store, a draft action is price [J] float32, set_price and shelf [J] bool, lines {product, supplier,
    units, lead, order: [L] int32; live: [L] bool}. Stores enter slots after the reset through ``load`` only.
    """

    def __init__(self, env: Env, params: EnvParams, keys: jax.Array, max_lines: int = 256):
        env.check_params(params)
        self.env, self.params, self.max_lines = env, params, max_lines
        self.B = int(keys.shape[0])
        self.padded = batch_bucket(self.B)  # the engine's batch: a few sizes, so a few compilations
        keys = jnp.concatenate([keys, jnp.repeat(keys[-1:], self.padded - self.B, axis=0)])
        k_reset, self.k_run = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
        self.seeds = [int(x) for x in np.asarray(jax.random.key_data(self.k_run))[: self.B, -1]]
        self.programs = _programs(env)
        self.obs, self.state, opening = self.programs["reset"](k_reset, params)
        self.opening = jax.device_get(opening)
        self.lead = np.asarray(self.programs["lead"](self.k_run, self.state))
        self.version = 0  # bumped by every step (policy drivers cache their actions per version)
        self.keep_rows, self.rows = False, {}  # keep_rows: each step leaves the stepped stores' row() in rows
        self._pull()

    # ------------------------------------------------------------------ host side
    def pay(self, lines: dict, quote_price: np.ndarray, funds) -> tuple[np.ndarray, np.float32]:
        """The step's payment of one store's order lines so far: (accepted [L], spent).

        lines: dict of [L] arrays (product, supplier, units, lead, order int32; live bool); quote_price
        [J, K]; funds: the morning's funds. accepted: [L] bool, the lines of paid orders; spent: [] float32.
        """
        accepted, spent, _, _ = self.programs["pay"](
            OrderLines.sized(**lines),
            quote_price,
            np.float32(funds),
            self.params.max_units_per_order,
            self.env.config.pending_slots,
        )
        return np.asarray(accepted), np.float32(spent)

    def _pull(self) -> None:
        self.host = jax.device_get(self._host_tree())

    def _host_tree(self) -> dict:
        """What ``today`` reads of the device state: [P, ...] device arrays."""
        s = self.state
        return dict(
            day=s.day,
            funds=s.funds,
            net_worth=s.net_worth,
            prices=s.prices,
            shelf=s.shelf,
            on_hand=self.obs.on_hand,
            waiting=self.obs.waiting,
            lots=s.lots,
            news=s.news,
            suppliers=s.suppliers,
            world=s.world,
            done=s.done,
        )

    def today(self, store: int) -> Today:
        """Store ``store`` (0..B-1) this morning, numpy: prices, shelf, on_hand, waiting [J], lead [J, K]
        (today's single-line lead draws), lots [J, C], news [N], quotes and transport ranges [J, K]."""
        p = self.params
        row = jax.tree.map(lambda v: v[store], self.host)
        day = int(row.pop("day"))
        return Today(
            day=day,
            cal=int(p.open_day) + day,
            funds=float(row.pop("funds")),
            net_worth=float(row.pop("net_worth")),
            done=bool(row.pop("done")),
            lead=self.lead[store],
            capacity=int(p.capacity),
            shelf_capacity=int(p.shelf_capacity),
            **row,
        )

    def news_seed(self, store: int) -> int:
        """Stores of one supplier world share its news, and so their news ids."""
        return int(np.asarray(self.host["world"].key[store]).astype(np.uint64).sum())

    def step(self, actions: dict[int, dict]) -> dict[int, tuple]:
        """Step the stores in ``actions`` once; the other stores stay as they are.

        actions: {store: draft action} (``DayDraft.to_action()``: price, set_price, shelf [J]; lines [L]
        each). Returns {store: (DayInfo row, DayDetail row)} in numpy: DayInfo's fields [J] or [],
        DayDetail's cogs [J], per-supplier fields [J, K], line_accepted [L]. Afterwards ``today`` shows
        the next morning, ``lead`` is [P, J, K] again and ``version`` is bumped.
        """
        B, J, L = self.padded, self.env.config.num_products, self.max_lines
        active = np.zeros(B, bool)
        price = np.asarray(self.host["prices"]).copy()
        shelf = np.asarray(self.host["shelf"]).copy()
        set_price = np.zeros((B, J), bool)
        lines = {k: np.zeros((B, L), np.int32) for k in ("product", "supplier", "units", "lead", "order")}
        lines["live"] = np.zeros((B, L), bool)
        for s, a in actions.items():
            active[s] = True
            price[s], shelf[s], set_price[s] = a["price"], a["shelf"], a["set_price"]
            for k, v in a["lines"].items():
                lines[k][s] = v
        K = self.env.config.num_suppliers
        action = Action(
            price=price,
            shelf=shelf,
            order=np.zeros((B, J, K), np.float32),
            set_price=set_price,
            lines=OrderLines.sized(**lines),
        )
        self.obs, self.state, info, detail, lead = self.programs["step"](
            self.k_run, self.obs, self.state, action, active, self.params
        )
        self.version += 1
        info, detail = jax.device_get((info, detail))
        self.lead = np.asarray(lead)
        self._pull()
        take = lambda tree, s: jax.tree.map(lambda x: x[s], tree)
        if self.keep_rows:  # taken here: a later step may donate the state's buffers
            obs, state = jax.device_get((self.obs, self.state))
            for s in actions:
                self.rows[s] = {"obs": take(obs, s), "state": take(state, s), "lead": self.lead[s].copy()}
        return {s: (take(info, s), take(detail, s)) for s in actions}

    def row(self, store: int) -> dict:
        """Store ``store``'s part of the engine, numpy: a checkpoint. {obs: Observation, state: EnvState,
        lead: [J, K]}, each leaf without the batch axis (prices [J], quotes [J, K], ...)."""
        take = lambda tree: jax.tree.map(lambda x: np.asarray(x[store]), tree)
        return {"obs": take(self.obs), "state": take(self.state), "lead": np.array(self.lead[store])}

    def load(self, slots, states, keys: jax.Array | None = None) -> None:
        """Slots ``slots`` ([n] distinct ints in 0 .. B-1) become the stores of ``states`` (an ``EnvState`` of
        leaves [n, ...], numpy or device) and, when given, of the episode keys ``keys`` ([n] typed keys: day d
        of a slot uses ``fold_in(split(key)[1], d)``, as in ``rollout``; None: each slot keeps its own). Their
        observation and today's lead draws are made from the new state; the other slots are untouched; bumps
        ``version``. The one door through which stores enter the engine after its reset: a snapshot's stores,
        a session's task, a checkpoint's stores."""
        idx = np.asarray(slots, np.int32).reshape(-1)
        if not len(idx):
            return
        if len(set(idx.tolist())) != len(idx) or idx.min() < 0 or idx.max() >= self.B:
            raise ValueError(f"slots must be distinct stores of 0 .. {self.B - 1}, got {idx.tolist()}")
        given = {np.shape(x)[0] if np.ndim(x) else None for x in jax.tree.leaves(states)}
        if given != {len(idx)} or (keys is not None and len(keys) != len(idx)):
            raise ValueError(
                f"states (and keys) must hold one store per slot: leading axes {sorted(given, key=str)} for "
                f"{len(idx)} slots"
            )
        k_run = self.k_run[idx] if keys is None else jax.vmap(jax.random.split)(keys)[:, 1]
        self.obs, self.state, self.k_run, lead = self.programs["load"](
            self.obs, self.state, self.k_run, idx, states, k_run, self.params
        )
        self.lead = np.array(self.lead)
        self.lead[idx] = np.asarray(lead)
        for s, key in zip(idx, np.asarray(jax.random.key_data(k_run)), strict=True):
            self.seeds[int(s)] = int(key[-1])
        self.version += 1
        self._pull_rows(idx)

    def _pull_rows(self, idx: np.ndarray) -> None:
        """Refresh the host view of the rows ``idx`` ([n] int32; ``_pull`` refreshes all)."""
        rows = jax.device_get(jax.tree.map(lambda x: x[idx], self._host_tree()))
        self.host = jax.tree.map(_writable, self.host)
        jax.tree.map(lambda h, r: h.__setitem__(idx, r), self.host, rows)

    def policy_actions(self, policy, policy_params):
        """Every store's action under ``policy`` this morning, with the keys ``rollout`` gives the policy:
        an ``Action`` of numpy [P, ...] leaves (price, shelf [P, J], order [P, J, K]); rows 0..B-1 are the
        stores, the rest padding."""
        env = self.env

        def build():
            def one(policy_params, params, k_run, obs, state):
                k_pol, _ = day_keys(k_run, state.day)
                return policy(policy_params, obs, env.privileged(state, params), k_pol)

            return jax.jit(jax.vmap(one, in_axes=(None, None, 0, 0, 0)))

        fn = programs.cached("engine.policy_actions", build, env, (policy,))
        return jax.device_get(fn(policy_params, self.params, self.k_run, self.obs, self.state))


def _writable(x) -> np.ndarray:
    x = np.asarray(x)
    return x if x.flags.writeable else x.copy()


def _programs(env: Env) -> dict:
    """The jitted reset, load, step, lead and payment programs of ``env`` (``programs.cached`` once per env; each
    compiles once per shapes)."""
    return programs.cached("engine.programs", lambda: _build_programs(env), env)


def _build_programs(env: Env) -> dict:
    def lead_today(k_run, state):
        return env.lead_days(day_keys(k_run, state.day)[1], state)

    def step_one(k_run, obs, state, action, active, params):
        _, k_env = day_keys(k_run, state.day)
        new_obs, new, _, _, _, info, detail = env.step_detailed(k_env, state, action, params)
        keep = lambda n, o: jnp.where(active, n, o)  # noqa: E731  a store not stepped keeps its morning
        new, new_obs = jax.tree.map(keep, new, state), jax.tree.map(keep, new_obs, obs)
        return new_obs, new, info, detail, lead_today(k_run, new)

    def load(obs, state, k_run, idx, new_state, new_k_run, params):
        put = lambda b, n: b.at[idx].set(n.astype(b.dtype))  # noqa: E731
        new_obs = jax.vmap(env.observe, in_axes=(0, None))(new_state, params)
        data = put(jax.random.key_data(k_run), jax.random.key_data(new_k_run))
        k_run = jax.random.wrap_key_data(data, impl=jax.random.key_impl(k_run))
        lead = jax.vmap(lead_today)(new_k_run, new_state)
        return jax.tree.map(put, obs, new_obs), jax.tree.map(put, state, new_state), k_run, lead

    return {
        "reset": jax.jit(jax.vmap(env.reset_detailed, in_axes=(0, None))),
        "load": jax.jit(load, donate_argnums=(0, 1, 2)),
        "lead": jax.jit(jax.vmap(lead_today)),
        "step": jax.jit(jax.vmap(step_one, in_axes=(0, 0, 0, 0, 0, None)), donate_argnums=(1, 2)),
        "pay": jax.jit(orders.check_lines, static_argnums=(4,)),
    }

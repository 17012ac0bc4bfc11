"""Distillation by approximate policy iteration: rounds of (play, label with the planner, fit the student).

Round 0 plays and plans with the anchor (the oracle); round r plays the round r - 1 student and the planner
plays it on in its futures (``labels.collect``), so each round's teacher is stronger than the last. Each round
fits the network to the planner's choice (cross-entropy on the best candidate), warm-started from the last
round's weights, on every round's labels so far (``DistillConfig.aggregate``, as DAgger aggregates its data:
a round's student must still choose well on the states earlier students led to; a tenth held out to report
the fit). ``save`` writes a checkpoint folder (``config.json``, ``student.msgpack``, ``curve.csv``) that
``load_policy`` reads back for the registry (``rbjax.policies.make("distilled", env, checkpoint)``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from flax import serialization

from rbjax.counts import need_count
from rbjax.env import Env
from rbjax.policies.oracle import OracleParams
from rbjax.policies.planner import default_params as default_moves
from rbjax.rl.distill.labels import Labels, LabelSettings, collect
from rbjax.rl.distill.student import SHARED_P, SUPPLIER_P, Student, StudentConfig, StudentParams

FILES = ("config.json", "student.msgpack")
PROGRESS_EVERY = (
    20.0  # seconds between a round's progress lines (a labeled morning takes about 27 s on 2 cores)
)


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """The recipe's settings: the student, the rounds, each round's labels, and the fit."""

    student: StudentConfig = StudentConfig()
    rounds: int = 3
    labels: LabelSettings = LabelSettings()
    epochs: int = 30
    batch: int = 256
    lr: float = 1e-3
    aggregate: bool = True  # fit each round on every round's labels so far (DAgger), not on its own alone

    def __post_init__(self):
        for name in ("rounds", "epochs", "batch"):  # kept as ints (3.0 -> 3)
            object.__setattr__(
                self, name, need_count(f"DistillConfig.{name}", getattr(self, name), whole=True)
            )
        if not isinstance(self.aggregate, bool):
            raise ValueError(f"DistillConfig.aggregate must be a bool, got {self.aggregate!r}")
        if not self.lr > 0:
            raise ValueError(f"DistillConfig.lr must be > 0, got {self.lr!r}")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> DistillConfig:
        d = dict(d)
        # a checkpoint from before the field: each round fitted its own labels
        d.setdefault("aggregate", False)
        return cls(student=StudentConfig(**d.pop("student")), labels=LabelSettings(**d.pop("labels")), **d)


def fit(
    student: Student, params: StudentParams, labels: Labels, config: DistillConfig, key, new_from: int = 0
) -> tuple:
    """(params, stats): the network fitted to ``labels``' best candidates by Adam on the cross-entropy,
    ``config.epochs`` passes over nine tenths of them. stats: of this round's own labels (``labels[new_from:]``;
    the earlier ones an aggregating round fits again, and its warm start has seen): the held-out tenth's
    agreement with the planner, the share of the planner's gain (best - anchor value) the student's picks keep,
    and how often the planner departs from the anchor."""
    n = len(labels)
    order = np.random.default_rng(int(jax.random.randint(key, (), 0, 2**31 - 1))).permutation(n)
    held, train = order[: max(1, n // 10)], order[max(1, n // 10) :]
    held = held[held >= new_from] if (held >= new_from).any() else held  # scored: new labels never fitted
    data = dict(products=labels.products, store=labels.store, mask=labels.mask, best=labels.best)
    net = student.net(student.candidate_count(params.planner))
    tx = optax.adam(config.lr)
    opt = tx.init(params.net)

    def loss_fn(w, batch):
        logits = net.apply(w, batch["products"], batch["store"], batch["mask"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["best"]).mean()

    @jax.jit
    def update(w, opt, batch):
        loss, grad = jax.value_and_grad(loss_fn)(w, batch)
        upd, opt = tx.update(grad, opt, w)
        return optax.apply_updates(w, upd), opt, loss

    # the epochs' shuffles follow the key too (a second stream of it: the held-out split above is the first)
    rng = np.random.default_rng(int(jax.random.randint(jax.random.fold_in(key, 1), (), 0, 2**31 - 1)))
    w, losses = params.net, []
    for _ in range(config.epochs):
        perm = rng.permutation(train)
        for i in range(0, len(perm) - config.batch + 1, config.batch):
            w, opt, loss = update(w, opt, {k: v[perm[i : i + config.batch]] for k, v in data.items()})
            losses.append(float(loss))
    pick = np.asarray(jnp.argmax(net.apply(w, *(data[k][held] for k in ("products", "store", "mask"))), -1))
    v = labels.values[held]
    gain = v.max(-1) - v[:, 0]
    # NaN where the planner found no gain on the held-out labels (a share of nothing is not a number)
    kept = (v[np.arange(len(held)), pick] - v[:, 0]).sum() / gain.sum() if gain.sum() > 1e-6 else float("nan")
    stats = dict(
        train_loss=float(np.mean(losses[-10:])) if losses else float("nan"),
        agreement=float((pick == labels.best[held]).mean()),
        gain_kept=float(kept),
        planner_departs=float((labels.best[new_from:] != 0).mean()),
    )
    return params.replace(net=w), stats


def distill(
    env: Env,
    params,
    config: DistillConfig = DistillConfig(),
    seed: int = 0,
    progress: Callable[[str], None] | None = print,
    every: float = PROGRESS_EVERY,
) -> tuple[StudentParams, pd.DataFrame, list[StudentParams]]:
    """(the last round's student params, the curve: one row a round, every round's params). progress: None, or
    called with a line after each round, and within a round's labels about every ``every`` seconds (``day
    D/DAYS``, and on its last day)."""
    student = Student(config.student)
    key = jax.random.key(seed)
    planner = default_moves(OracleParams.default())
    current = student.init(jax.random.fold_in(key, 0xA7), planner, env.config.num_products)
    policy, policy_params = student.anchor, planner.base
    rows, rounds, seen = [], [], []
    for r in range(config.rounds):
        start = time.perf_counter()
        k_round = jax.random.fold_in(key, r)
        days = None if progress is None else _days_line(progress, f"round {r}", every)
        labels = collect(
            env, params, student, planner, policy, policy_params, config.labels, k_round, progress=days
        )
        seen = [*seen, labels] if config.aggregate else [labels]
        data = Labels.concat(seen)
        k_fit = jax.random.fold_in(k_round, 1)
        current, stats = fit(student, current, data, config, k_fit, new_from=len(data) - len(labels))
        rounds.append(current)
        rows.append(
            dict(
                round=r,
                labels=len(labels),
                fitted_on=len(data),
                label_s=labels.seconds,
                round_s=time.perf_counter() - start,
                simulated_store_days=labels.simulated_store_days,
                **stats,
            )
        )
        if progress:
            s = rows[-1]
            progress(
                f"round {r}: {s['labels']:,} new labels in {s['label_s']:.0f} s, the planner departs from the anchor "
                f"on {s['planner_departs']:.0%}; held out: agreement {s['agreement']:.0%}, gain kept "
                f"{'n/a (no gain to keep)' if np.isnan(s['gain_kept']) else format(s['gain_kept'], '.0%')} "
                f"({s['round_s']:.0f} s)"
            )
        policy, policy_params = student, current
    return current, pd.DataFrame(rows), rounds


def _days_line(
    progress: Callable[[str], None], where: str, every: float
) -> Callable[[int, int, float], None]:
    """``labels.collect``'s progress as lines: ``ROUND: day D/DAYS, S s`` on a round's first call (it compiles
    the labeler), then once ``every`` seconds have passed since the last line, and on the last day."""
    last = [None]

    def days(done: int, total: int, seconds: float) -> None:
        if last[0] is None or seconds - last[0] >= every or done == total:
            progress(f"{where}: day {done}/{total}, {seconds:.0f} s")
            last[0] = seconds

    return days


def save(
    out: str | Path, params: StudentParams, config: DistillConfig, curve: pd.DataFrame, env: Env
) -> None:
    """Write ``config.json`` (the recipe's config, the env's shapes), ``student.msgpack``, ``curve.csv``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(distill=config.as_dict(), num_products=env.config.num_products)
    (out / "config.json").write_text(json.dumps(meta, indent=2) + "\n")
    (out / "student.msgpack").write_bytes(serialization.to_bytes(params))
    curve.to_csv(out / "curve.csv", index=False)


def load(path: str | Path, env: Env) -> tuple[StudentParams, DistillConfig]:
    """Read a folder written by ``save``. A missing file or one that does not fit ``env``: ValueError naming it."""
    path = Path(path)
    missing = [f for f in FILES if not (path / f).is_file()]
    if missing:
        raise ValueError(f"{path} is not a distilled student's checkpoint: missing {', '.join(missing)}")
    try:
        meta = json.loads((path / "config.json").read_text())
        config = DistillConfig.from_dict(meta["distill"])
        trained = int(meta["num_products"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path / 'config.json'}: not a distill config ({type(e).__name__}: {e})") from None
    if trained != env.config.num_products:
        raise ValueError(f"checkpoint {path} has num_products={trained}, the env {env.config.num_products}")
    template = Student(config.student).init(jax.random.key(0), num_products=trained)
    try:
        state = serialization.msgpack_restore((path / "student.msgpack").read_bytes())
        if (
            isinstance(state, dict) and "moves" in state and "planner" not in state
        ):  # before StudentParams.planner
            state["planner"] = state.pop("moves")
        params = serialization.from_state_dict(template, state)
    except Exception as e:  # msgpack and from_state_dict raise several unrelated types
        raise ValueError(
            f"{path / 'student.msgpack'}: does not hold this student ({type(e).__name__})"
        ) from None
    first = params.net["params"]["Dense_0"]["kernel"]
    if not config.student.privileged and np.shape(first)[0] == SHARED_P:  # without the supplier's evidence
        raise ValueError(
            f"{path}: an observed student from before it read the evidence of its supplier ({SHARED_P} features a "
            f"product, now {SHARED_P + SUPPLIER_P}): train it again"
        )
    for leaf, want in zip(jax.tree.leaves(params), jax.tree.leaves(template)):
        if np.shape(leaf) != np.shape(want) or not np.isfinite(np.asarray(leaf, np.float64)).all():
            raise ValueError(f"{path / 'student.msgpack'}: a weight of the wrong shape or not finite")
    return params, config


# the registry's name of each kind of student (``StudentConfig.kind``)
REGISTERED = {"privileged": "distilled", "observed": "distilled_obs", "belief": "distilled_belief"}
# ... and once fine-tuned with the environment's reward (``rbjax.rl.finetune``): the same network, other weights
FINETUNED = {"privileged": "finetuned", "observed": "finetuned_obs", "belief": "finetuned_belief"}


def load_policy(env: Env, checkpoint: str | Path, greedy: bool = False, expect: str | None = None):
    """(the student, its params) from a checkpoint folder, as ``rbjax.policies.make("distilled", ...)`` gives
    them (a student is deterministic: ``greedy`` changes nothing); ``expect``: the registry's name asked for,
    refused when the checkpoint holds another kind of student."""
    params, config = load(checkpoint, env)
    kind = config.student.kind
    names = (REGISTERED[kind], FINETUNED[kind])  # a kind's student loads as either, distilled or fine-tuned
    if expect is not None and expect not in names:
        raise ValueError(
            f"checkpoint {checkpoint} holds a {kind} student: load it as the policy {names[0]!r} or {names[1]!r}"
        )
    return Student(config.student), params

"""The Inspect face's scorers (``rbjax.lm.faces.inspect_eval``): a slice's session reward, a full episode's
main-table metrics and, with ``-T ceiling=true``, its share of the agent's ceiling and of the oracle."""

from __future__ import annotations

from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import StoreModel, store_as
from pydantic import Field

from rbjax.lm.faces.inspect_pool import shared_pool


class RetailResult(StoreModel):
    """What a sample's solver leaves for its scorer: the session's ``info()``, the turns and, for a full
    episode, its main-table metrics."""

    info: dict = Field(default_factory=dict)
    metrics: dict | None = None


@scorer(metrics=[mean(), stderr()])
def session_reward():
    """A slice's score: its session's reward (the pool's kind), the session's ``info()`` as metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        result = store_as(RetailResult)
        if not result.info:
            raise RuntimeError(f"sample {state.sample_id}: its episode left no result (not played?)")
        return Score(value=result.info["reward"], metadata=result.info)

    return score


@scorer(metrics={"*": [mean(), stderr()]})
def episode_metrics():
    """A full episode's score: its main-table metrics and ``survived`` (1.0 or 0.0), the session's ``info()``
    as metadata. A ratio with an empty denominator (no sales) is NaN, as in ``agents run``'s table."""

    async def score(state: TaskState, target: Target) -> Score:
        result = store_as(RetailResult)
        if result.metrics is None:
            raise RuntimeError(f"sample {state.sample_id}: its episode left no metrics (not played?)")
        value = dict(result.metrics)
        if state.metadata.get("ceiling"):
            value |= await ceiling_shares(state, value["final_net_worth"])
        return Score(value=value, metadata=result.info)

    return score


async def ceiling_shares(state: TaskState, net_worth: float) -> dict:
    """{``plan_obs_net_worth``, ``share_of_plan_obs``, ``oracle_net_worth``, ``share_of_oracle``}: the sample's
    store's final net worth under each reference, and the agent's as a share of it (the mean over samples is
    the mean of the stores' shares, as ``agents diagnose --ceiling`` prints it)."""
    shared, _ = await shared_pool(state)
    finals = await shared.reference_finals(dict(state.metadata["env"], stores=state.metadata["stores"]))
    store, out = state.metadata["store"], {}
    for name, final in finals.items():
        out[f"{name}_net_worth"] = float(final[store])
        out[f"share_of_{name}"] = net_worth / float(final[store]) if final[store] else float("nan")
    return out

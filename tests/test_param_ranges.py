"""Every EnvParams leaf has a finite documented range (``rbjax.checks.PARAM_SPEC``, ``docs/model.md``): values
outside it are refused naming the leaf, and a store run at either end of it keeps finite books."""

import jax
import numpy as np
import pandas as pd
import pytest

import rbjax
from rbjax.checks import PARAM_SPEC
from rbjax.policies import RandomParams, random_policy

PRICES = ("price_min", "price_p30", "price_p70", "price_max")  # ordered: set together


def _filled(params, name: str, value: float) -> dict:
    """{leaf: value} for ``name`` set to ``value`` everywhere (the price quartet moves together)."""
    x = np.asarray(getattr(params, name))
    names = PRICES if name in PRICES else (name,)
    return {n: np.full(x.shape, value, x.dtype) for n in names}


def _ends(name: str) -> list[float]:
    spec = PARAM_SPEC[name]
    lo = spec.lo
    if spec.open_lo:  # the smallest value above lo in the leaf's dtype
        lo = float(np.nextafter(np.float32(lo), np.float32(1))) if spec.kind == "f" else lo + 1
    return [lo, spec.hi]


def _outside(name: str) -> list[float]:
    spec = PARAM_SPEC[name]
    if spec.kind == "i":
        return [spec.lo - 1, spec.hi + 1]
    return [spec.lo - 1.0 if not spec.open_lo else spec.lo, spec.hi * 10 + 1, np.inf, np.nan]


@pytest.mark.parametrize("name", sorted(PARAM_SPEC))
def test_values_outside_a_leafs_range_are_refused_naming_it(env, params, name):
    for value in _outside(name):
        change = _filled(params, name, value)
        with pytest.raises(ValueError, match=rf"EnvParams\.({'|'.join(change)})"):
            env.check_params(params.replace(**change))


@pytest.mark.slow
def test_a_store_at_either_end_of_every_range_keeps_finite_books(env, params):
    """Each leaf at its lowest and its highest valid value (one leaf at a time; the price quartet together):
    the params are refused naming the leaf (a joint rule, e.g. open_day outside the data window), or two stores
    run 6 days under the random policy (orders, prices, shelf) with finite funds and net worth every day. The
    params are the program's arguments: one compilation for every end."""
    keys = jax.random.split(jax.random.key(3), 2)
    ran, refused, broken = [], [], []
    for name in sorted(PARAM_SPEC):
        if name in PRICES[1:]:
            continue
        for value in _ends(name):
            candidate = params.replace(**_filled(params, name, value))
            try:
                env.check_params(candidate)
            except ValueError as e:
                assert name in str(e) or (name in PRICES and "price" in str(e)), str(e)
                refused.append((name, value))
                continue
            rec, _ = rbjax.rollout(env, random_policy, RandomParams.default(), candidate, keys, days=6)
            ran.append((name, value))
            if not (
                np.isfinite(np.asarray(rec.funds)).all() and np.isfinite(np.asarray(rec.net_worth)).all()
            ):
                broken.append((name, value))
    assert not broken, f"non-finite books at the ends of these ranges: {broken}"
    assert len(ran) > 2 * len(refused), (ran, refused)  # most ends are runnable, not refused


def test_the_issue_case_is_refused_at_every_entry(env, params):
    """rent=1e38 made every net worth -inf without a word: rollout and reset now refuse it, naming the leaf."""
    bad = params.replace(rent=np.float32(1e38))
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.raises(ValueError, match=r"EnvParams\.rent must be in \[0, 1e\+09\]"):
        rbjax.rollout(env, random_policy, RandomParams.default(), bad, keys, days=2)
    with pytest.raises(ValueError, match=r"EnvParams\.rent"):
        env.reset(jax.random.key(0), bad)


def test_broken_books_are_a_flagged_failure_in_the_summaries():
    """A store whose money is not finite (params traced inside jit are not checked) is named as a failure in
    the main table's text and in the slices' summary, never a silent row."""
    from rbjax.results import metrics
    from rbjax.runners import paired

    table = pd.DataFrame(
        {m: np.arange(4, dtype=np.float64) + 1 for m in metrics.MAIN_TABLE + metrics.DIAGNOSTICS}
    )
    table.loc[2, "final_net_worth"] = -np.inf
    text = metrics.format_compare(metrics.compare(table))
    assert "FAILED: 1 of 4 stores ended with a non-finite net worth" in text and "(stores 2)" in text
    assert "FAILED" not in metrics.format_compare(metrics.compare(table.drop(index=2)))

    slices = pd.DataFrame(
        {
            "store": [0, 1, 2],
            "start_day": [30, 30, 30],
            "net_worth": [1.0, np.nan, 3.0],
            "ref_net_worth": [1.0, 2.0, 3.0],
            **{c: [0.0, 0.0, 0.0] for c in paired.SUMMARY_COLUMNS},
            "survived": [True] * 3,
            "ref_survived": [True] * 3,
        }
    )
    text = paired.format_summary(paired.summarize(slices), "p", "oracle", 10)
    assert "FAILED: 1 of 3 slices ended with a non-finite net worth (store 1 from day 30)" in text


def test_the_documented_table_is_the_spec():
    """docs/model.md's "Parameter ranges" table lists every leaf with the range check_params enforces."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "model.md").read_text()
    rows = {
        cells[0].strip("` "): cells[3].strip()
        for line in text.splitlines()
        if line.startswith("| `") and len(cells := line.strip("|").split(" | ")) == 4
    }
    assert rows == {name: spec.says for name, spec in PARAM_SPEC.items()}


def test_the_opening_review_ring_holds_the_most_reviews_a_range_allows(env, params, reset):
    """Traffic at its maximum with every sale reviewed: the pre-opening history's daily reviews pass the ring's
    int16 range and are held at it, as a played day's are, so the window totals are the ring's sums."""
    crowd = params.replace(
        traffic=np.full(params.traffic.shape, PARAM_SPEC["traffic"].hi, np.float32),
        history_review_ratio=np.float32(1.0),
    )
    _, state = reset(jax.random.key(0), env.check_params(crowd))
    r = jax.tree.map(np.asarray, state.reviews)
    assert r.count.max() == 32767  # the cap is reached
    assert np.array_equal(r.window_count, r.count.astype(np.int64).sum(0))
    assert np.array_equal(r.window_sum, r.sum.astype(np.int64).sum(0))

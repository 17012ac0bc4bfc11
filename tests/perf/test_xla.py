"""rbjax.kernels.xla: ordered sums, blocked ranks and ``materialize`` (compute a sampler once, not inside every
consumer)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rbjax.kernels.rng import _mix
from rbjax.kernels.xla import RANK_BLOCK, _fsum_indexed, _fsum_split, fsum, materialize, rank


def test_materialize_returns_the_same_arrays():
    x = jnp.arange(12, dtype=jnp.int8).reshape(3, 4)
    (y,) = materialize(x)
    assert y.dtype == x.dtype and y.shape == x.shape and np.array_equal(y, x)
    a, b, c = (jnp.linspace(0, 1, 96, dtype=jnp.float32) * i for i in range(3))
    out = jax.jit(materialize)(a, b, c)
    assert out.shape == (3, 96)
    for got, want in zip(out, (a, b, c)):
        assert np.array_equal(got, want)


def test_materialize_names_mismatched_shapes_and_promotes_dtypes():
    with pytest.raises(ValueError, match="one shape"):
        materialize(jnp.zeros(3), jnp.zeros(4))
    out = materialize(jnp.arange(3, dtype=jnp.int32), jnp.full(3, 0.5, jnp.float32))
    assert out.dtype == jnp.float32 and np.array_equal(out, [[0, 1, 2], [0.5, 0.5, 0.5]])


def _hash_work(use_materialize: bool) -> int:
    """Elements of the largest fused kernel that evaluates a [J] integer-hash "sampler" read by 8 broadcasting
    consumers, in the optimised CPU program for 64 stores: 64 * J when the hash is computed once."""

    def store(x):
        draw = _mix(x)  # [J] uint32, cheap elementwise ops only
        if use_materialize:
            (draw,) = materialize(draw)
        return jnp.stack([jnp.where((draw % 8)[:, None] == d, 1.0, 0.0) * jnp.arange(5.0) for d in range(8)])

    text = jax.jit(jax.vmap(store)).lower(jnp.ones((64, 96), jnp.uint32)).compile().as_text()
    bodies = re.findall(r"\n%([\w.-]+) [^\n]*\{\n(.*?)\n\}", text, re.S)
    hashing = {name for name, body in bodies if "constant(2146121005)" in body}
    sizes = [
        int(np.prod([int(d) for d in dims.split(",")]))
        for dims, callee in re.findall(r"= \w+\[([\d,]+)\][^\n]* fusion\([^\n]*calls=%([\w.-]+)", text)
        if callee in hashing
    ]
    assert sizes, "the hash was not found in any fused kernel"
    return max(sizes)


def test_materialize_stops_xla_recomputing_a_producer_in_each_consumer():
    # without it, XLA:CPU fuses the hash into the [8, J, 5] consumer, evaluating it 40 times per element
    assert _hash_work(False) >= 64 * 96 * 8
    assert _hash_work(True) <= 64 * 96 * 2


@pytest.mark.parametrize("write", [_fsum_split, _fsum_indexed])
def test_fsum_adds_in_index_order(write):
    x = jnp.asarray([[1e8, 1.0, -1e8, 1.0]], jnp.float32)
    assert float(write(x, -1)[0]) == float(
        ((np.float32(1e8) + np.float32(1)) - np.float32(1e8)) + np.float32(1)
    )


def test_fsum_writings_give_the_same_bits():
    x = jax.random.normal(jax.random.key(3), (6, 5, 7), jnp.float32) * 1e4
    for axis in (0, 1, 2, -1, -2):
        split, indexed = np.asarray(_fsum_split(x, axis)), np.asarray(_fsum_indexed(x, axis))
        assert split.shape == indexed.shape == tuple(np.delete(np.asarray(x.shape), axis))
        np.testing.assert_array_equal(split.view(np.uint32), indexed.view(np.uint32))


def test_fsum_is_written_per_platform(monkeypatch):
    x = jnp.ones((4, 5), jnp.float32)
    prims = lambda: {e.primitive.name for e in jax.make_jaxpr(lambda a: fsum(a))(x).jaxpr.eqns}  # fresh trace
    assert "split" in prims()  # the CPU writing
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert "split" not in prims()


def _rank_reference(x, descending, group, among):
    """Positions by a stable sort per group, among the chosen elements only (numpy)."""
    x, group = np.asarray(x), np.asarray(group)
    pos = np.zeros(len(x), np.int64)
    for i in range(len(x)):
        rivals = (group == group[i]) & among
        better = (x > x[i]) if descending else (x < x[i])
        pos[i] = np.sum(rivals & (better | ((x == x[i]) & (np.arange(len(x)) < i))))
    return pos


@pytest.mark.parametrize("J", [1, 7, RANK_BLOCK, RANK_BLOCK + 1, 96])
def test_rank_matches_a_stable_sort_with_groups_and_ties(J):
    rng = np.random.default_rng(J)
    for descending in (True, False):
        x = rng.integers(0, 6, J).astype(np.float32)  # many ties
        group = rng.integers(0, 3, J).astype(np.int32)
        among = rng.random(J) < 0.6
        got = jax.jit(rank, static_argnums=1)(
            jnp.asarray(x), descending, jnp.asarray(group), jnp.asarray(among)
        )
        np.testing.assert_array_equal(np.asarray(got), _rank_reference(x, descending, group, among))
        plain = np.asarray(rank(jnp.asarray(x), descending))
        np.testing.assert_array_equal(plain, _rank_reference(x, descending, np.zeros(J), np.ones(J, bool)))
        assert sorted(plain.tolist()) == list(range(J))  # a permutation

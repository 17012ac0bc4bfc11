"""rbjax.kernels.halving: two rounds of sequential halving against a hand computation."""

import jax
import jax.numpy as jnp
import numpy as np

from rbjax.kernels.halving import sequential_halving, survivors

# values[c, m] of 5 candidates under 4 keys; keys 0-1 are the first round, 2-3 the second
TABLE = np.array(
    [
        [1, 1, 5, 5],  # 0, the base: first round 2 (the worst kept anyway), total 12
        [3, 3, 0, 0],  # 1: first round 6, total 6
        [2, 2, 9, 9],  # 2: first round 4, total 22: the best survivor
        [0, 0, 50, 50],  # 3: first round 0, pruned, though its total (100) is the best of all
        [2, 2, 1, 1],  # 4: first round 4, tied with 2 and dropped for it (ties go to the lower index)
    ],
    np.float32,
)


def halve(table):
    seen = []

    def value(indices, keys):
        seen.append((indices.shape[0], keys.shape[0]))
        return jnp.asarray(table)[indices][:, keys]

    best = jax.jit(lambda keys: sequential_halving(value, table.shape[0], keys))(jnp.arange(table.shape[1]))
    return int(best), seen


def test_the_hand_computed_choice_and_its_cost():
    # by hand: round one keeps 0, then 1 (6) and 2 (4, tied with 4: the lower index); totals 12, 6, 22 -> 2
    best, seen = halve(TABLE)
    assert best == 2
    assert survivors(5) == 3 and seen == [(5, 2), (3, 2)]  # 5 x 2 + 3 x 2 valuations, not 5 x 4


def test_the_base_survives_and_wins_ties():
    assert halve(np.ones((5, 4), np.float32))[0] == 0
    low_first = TABLE.copy()
    low_first[0] = [-9, -9, 60, 60]  # the worst first round, the best total among those kept
    assert halve(low_first)[0] == 0


def test_an_odd_number_of_keys_gives_the_second_round_the_extra_one():
    best, seen = halve(np.tile(np.arange(5, dtype=np.float32), (5, 1)))
    assert seen == [(5, 2), (3, 3)] and best == 0  # every row the same shape: all tie, the base wins

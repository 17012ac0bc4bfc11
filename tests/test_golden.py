"""Every record and the final state of 4 stores x 30 days under three policies equal the fixture bit for bit
(``tests/golden.py`` regenerates it, only for a deliberate change of records)."""

import golden
import numpy as np
import pytest


@pytest.fixture(scope="module")
def current():
    return golden.compute()


@pytest.fixture(scope="module")
def expected():
    with np.load(golden.FIXTURE) as data:
        return dict(data)


def test_golden_fixture_covers_every_policy_record_and_state_leaf(current, expected):
    assert sorted(expected) == sorted(current), (
        "records or state leaves added or removed: regenerate on purpose"
    )
    for policy in golden.POLICIES:
        assert any(k.startswith(f"{policy}/records/") for k in expected)
        assert any(k.startswith(f"{policy}/state/") for k in expected)


@pytest.mark.parametrize("policy", golden.POLICIES)
def test_records_and_final_state_are_bit_identical(current, expected, policy):
    keys = [k for k in expected if k.startswith(f"{policy}/")]
    differ = [
        k
        for k in keys
        if k in current
        and not (
            current[k].dtype == expected[k].dtype
            and current[k].shape == expected[k].shape
            and np.array_equal(current[k], expected[k], equal_nan=True)
        )
    ]
    assert not differ, f"differ from the golden fixture: {differ}"
    assert int(expected[f"{policy}/records/sold"].sum()) > 0  # the fixture plays real days

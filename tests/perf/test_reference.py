"""rbjax.perf.reference: the README's stated main-job times are the reference's, and ``bench --quick``'s comparison
scales them by how this machine's row stands against the reference machines'."""

import re
from pathlib import Path

import pytest

from rbjax.perf import reference

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_states_the_reference_times():
    """The README's main-job line: the reference machine's figures, and the range (those x ``MARGIN``)."""
    text = re.sub(r"\n#\s*", " ", README.read_text())  # the line is a comment in a shell block
    m = re.search(
        r"(\d+) s the first time \(compiling\), (\d+) s after, ([\d.]+) GB; .*?expect (\d+)-(\d+) s and (\d+)-(\d+) s "
        r"\(x ([\d.]+)-([\d.]+)",
        text,
        re.S,
    )
    assert m, (
        "README.md: no main-job line ('A s the first time (compiling), B s after, C GB; ... expect ...')"
    )
    cold, warm, peak, cold_lo, cold_hi, warm_lo, warm_hi, lo, hi = (float(x) for x in m.groups())
    q = reference.QUICK
    assert (cold, warm) == (
        round(q["main_job_cold_s"]),
        round(q["main_job_warm_s"]),
    ) and peak == reference.PEAK_GB
    assert (cold_lo, cold_hi) == reference.MAIN_JOB["cold_s"] and (warm_lo, warm_hi) == reference.MAIN_JOB[
        "warm_s"
    ]
    assert (lo, hi) == reference.MARGIN and reference.MAIN_JOB["cold_s"] == reference.span(
        q["main_job_cold_s"]
    )
    assert reference.WHEN in text


def estimate(lines):
    m = re.search(r"about (\d+) s the first time and (\d+) s after", " ".join(lines))
    return tuple(float(x) for x in m.groups())


def test_the_reference_machine_expects_its_own_main_job_times_inside_the_readmes():
    q = reference.QUICK
    lines = reference.compare(q["store_days_per_s"], q["first_call_s"], 256, 30)
    cold, warm = estimate(lines)  # printed in whole seconds
    assert abs(cold - q["main_job_cold_s"]) <= 0.5 and abs(warm - q["main_job_warm_s"]) <= 0.5
    assert lines[-1].endswith("within the README's range.")


@pytest.mark.parametrize(
    "cold, warm, said",
    [
        ("in", "in", "within"),  # both inside
        ("lo", "lo", "within"),  # both on the lower edges
        ("hi", "hi", "within"),  # both on the upper edges
        ("below", "below", "faster"),
        ("below", "in", "faster"),  # cold below, warm inside
        ("in", "below", "faster"),  # warm below, cold inside
        ("above", "above", "slower"),
        ("in", "above", "slower"),  # cold inside, warm above
        ("below", "above", "slower"),  # mixed, and above is what a user must hear
        ("above", "below", "slower"),
    ],
)
def test_the_three_verdicts_mixed_cases_included(cold, warm, said):
    def at(where, span):
        lo, hi = span
        return {"in": (lo + hi) / 2, "lo": lo, "hi": hi, "below": lo - 1, "above": hi + 1}[where]

    job = reference.MAIN_JOB
    assert reference.verdict(at(cold, job["cold_s"]), at(warm, job["warm_s"])).startswith(said)


def test_the_cold_estimate_scales_compiling_and_days_apart():
    """A machine that compiles at the reference's speed but plays days twice as slowly: the warm estimate
    doubles, the cold one grows by the days only (the reference's cold - warm is compiling)."""
    q = reference.QUICK
    cold, warm = estimate(reference.compare(q["store_days_per_s"] / 2, q["first_call_s"], 256, 30))
    assert abs(warm - 2 * q["main_job_warm_s"]) <= 0.5
    assert abs(cold - (q["main_job_cold_s"] + q["main_job_warm_s"])) <= 0.5


@pytest.mark.parametrize("factor", [2.0, 0.5])
def test_a_faster_or_slower_machine_scales_the_times(factor):
    """Days twice as fast and a first call twice as fast halve the estimates (and the reverse)."""
    q = reference.QUICK
    lines = reference.compare(q["store_days_per_s"] * factor, q["first_call_s"] / factor, 256, 30)
    cold, warm = estimate(lines)
    assert (
        abs(cold - q["main_job_cold_s"] / factor) <= 0.5 and abs(warm - q["main_job_warm_s"] / factor) <= 0.5
    )
    assert f"{factor:.2f}x the reference's" in lines[1] and f"{factor:.2f}x as fast" in lines[2]
    said = "faster than the README's range" if factor > 1 else "slower than the README's range"
    assert said in lines[-1]


def test_another_size_compares_nothing_and_says_why():
    (line,) = reference.compare(1e4, 10.0, 4, 30)
    assert "timed at 256 stores x 30 days" in line and "without --stores" in line

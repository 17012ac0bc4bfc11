"""The README's machine: what the main job and ``rbjax bench --quick`` measured on a CPU of CI's kind.

The README states the main job's times on that machine and the range it expects on others (``MAIN_JOB``: the
figures and a stated margin); ``benchmarks/main_job.py`` fails when a run on a quiet machine of that kind falls
outside the range, and ``tests/perf/test_reference.py`` when the README's text and these numbers part.
``rbjax bench --quick`` times the oracle at ``QUICK_STORES`` stores and compares (``compare``) with that machine,
on which the main job was timed in the same session: a user sees how their machine stands, and what the main
job should take on it.
"""

from __future__ import annotations

MACHINE = "a quiet 2-core x86-64 CPU of CI's kind"
WHEN = "Nov 2026"

# One machine of that kind, quiet, one session (benchmarks/main_job.py, which keeps benchmarks/results/
# main_job.json; tests/test_recorded_results.py holds these to it): rbjax bench --quick (the oracle at QUICK_STORES
# stores on one device per core, QUICK_DAYS days: the second call's store-days/s, the first call's seconds,
# compiling included; medians of three fresh processes) and the main job, rbjax oracle --stores 1000 --days 180
# in a fresh process, with the compilation cache empty (cold) and filled (warm), and its peak resident memory
QUICK_STORES, QUICK_DAYS = 256, 30
QUICK = {"store_days_per_s": 6_063.0, "first_call_s": 47.8, "main_job_cold_s": 74.0, "main_job_warm_s": 41.1}
PEAK_GB = 1.4

# One recorded machine: the README's range is its figure x 0.6 .. x 1.2, a stated margin. Machines of this kind
# drift: the day before, one ran the job cold in 45 s and warm in 26 s (0.61 and 0.63 of these), at 13,636
# store-days/s, which the range keeps inside it
MARGIN = (0.6, 1.2)


def span(figure: float) -> tuple[float, float]:
    """(low, high) whole seconds: ``figure`` x ``MARGIN``."""
    return float(round(figure * MARGIN[0])), float(round(figure * MARGIN[1]))


MAIN_JOB = {
    "cold_s": span(QUICK["main_job_cold_s"]),
    "warm_s": span(QUICK["main_job_warm_s"]),
    "peak_gb": PEAK_GB,
}


def ratios(store_days_per_s: float, first_call_s: float) -> tuple[float, float]:
    """(day rate, first-call speed) of a ``bench --quick`` row as ratios to the reference's; > 1: faster."""
    return store_days_per_s / QUICK["store_days_per_s"], QUICK["first_call_s"] / first_call_s


def compare(store_days_per_s: float, first_call_s: float, stores: int, days: int) -> list[str]:
    """Lines that set a ``bench --quick`` row beside the reference machine's: the day rate and the first call
    (compiling) each as a ratio to the reference's, and the main job's times there scaled by them, beside the
    README's range (``verdict``). The warm run is days: scaled by the day rate. The cold run is those days and
    the compiling the warm run skips (cold - warm there): each part scaled by its own ratio. A row of another
    size than the reference's says so and compares nothing."""
    if (stores, days) != (QUICK_STORES, QUICK_DAYS):
        return [
            f"The reference machine was timed at {QUICK_STORES} stores x {QUICK_DAYS} days; run "
            f"`rbjax bench --quick` without --stores to compare this machine with it."
        ]
    speed, compiling = ratios(store_days_per_s, first_call_s)
    warm = QUICK["main_job_warm_s"] / speed
    cold = (QUICK["main_job_cold_s"] - QUICK["main_job_warm_s"]) / compiling + warm
    (cold_lo, cold_hi), (warm_lo, warm_hi) = MAIN_JOB["cold_s"], MAIN_JOB["warm_s"]
    return [
        f"This machine against the reference (one of the README's machines: {MACHINE}, {WHEN}):",
        f"- the oracle's days: {store_days_per_s:,.0f} store-days/s, {speed:.2f}x the reference's "
        f"({QUICK['store_days_per_s']:,.0f});",
        f"- the first call (compiling, opening, {days} days): {first_call_s:.1f} s, {compiling:.2f}x as fast as "
        f"the reference's ({QUICK['first_call_s']:.1f} s);",
        f"- so `rbjax oracle --stores 1000 --days 180` should take about {cold:.0f} s the first time and "
        f"{warm:.0f} s after (the reference: {QUICK['main_job_cold_s']:.0f} s and "
        f"{QUICK['main_job_warm_s']:.0f} s; the README: {cold_lo:.0f}-{cold_hi:.0f} s and {warm_lo:.0f}-"
        f"{warm_hi:.0f} s, the reference's x {MARGIN[0]}-{MARGIN[1]}): {verdict(cold, warm)}.",
    ]


def verdict(cold: float, warm: float) -> str:
    """Where estimated main-job times (seconds) stand against the README's range: within (both inside), faster
    (neither above it, one below), else slower (either above it)."""
    (cold_lo, cold_hi), (warm_lo, warm_hi) = MAIN_JOB["cold_s"], MAIN_JOB["warm_s"]
    if cold_lo <= cold <= cold_hi and warm_lo <= warm <= warm_hi:
        return "within the README's range"
    if cold <= cold_hi and warm <= warm_hi:
        return "faster than the README's range"
    return "slower than the README's range (if the machine was busy, run it again when it is quiet)"

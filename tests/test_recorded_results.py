"""The figures the README and docs quote equal the result files the benchmarks wrote (``benchmarks/results/``),
so a figure cannot drift from the run behind it, and each file says which run that was."""

import json
from pathlib import Path

import pytest

from rbjax.perf import reference

ROOT = Path(__file__).parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def record(name: str) -> dict:
    data = json.loads((RESULTS / name).read_text())
    for field in ("commit", "machine", "date", "command"):
        assert data.get(field), f"{name} does not say its {field}"
    return data


def pm(stat: dict, digits: int = 0) -> str:
    """'mean ± sd' as the tables write it: whole numbers with thousands separators, ratios with 4 decimals."""
    fmt = f"{{:,.{digits}f}}"
    return f"{fmt.format(stat['mean'])} ± {fmt.format(stat['sd'])}"


def test_the_planners_held_out_headline_is_the_recorded_one():
    rec = record("planner_heldout.json")
    plan, paired = rec["policies"]["plan"], rec["paired"]
    row = (
        f"| lookahead planner, rbjax, {rec['stores']} held-out seeds | {plan['survives']:.0%} |".replace(
            "%", " %"
        )
        + f" {pm(plan['final_net_worth'])} | {pm(plan['total_sales'])} | {pm(plan['expired_ratio'], 4)} |"
    )
    assert row in (ROOT / "README.md").read_text()
    gain = (
        f"**{paired['diff']:+,.0f}** ({paired['low']:+,.0f} .. {paired['high']:+,.0f}), "
        f"**{paired['relative']:+.1%}**"
    ).replace("%", " %")
    assert gain in (ROOT / "docs" / "results.md").read_text()


@pytest.mark.skipif(not (RESULTS / "distill.json").exists(), reason="benchmarks/distill.py has not been run")
def test_the_students_rows_are_the_recorded_ones():
    rec = record("distill.json")
    docs = (ROOT / "docs" / "results.md").read_text()
    for name, row in rec["policies"].items():
        assert f"| {name} | {pm(row['final_net_worth'])} |" in docs, name


def test_the_planner_bases_pairing_is_the_recorded_one():
    """docs/results.md's claim that policy iteration climbs: the planner on the round-2 student's base against
    the shipped planner (benchmarks/planner_bases.py), each mean and the paired difference with its interval."""
    rec = record("planner_bases.json")
    docs = (ROOT / "docs" / "results.md").read_text()
    oracle_base, student_base = (rec["policies"][f"plan (base: {b})"] for b in ("oracle", "distilled"))
    paired = rec["paired"]
    assert f"ends at {pm(student_base['final_net_worth'])} against" in docs
    assert f"shipped planner's {pm(oracle_base['final_net_worth'])} (base" in docs
    gain = f"**{paired['diff']:+,.0f} ({paired['low']:+,.0f} .. {paired['high']:+,.0f}), {paired['relative']:+.1%}**"
    assert gain.replace("%", " %") in docs
    assert f"ahead on {paired['wins']:.0%} of the stores".replace("%", " %") in docs
    assert student_base["survives"] == 1.0 and "every one of its stores survives" in docs
    assert f"({oracle_base['survives']:.0%} under the oracle base)".replace("%", " %") in docs
    assert (rec["stores"], rec["days"]) == (64, 180)
    heldout = record("planner_heldout.json")
    assert rec["seed"] == heldout["seed"]  # the held-out stores of the planner's headline


@pytest.mark.skipif(not (RESULTS / "demos.json").exists(), reason="benchmarks/demos.py has not been run")
def test_the_demonstrations_table_is_the_recorded_one():
    rec = record("demos.json")
    docs = (ROOT / "docs" / "lm_training.md").read_text()
    for teacher, r in rec["teachers"].items():
        openenv = (
            "n/a"
            if r["replayed_same_by_openenv"] is None
            else f"{r['replayed_same_by_openenv']}/{r['tasks']}"
        )
        row = (
            f"| {teacher} | {r['tasks']} | {r['seconds_per_task']:.1f} | {r['mean_reward']:+.4f} | "
            f"{r['calls_per_day']:.1f} | {r['tokens_said_per_day']:,.0f} | {r['tokens_read_per_day']:,.0f} | "
            f"{r['tokens_per_row']:,.0f} | {r['replayed_same_by_session']}/{r['tasks']}, {openenv} |"
        )
        assert row in docs, teacher
        assert r["replayed_same_by_session"] == r["tasks"] and r["replayed_same_by_openenv"] in (
            None,
            r["tasks"],
        )


def main_row(label: str, row: dict, sd_all: bool = True) -> str:
    """A row of the README's headline table: survival, then final net worth, total sales and expired ratio
    (each 'mean ± sd', or the means alone past net worth where ``sd_all`` is False)."""
    survives = f"{row['survives']:.0%}".replace("%", " %")
    if sd_all:
        cells = [pm(row["final_net_worth"]), pm(row["total_sales"]), pm(row["expired_ratio"], 4)]
    else:
        cells = [pm(row["final_net_worth"]), f"{row['total_sales']:,.0f}", f"{row['expired_ratio']:.4f}"]
    return f"| {label} | {survives} | " + " | ".join(cells) + " |"


def test_the_readmes_oracle_and_ppo_rows_are_the_recorded_ones():
    """The oracle's row (benchmarks/fidelity.py) and PPO's (benchmarks/baselines.py, the shipped checkpoint)."""
    readme, docs = (ROOT / "README.md").read_text(), (ROOT / "docs" / "results.md").read_text()
    fidelity = record("fidelity.json")
    oracle = fidelity["runs"]["20"]
    assert main_row(f"oracle, rbjax, {fidelity['stores']:,} seeds", oracle) in readme
    assert f"| final net worth | {pm(oracle['final_net_worth'])} |" in docs
    baselines = record("baselines.json")
    ppo = baselines["policies"]["PPO (greedy)"]
    assert main_row(f"PPO (greedy), rbjax, {baselines['seeds']} seeds", ppo) in readme
    assert f"| PPO (greedy) | 100 % | 180 ± 0 | {pm(ppo['final_net_worth'])} |" in docs


def test_the_readmes_student_rows_are_the_recorded_ones():
    rec = record("distill.json")
    readme = (ROOT / "README.md").read_text()
    last = max(int(k.rsplit(" ", 1)[1]) for k in rec["policies"] if k.startswith("distilled, round"))
    for name, label in (("distilled", "student (privileged)"), ("distilled_belief", "student of plan_obs")):
        row = rec["policies"][f"{name}, round {last}"]
        assert main_row(f"{label}, {rec['stores']} held-out", row, sd_all=False) in readme, name


def test_the_reference_machine_is_the_recorded_one():
    """``rbjax.perf.reference`` (what the README states and ``bench --quick`` compares with) is the record of
    benchmarks/main_job.py: the main job cold and warm, its peak memory, bench --quick's medians."""
    rec = record("main_job.json")
    q = reference.QUICK
    assert q["main_job_cold_s"] == round(rec["runs"]["cold"]["wall"], 1)
    assert q["main_job_warm_s"] == round(rec["runs"]["warm"]["wall"], 1)
    assert round(rec["runs"]["cold"]["peak_gb"], 1) == reference.PEAK_GB
    assert q["store_days_per_s"] == round(rec["quick"]["store_days_per_s"])
    assert q["first_call_s"] == round(rec["quick"]["first_call_s"], 1)
    assert (rec["stores"], rec["days"]) == (1000, 180)


def test_the_readmes_throughput_is_the_recorded_one():
    """The README's day rate is ``bench --quick``'s median on the reference machine, and its ratio to the
    reference simulator's 2 s a simulated day."""
    rate = record("main_job.json")["quick"]["store_days_per_s"]
    text = " ".join((ROOT / "README.md").read_text().split())
    assert f"{rate:,.0f} store-days/s on a 2-core CPU" in text
    assert f"about {round(rate * 2.0, -3):,.0f} times the reference's 2 s a day" in text


def test_the_readmes_gpu_figure_is_the_recorded_one():
    """The README's one GPU figure and the docs' table under it are ``benchmarks/results/gpu.json``'s."""
    rec = record("gpu.json")
    best = rec["headline_store_days_per_s"]
    assert best == max([r["store_days_per_s"] for r in rec["rows"]] + [v["best"] for v in ab(rec).values()])
    gpu = rec["device"].split()[-1]  # "NVIDIA H200": "H200"
    assert f"about {best / 1e6:.0f} million on one {gpu}" in (ROOT / "README.md").read_text()
    docs = (ROOT / "docs" / "performance.md").read_text()
    for r in rec["rows"]:  # benchmarks/gpu.py writes float rates; the docs print them rounded
        row = (
            f"| {r['batch']:,} | {r['resets_per_s']:,} | {r['store_days_per_s']:,.0f} | {r['first_call_s']} |"
        )
        assert row in docs, r["batch"]
    for v in ab(rec).values():
        assert f"{v['best']:,.0f} ({v['median']:,.0f})" in docs, v


def ab(rec: dict) -> dict:
    """The record's A/B of program versions, where it has one (the transcribed record does)."""
    return rec.get("ab_30000_stores", {})


def test_the_readmes_paper_rows_are_the_papers():
    """The paper's rows of the headline table are ``rbjax.results.paper``'s (the paper's published runs)."""
    from rbjax.results import paper

    readme = (ROOT / "README.md").read_text()
    llm = paper.BEST_LLM.replace(" (", ", ").rstrip(")")
    for label, row in (("oracle", paper.ORACLE), (f"best LLM ({llm})", paper.LLM_ROWS[paper.BEST_LLM])):
        cells = f"{row['final_net_worth']:,.0f} | {row['total_sales']:,.0f} | {row['expired_ratio']:.4f}"
        assert f"| {label}, paper's one run | | {cells} | |" in readme, label


def test_the_readmes_suite_times_are_the_recorded_ones():
    """The README's "about N min" for the quick lane and the full suite are benchmarks/suite_time.py's record
    (whole minutes), which also says how fast that machine compiled against the reference."""
    rec = record("test_suite.json")
    text = " ".join((ROOT / "README.md").read_text().replace("\n#", "\n").split())  # the comment lines joined
    quick, full = (round(rec["lanes"][lane]["wall_s"] / 60) for lane in ("quick", "full"))
    assert f"the quick lane for the edit loop (about {quick} min on 2 cores)" in text
    assert f"the full suite as CI runs it (about {full} min;" in text
    assert rec["cores"] == 2 and rec["machine_speed"]["compiling_ratio"] > 0


def test_the_agents_ceiling_is_the_recorded_one():
    """The bracket (benchmarks/ceiling.py): README's row of the observation-only planner, and docs/results.md's
    table of every row paired with the oracle (the student of plan_obs's from distill.json, carried), each hidden
    field's worth, and the value of information, from benchmarks/results/ceiling.json."""
    rec = record("ceiling.json")
    readme, docs = (ROOT / "README.md").read_text(), (ROOT / "docs" / "results.md").read_text()
    rows = rec["policies"]
    planner = rows["plan_obs"]
    survives = f"{planner['survives']:.0%}".replace("%", " %")
    label = "observation-only planner"
    assert f"| {label}, rbjax, {rec['stores']} held-out seeds | {survives} | {pm(planner)} |" in readme
    for name, row in (
        ("honest_oracle", rows["honest_oracle"]),
        ("plan_obs", planner),
        ("distilled_belief", rec["student"]),
    ):
        paired = row["vs_oracle"]
        cells = (
            f"| `{name}` | {pm(row)} | {row['of_oracle']:.0%} | {paired['diff']:+,.0f} "
            f"({paired['low']:+,.0f} .. {paired['high']:+,.0f}) | {paired['wins']:.0%} |"
        ).replace("%", " %")
        assert cells in docs, name
    student = record("distill.json")["policies"]
    last = max(k for k in student if k.startswith("distilled_belief, round"))
    assert rec["student"]["mean"] == student[last]["final_net_worth"]["mean"]  # carried as recorded
    assert f"| `oracle` | {pm(rows['oracle'])} | 100 % |" in docs
    privileged = rec["privileged_planner"]
    assert (
        f"| `plan` (recorded) | {privileged['mean']:,.0f} | {privileged['of_oracle']:.0%} |".replace(
            "%", " %"
        )
        in docs
    )
    assert f"value of information: **{rec['value_of_information']:+,.0f}**" in docs
    for field, worth in rec.get("information", {}).get("honest_oracle_revealed", {}).items():
        gain = worth["gain"]
        assert (
            f"| {field} | {worth['mean']:,.0f} | {gain['diff']:+,.0f} ({gain['low']:+,.0f} .. {gain['high']:+,.0f}) |"
            in docs
        ), field


@pytest.mark.skipif(
    not (RESULTS / "finetune.json").exists(), reason="benchmarks/finetune.py has not been run"
)
def test_the_fine_tunes_rows_and_noise_are_the_recorded_ones():
    """docs/rl.md's table of fine-tuned students (benchmarks/finetune.py) and of what stands in their way
    (benchmarks/finetune_noise.py)."""
    rec, noise = record("finetune.json"), record("finetune_noise.json")
    docs = (ROOT / "docs" / "rl.md").read_text()
    for name, row in rec["policies"].items():
        vs = row["vs_start"]
        paired = f"{vs['diff']:+,.0f} ({vs['low']:+,.0f} .. {vs['high']:+,.0f})".replace("+-", "-")
        paired = "" if name.startswith("distilled") else f" {paired}"
        want = f"| {name} | {pm(row['final_net_worth'])} | {row['of_oracle']:.1%} |{paired} |".replace(
            "%", " %"
        )
        assert want in docs, want
        if "train_s" in row:
            assert f"{row['train_s']:,.0f} s for" in docs and f"{row['gain_per_hour']:+,.0f}" in docs, name
    belief, privileged = (noise["students"][n] for n in ("distilled_belief", "distilled"))
    for field, fmt in (("final_net_worth_sd", "{:,.0f}"), ("days_choosing_differently", "{:.0%}")):
        cell = f"| {fmt.format(belief[field])} | {fmt.format(privileged[field])} |".replace("%", " %")
        assert cell in docs, (field, cell)
    for field in ("same_market_difference_sd", "paired_return_difference_sd", "return_sd"):
        assert f"| {belief[field]:,.0f} | {privileged[field]:,.0f} |" in docs, field

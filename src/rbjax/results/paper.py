"""Reference numbers of the RetailBench paper (hard_v2, 180 days).

Each is one run of the reference simulator, not an expectation over seeds.
"""

from __future__ import annotations

import numpy as np

# main table rows: metric name as in rbjax.metrics -> value
ORACLE = {
    "survival_days": 180,
    "final_net_worth": 131_510.42,
    "total_sales": 267_998,
    "daily_sold_products": 34.48,
    "return_ratio": 0.0201,
    "expired_ratio": 0.0059,
    "stockout_days": 122,
    "acted_per_day": 38.0,
    "supplier_quality_score": 1.0,
    "quality_first": 1.0,
    "price_first": 0.0592,
}
LLM_ROWS = {
    "GPT-5.5 (ReAct)": {
        "survival_days": 180,
        "final_net_worth": 24_350.98,
        "total_sales": 136_405,
        "daily_sold_products": 32.27,
        "return_ratio": 0.0646,
        "expired_ratio": 0.0113,
        "stockout_days": 137,
    },
    "DeepSeek-V4-Pro (Plan-and-Act)": {
        "survival_days": 180,
        "final_net_worth": 10_120.90,
        "total_sales": 164_417,
        "daily_sold_products": 32.57,
        "return_ratio": 0.0858,
        "expired_ratio": 0.0144,
        "stockout_days": 116,
    },
}
BEST_LLM = "GPT-5.5 (ReAct)"  # the best LLM row by net worth

# every LLM run of the paper's archive (run_metrics.csv): (model, framework) -> main-table metrics, plus the
# tool and token rates per day
_RUN_FIELDS = (
    "survival_days final_net_worth total_sales daily_sold_products return_ratio expired_ratio stockout_days "
    "direct_tools_per_day total_tools_per_day tokens_per_day"
).split()
_RUNS = """
MiniMax-M2.5 react 61 1788.24 22384 14.64 0.1041 0.0028 50 19.59 36.97 644315
MiniMax-M2.5 reflection 56 416.97 16819 7.73 0.1041 0.0085 37 34.46 57.30 1277005
MiniMax-M2.5 plan_and_act 73 -397.95 23521 12.08 0.1077 0.0049 52 18.67 40.19 484698
DeepSeek-V4-Pro react 144 -1554.47 134931 30.17 0.0968 0.0573 80 15.47 53.77 383893
DeepSeek-V4-Pro reflection 94 -1792.13 33593 25.98 0.0980 0.0452 73 18.16 58.34 459672
DeepSeek-V4-Pro plan_and_act 180 10120.90 164417 32.57 0.0858 0.0144 116 23.23 62.35 508516
GLM-5.1 react 60 -2134.36 7016 3.97 0.1347 0.0297 14 37.58 39.98 1054511
GLM-5.1 reflection 49 4619.76 6770 6.78 0.1145 0.0086 23 51.84 53.33 1151326
GLM-5.1 plan_and_act 56 -2824.78 739 1.38 0.0338 0.0000 11 36.61 37.36 842540
Kimi-K2.6 react 130 792.19 86214 25.73 0.1226 0.0411 62 26.39 45.76 523108
Kimi-K2.6 reflection 66 5902.33 30783 10.92 0.1121 0.0002 31 58.56 127.88 1026089
Kimi-K2.6 plan_and_act 89 -1996.52 48955 12.13 0.0911 0.0016 58 26.52 46.09 505150
Qwen3.5-397B-A17B react 50 6125.56 32874 26.18 0.0968 0.0345 34 27.34 72.40 1034180
Qwen3.5-397B-A17B reflection 71 1183.17 35622 26.17 0.1047 0.0655 48 19.87 49.76 686103
Qwen3.5-397B-A17B plan_and_act 50 3820.59 30074 23.22 0.1170 0.1055 29 28.30 63.20 939459
Grok-4.3 react 58 828.40 11305 6.74 0.1028 0.0577 24 9.50 10.36 144582
Grok-4.3 reflection 51 787.67 20907 11.73 0.1286 0.1735 18 11.61 12.76 176046
Grok-4.3 plan_and_act 12 22989.16 372 1.67 0.0538 0.0000 5 22.25 23.17 456947
GPT-5.5 react 180 24350.98 136405 32.27 0.0646 0.0113 137 17.09 106.86 176260
"""
RUNS = {
    (model, framework): dict(zip(_RUN_FIELDS, map(float, values)))
    for model, framework, *values in (line.split() for line in _RUNS.strip().splitlines())
}


def run_row(model: str, framework: str) -> tuple[str, dict] | None:
    """The paper's run of ``framework`` by the model whose name ``model`` contains (case-insensitive; a
    served name such as ``Qwen/Qwen3.5-397B-A17B-FP8`` matches), as (label, row); None when there is none."""
    lowered = model.lower()
    for (name, fw), row in RUNS.items():
        if fw == framework and name.lower() in lowered:
            return f"{name} ({fw})", row
    return None


def reference_row(model: str, framework: str) -> tuple[str | None, dict]:
    """The paper's row a run is shown beside, as (label, row). An rbjax policy (``framework`` "policy",
    ``model`` "policy:NAME"): the oracle's row for the oracles and the planners (the ceilings), the best language
    model's (``BEST_LLM``) for any other. A language model: the paper's run of ``framework`` by it
    (``run_row``), or (None, {}) when the paper has none."""
    if framework == "policy":
        if model in ("policy:oracle", "policy:plan", "policy:plan_obs", "policy:honest_oracle"):
            return "oracle", ORACLE
        return BEST_LLM, LLM_ROWS[BEST_LLM]
    return run_row(model, framework) or (None, {})


# the oracle's daily net worth, day 0 (opening) .. day 180
ORACLE_NET_WORTH = np.array(
    [
        30000.00,
        29400.00,
        28800.00,
        28269.57,
        27851.78,
        27617.50,
        27500.23,
        27752.52,
        28193.90,
        28141.27,
        27912.56,
        27680.35,
        27408.91,
        27205.21,
        27597.40,
        28567.57,
        29398.70,
        30106.31,
        30432.81,
        30751.09,
        30765.70,
        30667.37,
        30764.84,
        31090.25,
        31760.29,
        32558.83,
        33296.00,
        34141.88,
        34406.52,
        34954.58,
        35145.62,
        35119.24,
        35041.99,
        34929.01,
        35148.72,
        35345.78,
        36343.84,
        37273.34,
        38214.33,
        39016.97,
        39398.74,
        39708.92,
        40095.08,
        40890.86,
        41682.43,
        41886.52,
        42019.19,
        42189.95,
        42177.77,
        42665.07,
        43738.45,
        44902.89,
        45301.40,
        45797.93,
        46094.90,
        46489.34,
        46641.53,
        47051.62,
        47457.70,
        47749.01,
        48144.34,
        48715.97,
        49483.27,
        49998.35,
        50685.81,
        51074.19,
        51460.81,
        51457.76,
        51446.23,
        51362.22,
        51541.60,
        52115.28,
        52758.29,
        53445.89,
        54256.72,
        55131.95,
        56121.45,
        57174.60,
        58159.09,
        58942.30,
        59084.71,
        59534.74,
        60987.94,
        61433.55,
        61872.00,
        62521.97,
        63088.37,
        63292.14,
        63615.82,
        63837.92,
        64183.77,
        64249.03,
        64970.84,
        65503.21,
        65878.03,
        66368.80,
        66712.26,
        66826.68,
        67232.81,
        67685.58,
        67891.18,
        67963.40,
        68846.92,
        69442.40,
        70488.21,
        71295.85,
        72004.49,
        72711.43,
        73429.14,
        74135.88,
        74648.39,
        75212.91,
        75750.32,
        76482.34,
        76890.12,
        77607.56,
        78543.93,
        79484.01,
        80890.24,
        82271.14,
        84318.43,
        85808.22,
        86721.33,
        87100.22,
        87383.40,
        87454.07,
        87718.81,
        88264.18,
        89321.93,
        90279.26,
        91304.79,
        92390.09,
        93174.14,
        93644.54,
        94350.31,
        94762.06,
        95352.70,
        96017.80,
        96825.54,
        97382.77,
        98175.12,
        98987.49,
        99647.17,
        100013.09,
        100421.91,
        100791.20,
        101258.62,
        101929.95,
        102818.38,
        103524.48,
        104223.26,
        104798.61,
        105468.07,
        106464.48,
        106984.51,
        107954.76,
        108847.55,
        109197.34,
        109467.58,
        109855.29,
        111045.95,
        112430.22,
        114324.13,
        115795.41,
        117130.00,
        118124.84,
        118789.90,
        120050.56,
        121506.63,
        123493.59,
        125317.96,
        126351.12,
        127410.11,
        128303.08,
        129108.66,
        129700.45,
        130793.81,
        131401.78,
        131352.27,
        131392.57,
        131510.42,
    ]
)

# the four-stage diagnostics of every run (four_stage_metrics.csv): (model, framework) -> the columns of
# rbjax.agents.analysis.diagnostics.COLUMNS; the oracle's query depth and missing evidence are its raw values (the
# paper sets them to 1 and 0 by convention)
_FOUR_STAGE_FIELDS = (
    "s1_acted_skus_per_day s1_missed_high_demand_rate s2_query_depth s2_missing_critical_evidence_rate "
    "s3_price_distance_pct s3_quality_rank s3_price_first_rate s3_quality_first_rate "
    "s4_follow_up_action_rate_7d s4_unresolved_event_rate s3_action_correction_rate"
).split()
_FOUR_STAGE = """
MiniMax-M2.5 react 3.2623 0.7447 0.7401 0.8860 32.7990 3.4128 0.5688 0.1972 0.3947 0.0292 0.1447
MiniMax-M2.5 reflection 2.6071 0.8033 0.4662 0.9549 36.2566 3.4295 0.5256 0.1859 0.1967 0.0237 0.1148
MiniMax-M2.5 plan_and_act 2.3973 0.7771 0.7852 0.7236 26.9893 3.4551 0.5899 0.1404 0.3266 0.0170 0.1759
DeepSeek-V4-Pro react 5.3889 0.4527 0.9316 0.2559 26.8556 3.4371 0.5706 0.1915 0.5436 0.0006 0.2201
DeepSeek-V4-Pro reflection 9.6702 0.4171 0.8455 0.4526 38.6649 3.2717 0.5106 0.2370 0.7389 0.0068 0.1807
DeepSeek-V4-Pro plan_and_act 7.8889 0.3286 0.9279 0.2190 25.4611 3.2872 0.5570 0.2326 0.7316 0.0028 0.2705
GLM-5.1 react 0.9500 0.8818 0.8333 0.5185 36.4941 2.5532 0.1702 0.3191 0.0864 0.1737 0.1646
GLM-5.1 reflection 1.3878 0.7346 0.1817 0.9585 40.3257 3.8171 0.6707 0.1098 0.3218 0.4195 0.2595
GLM-5.1 plan_and_act 0.9464 0.8065 0.6368 0.7547 24.1145 2.0000 0.1200 0.5600 0.0000 0.6406 0.2830
Kimi-K2.6 react 3.4538 0.6167 0.9052 0.3104 22.0675 3.8930 0.8135 0.1254 0.4356 0.0082 0.2453
Kimi-K2.6 reflection 3.2727 0.6020 0.9678 0.1142 23.6262 3.7857 0.8175 0.1825 0.8324 0.0000 0.1109
Kimi-K2.6 plan_and_act 3.0899 0.5439 0.9353 0.2492 28.3540 3.3855 0.5531 0.1676 0.5335 0.0042 0.1581
Qwen3.5-397B-A17B react 5.8800 0.6273 0.8524 0.4683 36.9024 3.4810 0.6540 0.1315 0.3665 0.0310 0.1429
Qwen3.5-397B-A17B reflection 4.4648 0.7129 0.7552 0.7964 26.4475 3.5031 0.6188 0.1688 0.3353 0.0138 0.1617
Qwen3.5-397B-A17B plan_and_act 3.7800 0.7164 0.8895 0.3534 34.9793 3.6364 0.4682 0.1318 0.5388 0.0188 0.0884
Grok-4.3 react 1.2414 0.8022 0.5660 1.0000 110.7926 3.3662 0.5493 0.1408 0.2917 0.0667 0.1667
Grok-4.3 reflection 2.4706 0.6742 0.6302 0.9236 33.8051 3.6034 0.5345 0.1207 0.6042 0.0303 0.1597
Grok-4.3 plan_and_act 1.8333 0.5500 0.5824 1.0000 56.8209 3.0333 0.3500 0.2333 0.0220 0.6111 0.1648
GPT-5.5 react 5.1167 0.4993 0.9922 0.0311 17.9164 2.6941 0.4552 0.3465 0.4443 0.0042 0.4444
Oracle quality_based 38.0000 0.0000 0.5395 1.0000 1.9841 1.0000 0.0592 1.0000 0.9936 0.0040 0.8863
"""
FOUR_STAGE = {
    (model, framework): dict(zip(_FOUR_STAGE_FIELDS, map(float, values)))
    for model, framework, *values in (line.split() for line in _FOUR_STAGE.strip().splitlines())
}
for _row in FOUR_STAGE.values():
    _row["s3_supplier_quality_score"] = (5 - _row["s3_quality_rank"]) / 4


def four_stage_row(model: str, framework: str) -> tuple[str, dict] | None:
    """The paper's four-stage row of ``framework`` by the model ``model`` names (as ``run_row``); the
    oracle's for ``policy:oracle``."""
    if model == "policy:oracle":
        return "Oracle (quality_based)", FOUR_STAGE[("Oracle", "quality_based")]
    lowered = model.lower()
    for (name, fw), row in FOUR_STAGE.items():
        if fw == framework and name.lower() in lowered:
            return f"{name} ({fw})", row
    return None

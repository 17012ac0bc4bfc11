"""Cut ``retailbench_mini/`` (the raw-data fixture of ``tests/test_catalog.py``) from the RetailBench folder.

    python tests/assets/make_retailbench_mini.py RETAILBENCH_FOLDER

Four products (four categories, one of them a Fabric Softener that ``upc.json`` labels "Frozen Entrees") and one
more candidate in ``upc.json``; their daily costs and the daily traffic from a few days before ``START`` to a
few days after ``END``; the review files for their categories only. Every file keeps its raw layout (the
records of the demand parameters are copied as text, as their floats are not all written the shortest way).
"""

import datetime as dt
import json
import re
import sys
from pathlib import Path

PRODUCTS = ("3828111129", "7289000011", "1700000515", "1380010423")  # written in the raw file's order
EXTRA_CANDIDATE = "8000000280"  # in upc.json only, as the 32 candidates the demand file leaves out
START, END = dt.date(1991, 9, 1), dt.date(1991, 9, 28)  # tests/test_catalog.py builds this window
OUT = Path(__file__).resolve().parent / "retailbench_mini" / "data" / "dynamic"


def dump(path: Path, value, **kwargs) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False, **kwargs), encoding="utf-8")


def main(source: str) -> None:
    dyn = Path(source) / "data" / "dynamic"
    sim = dyn / "simulate_data" / "15"
    raw = (sim / "sku_model_parameter.json").read_text(encoding="utf-8")
    blocks = dict(re.findall(r'\n  "(\d+)": (\{.*?\n  \})', raw, re.S))
    products = [u for u in blocks if u in PRODUCTS]  # the raw order: it is the product order
    text = "{" + ",".join(f'\n  "{u}": {blocks[u]}' for u in products) + "\n}"
    (OUT / "simulate_data" / "15").mkdir(parents=True, exist_ok=True)
    (OUT / "simulate_data" / "15" / "sku_model_parameter.json").write_text(text, encoding="utf-8")

    rows = json.loads((sim / "upc.json").read_text(encoding="utf-8"))
    dump(OUT / "simulate_data/15/upc.json", [r for r in rows if r["UPC"] in (*products, EXTRA_CANDIDATE)])
    categories = set()
    for i, u in enumerate(products):
        (path,) = sim.glob(f"*/{u}_daily.json")
        categories.add(path.parent.name.replace("_", " "))
        first = (START - dt.timedelta(days=3 + i)).isoformat()  # series that start on different days
        last = (END + dt.timedelta(days=2)).isoformat()
        daily = [r for r in json.loads(path.read_text()) if first <= r["date"] <= last]
        dump(OUT / "simulate_data/15" / path.parent.name / path.name, daily, separators=(",", ":"))

    def day(r):
        return dt.datetime.strptime(r["date"], "%m/%d/%y").date()

    traffic = json.loads((dyn / "customer_number/15/data.json").read_text())
    window = [r for r in traffic if START - dt.timedelta(days=3) <= day(r) <= END + dt.timedelta(days=3)]
    dump(OUT / "customer_number/15/data.json", window)
    for name in ("review_star_smooth_params.json", "begin_effect_point.json", "effect_power.json"):
        per_category = json.loads((dyn / "review" / name).read_text())
        dump(OUT / "review" / name, {c: v for c, v in per_category.items() if c in categories})
    ratings = json.loads((dyn / "review/simulated_ratings.json").read_text())
    dump(
        OUT / "review/simulated_ratings.json",
        {
            "15": {
                c: {u: r for u, r in v.items() if u in products}
                for c, v in ratings["15"].items()
                if c in categories
            }
        },
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/assets/make_retailbench_mini.py RETAILBENCH_FOLDER")
    main(sys.argv[1])

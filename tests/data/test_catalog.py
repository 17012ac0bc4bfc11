"""rbjax.data: the shipped catalogue, its build and its validation."""

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rbjax.data import CatalogError, load_catalog
from rbjax.data import build as build_module
from rbjax.data.build import build
from tests.conftest import SHARED

RAW = Path(SHARED) / "data" / "dynamic"
SHIPPED = Path(__file__).resolve().parents[2] / "data" / "hard_v2"
# The full raw data lives beside the repository (../shared/retailbench), never in it: a clean clone (CI) skips
# the two checks against it. The build itself runs in CI on the cut in tests/assets (test_build_on_a_raw_cut).
needs_shared = pytest.mark.skipif(
    not RAW.is_dir(),
    reason="the full raw data (../shared/retailbench, outside the repository) is absent: the byte-identical "
    "rebuild and the spot values against it are skipped; test_build_on_a_raw_cut builds from tests/assets",
)
MINI = (
    Path(__file__).resolve().parents[1] / "assets" / "retailbench_mini"
)  # tests/assets/make_retailbench_mini.py
MINI_START, MINI_END = dt.date(1991, 9, 1), dt.date(1991, 9, 28)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@needs_shared
def test_rebuild_is_byte_identical(tmp_path):
    build(Path(SHARED), tmp_path)
    for name in ("catalog.npz", "manifest.json"):
        assert (tmp_path / name).read_bytes() == (SHIPPED / name).read_bytes(), name


def _raw(name: str):
    return json.loads((MINI / "data" / "dynamic" / name).read_text(encoding="utf-8"))


def test_build_on_a_raw_cut(tmp_path, monkeypatch):
    """``rbjax.data.build`` on four products and four weeks of the raw files (same layouts), its calendar
    window narrowed to those weeks: every array against the raw values, read here on their own."""
    monkeypatch.setattr(build_module, "DATA_START", MINI_START)
    monkeypatch.setattr(build_module, "DATA_END", MINI_END)
    build(MINI, tmp_path / "a")
    build(MINI, tmp_path / "b")
    for name in ("catalog.npz", "manifest.json"):  # deterministic
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    with np.load(tmp_path / "a" / "catalog.npz") as z:
        c = {k: z[k] for k in z.files}
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())

    demand = _raw("simulate_data/15/sku_model_parameter.json")
    upcs = ["3828111129", "7289000011", "1700000515", "1380010423"]
    assert list(demand) == upcs and c["upc"].tolist() == upcs  # the demand file's order
    for k in ("alpha", "beta", "beta_s", "beta_c", "sigma"):
        assert c[k].tolist() == [demand[u][k] for u in upcs], k
    names = ["Bathroom Tissues", "Beer", "Fabric Softeners", "Frozen Entrees"]  # the folders, alphabetical
    assert c["category_names"].tolist() == names and c["category"].tolist() == [0, 1, 2, 3]
    catalogue = {r["UPC"]: r for r in _raw("simulate_data/15/upc.json")}
    assert len(catalogue) == 5 and catalogue["1700000515"]["CATEGORY"] == "Frozen Entrees"
    assert c["category_ref19"].tolist() == [0, 1, 3, 3]  # upc.json's label for the Fabric Softener
    for field, key in (("shelf_life", "PROMOTION_TIME"), ("description", "DESCRIPTION"), ("brand", "BRAND")):
        assert c[field].tolist() == [catalogue[u][key] for u in upcs], field
    for field in ("price_min", "price_max", "price_p30", "price_p70"):
        assert c[field].tolist() == [catalogue[u][field] for u in upcs], field

    days = (MINI_END - MINI_START).days + 1
    dates = [MINI_START + dt.timedelta(days=i) for i in range(days)]
    traffic = {r["date"]: r["custcoun"] for r in _raw("customer_number/15/data.json")}
    assert c["traffic"].dtype == np.int32
    assert c["traffic"].tolist() == [int(traffic[d.strftime("%m/%d/%y")]) for d in dates]
    assert c["week_index"].tolist() == [(d - dt.date(1989, 9, 7)).days // 7 for d in dates]
    assert c["week_index"][0] == 103 and c["week_index"][6] == 104  # 09/07/91 starts week 104
    folders = ["Bathroom_Tissues", "Beer", "Fabric_Softeners", "Frozen_Entrees"]
    for j, (u, folder) in enumerate(zip(upcs, folders)):
        daily = _raw(f"simulate_data/15/{folder}/{u}_daily.json")
        cost = {r["date"]: r["smoothed_cost_price"] for r in daily}
        assert c["base_cost"][:, j].tolist() == [cost[d.isoformat()] for d in dates], u
        first = dt.date.fromisoformat(daily[0]["date"])
        assert (
            c["cost_series_start"][j] == (first - MINI_START).days == -3 - j
        )  # raw rows from before the window
    gain, ratings = _raw("review/review_star_smooth_params.json"), _raw("review/simulated_ratings.json")["15"]
    assert c["review_poly"].tolist() == [gain[g]["poly_coeffs"] for g in names]
    assert c["review_begin"].tolist() == [_raw("review/begin_effect_point.json")[g] for g in names]
    assert c["review_power"].tolist() == [_raw("review/effect_power.json")[g] / 100 for g in names]
    assert c["anchor_rating"].tolist() == [ratings[names[j]][u] for j, u in enumerate(upcs)]

    assert manifest["calendar"]["days"] == days and manifest["calendar"]["index_0"] == "1991-09-01"
    for source in manifest["sources"].values():  # the raw files it read, by checksum
        assert source["sha256"] == hashlib.sha256((MINI / source["path"]).read_bytes()).hexdigest()
    with pytest.raises(CatalogError, match=r"field 'upc' has shape \(4,\), expected \(96,\)"):
        load_catalog(tmp_path / "a")


def test_shipped_files_are_small():
    assert sum(f.stat().st_size for f in SHIPPED.iterdir()) < 5 * 2**20


def test_products_and_categories(catalog):
    assert catalog.num_products == 96 and catalog.num_categories == 20
    sizes = dict(zip(catalog.category_names, np.bincount(catalog.category, minlength=20)))
    assert sizes.pop("Beer") == 3 and sizes.pop("Toothpastes") == 3
    assert set(sizes.values()) == {5}
    ref = dict(zip(catalog.category_names, np.bincount(catalog.category_ref19, minlength=20)))
    assert ref["Fabric Softeners"] == 0 and ref["Frozen Entrees"] == 10


@needs_shared
def test_spot_values_equal_raw(catalog):
    demand = json.loads((RAW / "simulate_data/15/sku_model_parameter.json").read_text())
    upc = "3828111129"
    j = catalog.upc.index(upc)
    for k in ("alpha", "beta", "beta_s", "beta_c", "sigma"):
        assert getattr(catalog, k)[j] == demand[upc][k]
    traffic = {
        r["date"]: r["custcoun"] for r in json.loads((RAW / "customer_number/15/data.json").read_text())
    }
    assert catalog.traffic[catalog.day_of("1991-09-07")] == int(traffic["09/07/91"])
    daily = json.loads((RAW / "simulate_data/15/Bathroom_Tissues/3828111129_daily.json").read_text())
    row = next(r for r in daily if r["date"] == "1992-01-15")
    assert catalog.base_cost[catalog.day_of("1992-01-15"), j] == row["smoothed_cost_price"]
    gain = json.loads((RAW / "review/review_star_smooth_params.json").read_text())
    g = catalog.category_names.index("Cigarettes")
    assert catalog.review_poly[g, 2] == gain["Cigarettes"]["poly_coeffs"][2]
    upcs = {r["UPC"]: r for r in json.loads((RAW / "simulate_data/15/upc.json").read_text())}
    assert catalog.shelf_life[j] == upcs[upc]["PROMOTION_TIME"]


def test_calendar(catalog):
    assert catalog.day_of("1991-06-06") == 0 and catalog.day_of("1991-09-07") == 93
    assert catalog.week_index[93] == 104  # week 0 starts 09/07/89: w = 104 at the opening
    with pytest.raises(CatalogError, match="outside the data window"):
        catalog.day_of("1996-01-01")


def test_summary_is_readable(catalog):
    text = str(catalog)
    assert "96 products in 20 categories" in text and "Fabric Softeners 5" in text


def _copy(tmp_path):
    out = tmp_path / "cat"
    shutil.copytree(SHIPPED, out)
    return out


def _rewrite(path, **changes):
    with np.load(path / "catalog.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        arrays.pop(k)
    np.savez(path / "catalog.npz", **arrays)
    manifest = json.loads((path / "manifest.json").read_text())  # as a rebuild would: a matching checksum
    manifest["files"]["catalog.npz"]["sha256"] = hashlib.sha256(
        (path / "catalog.npz").read_bytes()
    ).hexdigest()
    (path / "manifest.json").write_text(json.dumps(manifest))
    return arrays


def test_missing_file(tmp_path):
    out = _copy(tmp_path)
    (out / "catalog.npz").unlink()
    with pytest.raises(CatalogError, match="missing data file .*catalog.npz"):
        load_catalog(out)


def test_corrupt_file(tmp_path):
    out = _copy(tmp_path)
    (out / "catalog.npz").write_bytes(b"not a zip")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"]["catalog.npz"]["sha256"] = hashlib.sha256(b"not a zip").hexdigest()
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CatalogError, match="catalog.npz: not a readable"):
        load_catalog(out)


def test_missing_field(tmp_path):
    out = _copy(tmp_path)
    _rewrite(out, sigma=None)
    with pytest.raises(CatalogError, match="field 'sigma' is missing"):
        load_catalog(out)


def test_nan_names_field(tmp_path, catalog):
    out = _copy(tmp_path)
    alpha = catalog.alpha.copy()
    alpha[7] = np.nan
    _rewrite(out, alpha=alpha)
    with pytest.raises(CatalogError, match=r"field 'alpha' has a NaN .*\[7\].*without parameters"):
        load_catalog(out)


def test_wrong_shape_and_dtype(tmp_path, catalog):
    out = _copy(tmp_path)
    _rewrite(out, traffic=catalog.traffic[:-1])
    with pytest.raises(CatalogError, match="field 'traffic' has shape"):
        load_catalog(out)
    _rewrite(out, traffic=catalog.traffic.astype(np.float64))
    with pytest.raises(CatalogError, match="field 'traffic' has dtype float64"):
        load_catalog(out)


def test_checksum_mismatch_names_the_file(tmp_path):
    out = _copy(tmp_path)
    data = bytearray((out / "catalog.npz").read_bytes())
    data[-100] ^= 0xFF  # one flipped byte, the manifest unchanged
    (out / "catalog.npz").write_bytes(bytes(data))
    with pytest.raises(CatalogError, match=r"catalog.npz: sha256 .* does not match the manifest"):
        load_catalog(out)


@pytest.mark.parametrize(
    "field, change, message",
    [
        ("price_min", lambda c: c.price_max + 1.0, "'price_min' exceeds 'price_p30'"),
        ("base_cost", lambda c: -c.base_cost, "'base_cost' must be positive"),
        ("shelf_life", lambda c: np.zeros_like(c.shelf_life), "'shelf_life' must be positive"),
        ("anchor_rating", lambda c: c.anchor_rating + 1.0, "'anchor_rating' must lie in"),
        ("traffic", lambda c: -c.traffic, "'traffic' has a negative customer count"),
    ],
)
def test_semantic_ranges_name_the_field(tmp_path, catalog, field, change, message):
    out = _copy(tmp_path)
    _rewrite(out, **{field: change(catalog)})
    with pytest.raises(CatalogError, match=message):
        load_catalog(out)

"""rbjax.data: the shipped catalogue, its build and its validation."""

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rbjax.data import CatalogError, load_catalog
from rbjax.data.build import build
from tests.conftest import SHARED

RAW = Path(SHARED) / "data" / "dynamic"
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "hard_v2"
needs_shared = pytest.mark.skipif(
    not RAW.is_dir(), reason="../shared/retailbench is absent: raw-data checks skipped"
)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@needs_shared
def test_rebuild_is_byte_identical(tmp_path):
    build(Path(SHARED), tmp_path)
    for name in ("catalog.npz", "manifest.json"):
        assert (tmp_path / name).read_bytes() == (SHIPPED / name).read_bytes(), name


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

"""Notebooks stay runnable (each is executed top to bottom) and ship executed, with their figures."""

import json
from pathlib import Path

import pytest
from helpers import need

pytestmark = pytest.mark.slow  # executes the notebooks

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _figures(cells) -> int:
    return sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path):
    nbformat = need("nbformat")  # dev dependencies: a skip where they are missing, a failure under CI
    nbclient = need("nbclient")
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    assert any(o.get("output_type") == "stream" for c in nb.cells for o in c.get("outputs", []))
    assert _figures(nb.cells) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_ships_executed_with_figures(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in cells), "run the notebook and save it with its outputs"
    assert not any(o.get("output_type") == "error" for c in cells for o in c.get("outputs", []))
    assert _figures(cells) >= 1

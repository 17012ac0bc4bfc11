"""The docs are a manual whose figures have files behind them (issue 84).

- Every figure of 1,000 or more in ``docs/results.md``, ``docs/rl.md`` and ``docs/performance.md`` is a number of
  some file under ``benchmarks/results/`` (a JSON value or key, or a CSV cell), equal once rounded as the page
  rounds it. A figure is a number written with thousands separators ("71,760", "1,307.5"), a plain run of four
  or more digits ("5120", "20261128"), or a number with a scale word ("2M", "1.5 million", "6k"); signs are
  ignored (a paired "-60,313" is the file's -60313.2). The paper's published runs (``rbjax.results.paper``:
  its oracle's and language models' rows, which rbjax quotes beside its own) count as a results file. Not
  figures: dates (ISO "2026-11-29", "Nov 2026", "Nov 29 2026", "3 Dec 2026") and the constants of
  ``CONSTANTS`` below, each with its reason and the code that defines it. Digits joined to letters or ``_`` are
  names, not figures (``day_090``, ``ab_30000_stores``, a Python literal ``1_000_000``, a commit ``7b650bd``).
  Code spans and fenced blocks count like prose: a command's flag is held as much as a table's cell.
- The docs together stay under ``MAX_DOCS_BYTES``.
- Every relative link of README.md and docs/*.md reaches a file, and a heading of it where the link names one
  (GitHub's anchors: the heading's text lower-cased, punctuation but ``-`` and ``_`` dropped, spaces as ``-``).
"""

import contextlib
import csv
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"
HELD = ("results.md", "rl.md", "performance.md")
MAX_DOCS_BYTES = 150_000

# numbers of 1,000 or more that are not measurements, so no results file need hold them: value -> (why, the
# source file that defines it, the line there), so a constant changed in the code fails here until the docs follow
CONSTANTS: dict[float, tuple[str, str, str]] = {
    4000: (
        "the cash reserve decoded orders keep for the rent",
        "src/rbjax/rl/actions.py",
        "FUNDS_RESERVE = 4_000",
    ),
}

SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "million": 1e6, "billion": 1e9}
MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
FIGURE = re.compile(
    r"(?<![\w.,])"  # not the tail of a longer token
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s?(?P<scale>million|billion|[kKM])\b)?"
    r"(?![\w,]*\d)"  # not the head of an identifier or a longer number
)
DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b(?:\d{{1,2}} )?(?:{MONTHS})[a-z]*\.?(?: \d{{1,2}},?)? \d{{4}}\b"
)


def figures(text: str) -> list[tuple[float, float, str]]:
    """(value, rounding step, as written) of every figure of 1,000 or more in ``text``."""
    text = DATE.sub(" ", text)
    out = []
    for m in FIGURE.finditer(text):
        num, scale = m.group("num"), m.group("scale")
        digits = num.replace(",", "")
        if not scale and "," not in num and len(digits.split(".")[0]) < 4:
            continue
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        factor = SCALE[scale] if scale else 1.0
        value = float(digits) * factor
        if value >= 1000:
            out.append((value, factor * 10.0**-decimals, m.group(0)))
    return out


def recorded_numbers() -> list[float]:
    """Every number of every file under benchmarks/results/: JSON values and keys, CSV cells."""
    found: list[float] = []

    def add(x) -> None:
        if isinstance(x, bool):
            return
        if isinstance(x, (int, float)):
            found.append(abs(float(x)))
        elif isinstance(x, str):
            with contextlib.suppress(ValueError):  # a string that is not one number is text
                found.append(abs(float(x.replace(",", ""))))

    def walk(x) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                add(k)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        else:
            add(x)  # a number, or a string that is one number ("6,791")

    for path in sorted(RESULTS.rglob("*")):
        if path.suffix == ".json":
            walk(json.loads(path.read_text()))
        elif path.suffix == ".csv":
            with path.open() as f:
                for row in csv.reader(f):
                    for cell in row:
                        add(cell)
    from rbjax.results import paper

    for row in [paper.ORACLE, *paper.LLM_ROWS.values(), *paper.RUNS.values()]:
        walk(row)
    return [x for x in found if math.isfinite(x)]


def backed(value: float, step: float, numbers: list[float]) -> bool:
    """Some recorded number rounds to ``value`` at the page's precision ``step`` (half a step either side)."""
    return any(abs(x - value) <= step / 2 * (1 + 1e-9) for x in numbers)


def unbacked(text: str, numbers: list[float]) -> list[str]:
    return [
        written
        for value, step, written in figures(text)
        if value not in CONSTANTS and not backed(value, step, numbers)
    ]


def test_the_figure_rule():
    text = (
        "ends at 71,760 ± 17,775 (-60,313 .. +2,418); 5120 labels, 2M steps, 1.5 million, 6k, 0.0218, 999, "
        "on 2026-11-29 (Nov 2026, Nov 29 2026, 3 Dec 2026), µs 69,724.2, files ppo_hard_v2 and a1000b, 3^5, 1e-3"
    )
    written = [w for _, _, w in figures(text)]
    assert written == ["71,760", "17,775", "60,313", "2,418", "5120", "2M", "1.5 million", "6k", "69,724.2"]
    numbers = [71760.4, 17775.2, 60312.9, 2418.0, 5120, 2_000_000, 1_530_000, 6_400, 69_724.24]
    assert unbacked(text, numbers) == []
    assert unbacked(text, [71761.0]) and unbacked("made 1,234.5", [1234.56]) == ["1,234.5"]


@pytest.mark.parametrize("page", HELD)
def test_every_figure_has_a_results_file_behind_it(page):
    missing = unbacked((DOCS / page).read_text(), recorded_numbers())
    assert not missing, f"docs/{page}: figures no file under benchmarks/results/ holds: {missing}"


def test_the_constants_say_why_and_are_the_codes():
    for value, (reason, source, line) in CONSTANTS.items():
        assert reason.strip() and line in (ROOT / source).read_text(), (value, source, line)


def test_the_docs_stay_a_manual_in_size():
    total = sum(p.stat().st_size for p in DOCS.glob("*.md"))
    assert total < MAX_DOCS_BYTES, f"docs/*.md: {total:,} bytes, over {MAX_DOCS_BYTES:,}"


FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str) -> str:
    """``text`` without fenced blocks and code spans."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_slug_is_githubs():
    assert slug("RL past the students: `rbjax train ppo --init STUDENT`") == (
        "rl-past-the-students-rbjax-train-ppo---init-student"
    )
    assert slug("The agent's ceiling") == "the-agents-ceiling"


def links(path: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(path.read_text()))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


@pytest.mark.parametrize("page", ["README.md"] + sorted(f"docs/{p.name}" for p in DOCS.glob("*.md")))
def test_every_relative_link_reaches_its_file_and_heading(page):
    source = ROOT / page
    broken = []
    for target in links(source):
        file, _, anchor = target.partition("#")
        dest = (source.parent / file).resolve() if file else source
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page}: {broken}"

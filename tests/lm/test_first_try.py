"""docs/lm_training.md opens with a first try that finishes in minutes: its bash block, run line by line as the
page gives it (in this process, so that the commands share the suite's compiled programs; the page's times are a
fresh process's), ends with every demonstration replayed the same."""

import re
import shlex
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "lm_training.md"


def first_try() -> list[list[str]]:
    """The commands of the first fenced bash block under "## First try", each as its arguments after ``rbjax``."""
    text = DOC.read_text()
    section = text[text.index("## First try") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    lines = [shlex.split(line) for line in block.splitlines() if line.strip()]
    assert lines and all(words[0] == "rbjax" for words in lines), block
    return [words[1:] for words in lines]


def test_the_first_try_is_first_and_small():
    """It is the page's first section, and small: a few stores, a few days."""
    text = DOC.read_text()
    assert text.index("## First try") == text.index("\n## ") + 1
    for args in first_try():
        for flag in ("--stores", "--days", "--slots"):
            if flag in args:
                assert int(args[args.index(flag) + 1].split(",")[0]) <= 30, (flag, args)


@pytest.mark.slow
def test_the_first_try_runs_as_the_page_gives_it(tmp_path, monkeypatch, capsys):
    from rbjax.cli import main

    monkeypatch.chdir(tmp_path)
    for args in first_try():
        try:
            main(args)
        except SystemExit as done:  # a refusal: one line on stderr
            raise AssertionError((args, done.code, capsys.readouterr().err[-2000:])) from None
    out = capsys.readouterr().out
    assert re.search(r"replayed (\d+) rows: \1 the same, 0 differ", out), out[-2000:]
    assert (tmp_path / "first_try" / "demos.jsonl").stat().st_size > 0

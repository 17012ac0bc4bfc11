"""The tools' descriptions say what their texts hold (markdown tables, lists, lines; JSON for one tool), as the
texts of ``tests/assets/tool_texts.json`` are, and every face shows the same description of each tool."""

import ast
import json
from pathlib import Path

import pytest

from rbjax.agents.tools.specs import TOOL_NAMES, TOOL_SPECS, describe, openai_functions

REPO = Path(__file__).resolve().parents[2]
TEXTS = json.loads((REPO / "tests" / "assets" / "tool_texts.json").read_text())
SPECS = {s["name"]: s for s in TOOL_SPECS}


def texts_of(name: str) -> list[str]:
    """The contract's texts of successful calls of tool ``name``."""
    return [r["text"] for r in TEXTS if r["call"] == name and not r["text"].startswith("Error")]


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_a_description_says_what_the_text_holds(name):
    spec, text = SPECS[name], describe(SPECS[name])
    assert "{" not in text and "}" not in text, "no JSON shape: the texts are tables, lists and lines"
    assert spec["returns"].startswith("Returns ") and "Returns result as" not in text
    # transformers (TRL's tool schemas) cuts a description at the first "Args:", "Returns:" or "Raises:"
    assert not any(word in text for word in ("Args:", "Returns:", "Raises:"))
    shown = texts_of(name)
    if name == "execute_code":  # no text of it in the contract; sandbox.render's sections
        return
    assert shown, f"tool_texts.json has no text of {name}"
    tables = any("|---" in t for t in shown)
    assert tables == ("markdown table" in spec["returns"]), spec["returns"]
    is_json = any(t.lstrip().startswith("{") for t in shown)
    assert is_json == ("JSON" in spec["returns"]), spec["returns"]


def test_execute_code_describes_its_sections():
    from rbjax.agents.sandbox.parent import render

    text = render({"stdout": "hi", "result": {"a": 1}, "error": "boom"})
    assert "### Output" in text and "### Return Value" in text and "### Error" in text
    returns = SPECS["execute_code"]["returns"]
    assert "printed" in returns and "return value" in returns and "error" in returns
    assert render({}).endswith("(No output)") and "(No output)" in returns


def test_every_face_shows_the_same_descriptions():
    from rbjax.agents.llm.prompts import Prompts
    from rbjax.lm.faces.trl_env import RetailEnvironment

    want = {s["name"]: describe(s) for s in TOOL_SPECS}
    assert {f["function"]["name"]: f["function"]["description"] for f in openai_functions()} == want
    system = Prompts().system("react", 100.0, TOOL_NAMES)  # the LLM runner's prompt lists the functions
    assert all(json.dumps(d)[1:-1] in system for d in want.values())
    trl = {name: getattr(RetailEnvironment, name).__doc__.split("\n\n")[0] for name in TOOL_NAMES}
    assert trl == want
    assert verifiers_face_descriptions() == want


def verifiers_face_descriptions() -> dict:
    """{tool: description} of ``lm_faces/rbjax_retail``'s toolset, read from its source (it needs verifiers to
    import): each ``@vf.tool`` method's docstring on one line, as the face gives it to the model."""
    source = (REPO / "lm_faces" / "rbjax_retail" / "rbjax_retail" / "tools.py").read_text()
    tree = ast.parse(source)
    toolset = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RetailTools")
    return {
        f.name: " ".join(ast.get_docstring(f).split())
        for f in toolset.body
        if isinstance(f, ast.AsyncFunctionDef) and any(ast.unparse(d) == "vf.tool" for d in f.decorator_list)
    }

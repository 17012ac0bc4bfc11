"""Settings declared once: the episode length is ``rbjax.config.EPISODE_DAYS`` and the env's options are
``rbjax.env.EnvOptions``; no module writes the number 180 or the options' defaults again, and no module keeps its
own cache of envs or programs (``rbjax.programs`` holds them: one ``clear()``)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "rbjax"
# where 180 is another fact than the episode's length
OTHER_180 = {
    "config.py": "EPISODE_DAYS itself",
    "results/paper.py": "the paper's published rows (its runs' survival days)",
    "params.py": "the tier cycle's length range, UniformInt[120, 180], a model fact",
}


def numbers(path: Path, value) -> list[int]:
    """Lines of ``path`` where the constant ``value`` is written in code (docstrings and comments aside)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == value
    ]


def test_the_episode_length_is_written_once():
    written = {
        str(p.relative_to(PACKAGE)): lines
        for p in PACKAGE.rglob("*.py")
        if (lines := numbers(p, 180)) and str(p.relative_to(PACKAGE)) not in OTHER_180
    }
    assert not written, f"use rbjax.config.EPISODE_DAYS (or EnvOptions.days): {written}"


def test_no_module_caches_envs_or_programs_of_its_own():
    """No ``functools.cache``/``lru_cache`` on a function of an env, and no module-level dict, set or list
    that the code fills with envs, pools or programs, outside ``rbjax.programs``."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        name = str(path.relative_to(PACKAGE))
        if name == "programs.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                cached = any("cache" in ast.unparse(d) for d in node.decorator_list)
                takes_env = any(a.arg in ("env", "engine", "pool") for a in node.args.args)
                if cached and (takes_env or node.name in ("make_policy",)):
                    found.append(f"{name}:{node.lineno} {node.name} is cached")
        # module-level holders: NAME = {} / dict() / WeakSet() filled with envs or pools
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                text = ast.unparse(node.value) if node.value is not None else ""
                label = ast.unparse(target)
                holds = any(w in label.upper() for w in ("POOL", "PROGRAM", "ENV", "LIVE"))
                if holds and text in ("{}", "dict()", "weakref.WeakSet()", "None", "[]"):
                    found.append(f"{name}:{node.lineno} {label} = {text}")
    assert not found, found

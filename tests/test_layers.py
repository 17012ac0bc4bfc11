"""The whole package's house: each layer imports only the layers below it (``LAYERS``, written in docs/api.md),
no module takes part in an import circle, and no module, benchmark or example imports another module's private
name. Imports inside functions count as much as those at the top."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "rbjax"
# lowest first; a module may import its own layer and those before it
LAYERS = (
    ("kernels",),
    ("data", "shipped"),
    ("counts", "arguments", "config", "params", "checks", "state"),
    ("model", "results"),
    ("env", "day_loop", "programs"),
    ("policies",),
    ("files",),
    ("runners",),
    ("perf",),
    ("rl", "wrappers"),
    ("agents",),
    ("lm",),
    ("cli",),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every ``import``/``from ... import`` in ``path`` (absolute imports only)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
    return out


def layer(module: str) -> int | None:
    """The layer of an ``rbjax`` module (its index in ``LAYERS``); None for the package's root and entry."""
    parts = module.split(".")
    if parts[0] != "rbjax" or len(parts) < 2:
        return None
    return next((i for i, names in enumerate(LAYERS) if parts[1] in names), None)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def test_every_module_has_a_layer():
    loose = [m for m in modules() if layer(m) is None and m not in ("rbjax", "rbjax.__main__")]
    assert not loose, f"modules of no layer (add their folder to LAYERS and docs/api.md): {loose}"


def test_each_layer_imports_only_the_layers_below():
    upward = []
    for name, path in modules().items():
        here = layer(name)
        for module, names in imported(path):
            for target in [module, *(f"{module}.{n}" for n in names)]:
                there = layer(target)
                if here is not None and there is not None and there > here:
                    upward.append(f"{path.relative_to(ROOT)} ({LAYERS[here][0]}) imports {target}")
    assert not upward, upward
    # the check can fail: the language-model layer sits above the agents, the CLI above everything
    assert layer("rbjax.lm.session") > layer("rbjax.agents.runs.loop") > layer("rbjax.runners.rollout")
    assert layer("rbjax.cli.lm") == len(LAYERS) - 1


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports} (a name imported from a package counts as its module)."""
    mods = modules()
    graph = {m: set() for m in mods}
    for name, path in mods.items():
        for module, names in imported(path):
            for target in [*(f"{module}.{n}" for n in names), module]:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target not in (name, "rbjax") and not name.startswith(target + "."):
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_takes_part_in_an_import_circle():
    assert not circles(import_graph())
    # the check can fail: a circle of three is found, a chain is not
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert not circles({"a": {"b"}, "b": {"c"}, "c": set()})


def test_no_private_name_crosses_a_module():
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "examples").glob("*.py")]
    private = [
        f"{path.relative_to(ROOT)}: from {module} import {n}"
        for path in files
        for module, names in imported(path)
        if module.split(".")[0] == "rbjax"
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    assert not private, private


MAX_FUNCTION_LINES, MAX_MODULE_LINES = 80, 450


def long_functions(source: str) -> list[str]:
    """'name (n lines)' of each function or method in ``source`` longer than ``MAX_FUNCTION_LINES``."""
    return [
        f"{node.name} ({n} lines)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
    ]


def test_functions_and_command_modules_stay_short():
    """No function of the package over 80 lines (a longer one does several jobs), no module over 450 outside
    ``agents/`` (whose tools and runs keep the benchmark's texts whole)."""
    long = {
        str(p.relative_to(PACKAGE)): f for p in PACKAGE.rglob("*.py") if (f := long_functions(p.read_text()))
    }
    assert not long, long
    modules = [p for p in PACKAGE.rglob("*.py") if "agents" not in p.relative_to(PACKAGE).parts]
    big = {
        str(p.relative_to(PACKAGE)): n
        for p in modules
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not big, big
    # the check can fail: a function one line too long is seen
    assert long_functions("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES) == [
        f"f ({MAX_FUNCTION_LINES + 1} lines)"
    ]

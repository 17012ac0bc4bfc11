"""One day loop: a store's days run in ``rbjax.day_loop`` (``scan_days``, and ``in_chunks`` for a Python loop over
chunks of days), nowhere else.

The source of ``src/rbjax`` is read (``ast``): every ``lax.scan`` and every Python ``for``/``while`` loop over days
(its range or condition names a day, or it adds to a day) must be the one loop's or stand in ``ALLOWED`` with the
reason it is not a store's days played by a policy. The agent engine (``src/rbjax/agents/``) is left out: its days
end when an agent's tools end them, one call at a time.
"""

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "rbjax"

# (file under src/rbjax, enclosing function, "scan" or "loop") -> why it is not a store's days played by a policy
ALLOWED = {
    ("day_loop.py", "scan_days", "scan"): "the one day loop",
    ("day_loop.py", "in_chunks", "loop"): "the one day loop's chunks: a Python loop over calls of scan_days",
    (
        "model/preopening.py",
        "simulate",
        "scan",
    ): "the pre-opening history the tools show: no store, no policy",
    (
        "rl/finetune/update.py",
        "discounted_returns",
        "scan",
    ): "backward over recorded rewards: no store is stepped",
    ("rl/finetune/update.py", "gae", "scan"): "backward over recorded rewards: no store is stepped",
    ("rl/finetune/update.py", "learn.epoch", "scan"): "minibatches of an epoch, not days",
    ("rl/finetune/update.py", "learn", "scan"): "epochs, not days",
    ("rl/ppo.py", "_gae", "scan"): "GAE backward over a recorded trajectory: no store is stepped",
    ("rl/ppo.py", "_epoch", "scan"): "minibatches of an epoch, not days",
    ("rl/ppo.py", "make_parts.learn", "scan"): "epochs, not days",
    ("rl/ppo.py", "make_train.train", "scan"): "PPO's updates, not days",
    ("rl/ppo.py", "make_parts.collect", "scan"): (
        "PPO's rollout: T days of a batch that resets each store as its episode ends (a fresh store in the same "
        "slot), with the training's own keys; not the episode loop scan_days runs (issue 84 leaves it)"
    ),
    (
        "cli/slices.py",
        "run_saving_states",
        "loop",
    ): "segments between snapshots, each one rollout (the one loop)",
    ("lm/demos.py", "_days", "loop"): (
        "a language model's sessions: a day ends when the session's end_today is called, as the agent engine's"
    ),
}


def _is_scan(call: ast.Call) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr == "scan" and "lax" in ast.unparse(f.value)


def _names_a_day(node: ast.AST) -> bool:
    """Whether an expression names a day (a name or attribute with ``day`` in it)."""
    for n in ast.walk(node):
        name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
        if "day" in name.lower():
            return True
    return False


def _is_loop_over_days(node: ast.AST) -> bool:
    if isinstance(node, ast.For):
        it = node.iter
        return isinstance(it, ast.Call) and ast.unparse(it.func) == "range" and _names_a_day(it)
    if not isinstance(node, ast.While):
        return False
    counts_days = any(isinstance(n, ast.AugAssign) and _names_a_day(n.target) for n in ast.walk(node))
    return _names_a_day(node.test) or counts_days  # ``while day < days`` or ``while True: ... day += 1``


def found(root: Path = SRC) -> dict:
    """{(file, enclosing function, kind): line} of every day loop candidate under ``root`` (agents/ left out)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("agents/"):
            continue

        def visit(node, where):
            for child in ast.iter_child_nodes(node):
                inner = where
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    inner = f"{where}.{child.name}" if where else child.name  # a method: Class.method
                if isinstance(child, ast.Call) and _is_scan(child):
                    out.setdefault((rel, where, "scan"), child.lineno)
                if _is_loop_over_days(child):
                    out.setdefault((rel, where, "loop"), child.lineno)
                visit(child, inner)

        visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def test_no_day_loop_outside_the_one_loop():
    stray = {
        f"{f}:{line} ({fn}, a {kind})"
        for (f, fn, kind), line in found().items()
        if (f, fn, kind) not in ALLOWED
    }
    assert not stray, "a day loop outside rbjax.day_loop (use scan_days / in_chunks): " + "; ".join(
        sorted(stray)
    )


def test_the_allowed_loops_are_still_there():
    """An allowed entry that names nothing any more goes from ``ALLOWED`` (a list of reasons that stays true)."""
    gone = set(ALLOWED) - set(found())
    assert not gone, f"ALLOWED names loops that are no longer in the source: {sorted(gone)}"


def test_the_search_finds_a_scan_and_a_loop_over_days(tmp_path):
    (tmp_path / "x.py").write_text(
        "import jax\n"
        "def future(h):\n"
        "    return jax.lax.scan(f, 0, h)\n"
        "def collect(settings):\n"
        "    for day in range(settings.days):\n"
        "        pass\n"
        "    for i in range(3):\n"
        "        pass\n"
        "def play(done):\n"
        "    while True:\n"
        "        done += 1\n"
        "def play_days(n):\n"
        "    while True:\n"
        "        day += n\n"
    )
    want = {("x.py", "future", "scan"): 3, ("x.py", "collect", "loop"): 5, ("x.py", "play_days", "loop"): 13}
    assert found(tmp_path) == want


class _Counter:
    """A model of one number a store: the action is added to it (``scan_days`` needs ``step`` and
    ``privileged``)."""

    def privileged(self, state, params):
        return None

    def step(self, key, state, action, params):
        return state + action, state + action, 0.0, False, False, state


def test_a_watch_branching_on_the_day_stays_a_branch_under_vmap():
    """The loop's day is ``first_day`` plus the index: given unbatched (``in_axes=None``) under ``vmap`` over
    stores, a ``lax.cond`` on it in the watch stays a ``cond`` (only its days compute the branch, as the labels'
    mornings do); given per store, ``vmap`` turns it into a select of both branches."""
    import jax
    import jax.numpy as jnp

    from rbjax.day_loop import scan_days

    def run(first_day_axis):
        def one(obs, state, key, first_day):
            watch = lambda day, obs, privileged, state, action, k: jax.lax.cond(  # noqa: E731
                day % 2 == 0, lambda s: jnp.sin(s), lambda s: 0.0 * s, state
            )
            policy = lambda params, obs, privileged, key: jnp.ones_like(obs)  # noqa: E731
            return scan_days(
                _Counter(), policy, None, None, obs, state, key, first_day, 4, lambda i: i, watch
            )

        f = jax.vmap(one, in_axes=(0, 0, 0, first_day_axis))
        first = jnp.int32(0) if first_day_axis is None else jnp.zeros(3, jnp.int32)
        keys = jax.random.split(jax.random.key(0), 3)
        return str(jax.make_jaxpr(f)(jnp.zeros(3), jnp.zeros(3), keys, first))

    assert " cond[" in run(None)
    assert " cond[" not in run(0)

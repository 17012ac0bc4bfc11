"""The belief student (``distilled_belief``, ``StudentConfig(belief=True)``), the student of ``plan_obs``: it reads
no hidden field, its candidates add the belief's supplier moves, its teacher is the agent-view planner, and it
trains, saves and loads by its name from Python and from the command line.

The shipped checkpoint's row is checked with the other students' in ``tests/rl/test_distill.py``.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from hidden_fields import changed, oracle_morning
from test_distill import TINY, TINY_FLAGS

from rbjax import policies
from rbjax.policies import OracleParams, belief_state
from rbjax.policies.honest_oracle import honest_oracle
from rbjax.policies.planner import default_params
from rbjax.rl.distill import Student, StudentConfig, belief_inputs, labels, load

BELIEF = StudentConfig(privileged=False, belief=True, hidden=16)
# one round: a later round's teacher is checked without compiling (test_a_later_rounds_teacher_is_still_...)
TINY_BELIEF = dataclasses.replace(TINY, student=BELIEF, rounds=1)


@pytest.fixture(scope="module")
def morning(env, params):
    return oracle_morning(env, params, 6)


def test_the_kinds_and_their_checks():
    assert StudentConfig.of_kind("belief").kind == "belief" and StudentConfig().kind == "privileged"
    assert StudentConfig.of_kind("observed") == StudentConfig(privileged=False)
    with pytest.raises(ValueError, match="privileged=False"):
        StudentConfig(privileged=True, belief=True)
    with pytest.raises(ValueError, match="one of privileged, observed, belief"):
        StudentConfig.of_kind("oracle")
    moves = default_params(OracleParams.default())
    assert Student(BELIEF).candidate_count(moves) == moves.candidate_count() + belief_inputs.SUPPLIER_MOVES
    assert Student(StudentConfig()).candidate_count(moves) == moves.candidate_count() == 9


@pytest.mark.slow  # compiles the belief and a student
def test_the_belief_student_reads_no_hidden_field(env, params, morning):
    """Each hidden field changed alone (and a fixed world in the params): its action, features and candidates do
    not move. The same student given the true quality of today's quotes in place of the belief's moves, so the
    comparison can fail."""
    obs, state = morning
    student = Student(BELIEF)
    sp = student.init(jax.random.key(0))
    fields = list(belief_state.HIDDEN)
    cases = [(state, params)] + [(changed(state, f), params) for f in fields]
    cases.append((state, params.replace(world=changed(state, "world.key").world)))

    def run():
        one = jax.jit(
            lambda s, p: (
                student(sp, obs, env.privileged(s, p)),
                student.inputs(sp.planner, obs, env.privileged(s, p)),
            )
        )
        return [jax.tree.leaves(one(s, p)) for s, p in cases]

    out = run()
    for name, got in zip([*fields, "the params' world"], out[1:]):
        for a, b in zip(out[0], got):
            np.testing.assert_array_equal(a, b, err_msg=f"the belief student read {name}")
    truthful = belief_state.honest_view

    def leaky(seen, public, belief, category):  # ``visible`` patched below: ``seen`` is the true state
        return truthful(seen, public, belief, category).replace(quote_quality=seen.suppliers.quote_quality)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(belief_state, "visible", lambda s: s)
        m.setattr(belief_state, "honest_view", leaky)
        out = run()
    moved = fields.index("suppliers.quote_quality") + 1
    assert not all(np.array_equal(a, b) for a, b in zip(out[0], out[moved])), (
        "reading the quality went unseen"
    )


@pytest.mark.slow
def test_its_anchor_is_the_honest_oracle_and_its_moves_change_supplier(env, params, reset):
    """Tied scores play candidate 0, the honest oracle's action; the two last candidates place the anchor's units
    with the suppliers ``supplier_moves`` names (on an opening morning, when the anchor orders)."""
    obs, state = reset(jax.random.key(3), params)
    student = Student(BELIEF)
    sp = student.init(jax.random.key(0))
    sp = sp.replace(net=jax.tree.map(jnp.zeros_like, sp.net))
    privileged = env.privileged(state, params)
    got = jax.jit(student)(sp, obs, privileged)
    want = jax.jit(honest_oracle)(OracleParams.default(), obs, privileged)
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(x, y)
    anchor, candidates, (products, _, _) = jax.jit(student.inputs)(sp.planner, obs, privileged)
    assert products.shape == (env.config.num_products, student.features)
    _, public, belief = belief_state.belief_of(state, params)
    moves = np.asarray(belief_inputs.supplier_moves(belief, obs))
    units = np.asarray(anchor.order).sum(-1)
    assert units.sum() > 0
    for i, k in enumerate(moves):
        order = np.asarray(candidates.order)[sp.planner.candidate_count() + i]
        np.testing.assert_array_equal(order.sum(-1), units)
        np.testing.assert_array_equal(order[np.arange(len(k)), k], units)
    assert (moves[0] != np.asarray(anchor.order).argmax(-1))[units > 0].any()  # a move that changes something


def test_a_later_rounds_teacher_is_still_plan_obs_on_the_oracle(env):
    """Round 0 plays the anchor, a later round the last student: the belief student's teacher is the agent-view
    planner on the oracle and its params in both (its labels do not follow the rounds' students), where the
    observed student's later teacher plays on with that student (so the check can fail)."""
    moves = default_params(OracleParams.default())
    for config, follows in ((BELIEF, False), (StudentConfig(privileged=False, hidden=16), True)):
        student = Student(config)
        last = student.init(jax.random.key(0), moves, env.config.num_products)
        for policy, policy_params in ((student.anchor, moves.base), (student, last)):
            planner, plan_params = labels.teacher(env, student, moves, policy, policy_params, TINY.labels)
            plays_on = policy if follows else policies.oracle
            assert planner.settings.base == plays_on and planner.settings.view == (
                "state" if follows else "agent"
            )
            want = moves.replace(base=policy_params) if follows else moves
            assert jax.tree.structure(plan_params) == jax.tree.structure(want)
            jax.tree.map(np.testing.assert_array_equal, plan_params, want)


@pytest.mark.slow
def test_train_distill_student_belief_is_taught_by_the_agent_view_and_loads_by_name(
    env, tmp_path, monkeypatch, capsys
):
    """``rbjax train distill --student belief`` (in this process, so the teacher's settings can be watched): the
    round's teacher is the agent-view planner on the oracle (``plan_obs``), the student chooses among C + 2
    candidates, and the checkpoint loads as ``distilled_belief`` and only as it (one round: a later round's
    teacher is the test above's)."""
    from rbjax.cli import main

    built = []
    real = labels.Planner

    def spy(model, settings):
        built.append(settings)
        return real(model, settings)

    monkeypatch.setattr(labels, "Planner", spy)
    out = tmp_path / "s"
    main(  # TINY's flags with one round (argparse keeps the last --rounds)
        ["--devices", "1", "train", "distill", "--student", "belief", *TINY_FLAGS.split(), "--rounds", "1"]
        + ["--hidden", "16"]
        + ["--out", str(out)]
    )
    assert f"rbjax run --policy distilled_belief --checkpoint {out}" in capsys.readouterr().out
    assert {s.view for s in built} == {"agent"} and {s.base for s in built} == {policies.oracle}
    student, config = load(out, env)
    assert config == TINY_BELIEF
    curve = pd.read_csv(out / "curve.csv")
    C = Student(BELIEF).candidate_count(student.planner)
    L = TINY.labels
    assert (curve.simulated_store_days == L.stores * L.label_days * C * L.futures * L.horizon).all()
    made, _ = policies.make("distilled_belief", env, str(out))
    assert made == Student(BELIEF)
    with pytest.raises(ValueError, match="holds a belief student: load it as the policy 'distilled_belief'"):
        policies.make("distilled_obs", env, str(out))

"""The TRL face (``rbjax.lm.faces.trl_env``) without TRL or torch: the protocol ``GRPOTrainer(environment_factory=
...)`` relies on (``reset(**row)``, public methods as tools with type hints and Google-style docstrings,
``get_reward()``), and rewards equal to a session's."""

import inspect
import json

import pytest

from rbjax.agents.tools.specs import TOOL_NAMES, TOOL_SPECS, describe
from rbjax.lm.faces.trl_env import RetailEnvironment, environment_class

pytestmark = pytest.mark.slow  # a slices run, its tool history and the session programs


@pytest.fixture(scope="module")
def rows(tasks_file):
    RetailEnvironment.slots, RetailEnvironment.pool = 8, None
    return [json.loads(line) for line in tasks_file.read_text().splitlines()]


def tools_of(env):
    """The methods TRL (1.16) turns into tools: the class's public functions but reset and get_reward, bound."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def test_the_default_slots_are_a_generation_batch_and_classes_are_configured():
    # TRL's default generation batch (GRPOConfig's per_device_train_batch_size 8), not 256 stores to compile
    assert RetailEnvironment.__dict__["slots"] == 8
    small, beat = environment_class(slots=2), environment_class(slots=3.0, reward="beat")
    assert (small.slots, small.reward, beat.slots, beat.reward) == (2, "relative", 3, "beat")
    assert issubclass(small, RetailEnvironment) and small.__name__ == "RetailEnvironment"  # TRL's reward name
    assert (
        small.__dict__["pool"] is None and beat.__dict__["pool"] is None
    )  # each its own pool, made at a reset
    assert sorted(tools_of(small())) == sorted(TOOL_NAMES)
    for bad, message in (({"slots": 0}, "slots"), ({"slots": 2.5}, "slots"), ({"reward": "win"}, "reward")):
        with pytest.raises(ValueError, match=message):
            environment_class(**bad)


def test_every_tool_is_a_documented_typed_method():
    tools = tools_of(RetailEnvironment())
    assert sorted(tools) == sorted(TOOL_NAMES)
    for spec in TOOL_SPECS:  # the description every face shows, before the Google-style sections
        assert tools[spec["name"]].__doc__.split("\n\n")[0] == describe(spec), spec["name"]
    for name, method in tools.items():
        sig = inspect.signature(method)
        assert sig.return_annotation is str, name
        for p in sig.parameters.values():
            assert p.annotation is not inspect.Parameter.empty, (name, p.name)
            assert f"    {p.name}: " in method.__doc__, (name, p.name)
    order = inspect.signature(tools["place_order"])
    assert order.parameters["items"].annotation == list[dict]
    assert order.parameters["supplier_id"].default is inspect.Parameter.empty
    assert inspect.signature(tools["view_sales_profit_history"]).parameters["supplier_id"].default is None


def test_transformers_reads_the_tool_schemas():
    utils = pytest.importorskip("transformers.utils")
    tools = tools_of(RetailEnvironment())
    schema = utils.get_json_schema(tools["place_order"])
    assert schema["function"]["name"] == "place_order"
    assert set(schema["function"]["parameters"]["required"]) == {"items", "supplier_id"}
    for spec in TOOL_SPECS:  # transformers cuts a description at "Args:" or "Returns:"
        assert utils.get_json_schema(tools[spec["name"]])["function"]["description"] == describe(spec)


def play(env, row, order: bool):
    morning = env.reset(**row)
    assert "Current date:" in morning
    env.view_funds_and_date()
    if order:
        first = env.session.tools.names.skus[0]
        env.place_order(items=[{"sku_id": first, "quantity": 30}], supplier_id="supplier_1")
    env.end_today()
    return env.get_reward()


def test_rewards_follow_the_calls_and_equal_a_sessions(rows):
    a, b, idle = RetailEnvironment(), RetailEnvironment(), RetailEnvironment()
    ra, rb = play(a, rows[0], order=True), play(b, rows[0], order=True)
    assert ra == rb and a.session.info()["daily"] == b.session.info()["daily"]
    r_idle = play(idle, rows[0], order=False)
    pool = RetailEnvironment.pool
    s = pool.open(idle.session.task)
    s.finish()
    assert r_idle == s.reward and r_idle != ra
    for env, reward in ((a, ra), (idle, r_idle)):  # each day's credit, summing to the relative reward
        assert len(env.turn_rewards) == env.session.info()["days_played"]
        assert sum(env.turn_rewards) == pytest.approx(reward, rel=1e-9, abs=1e-12)
    assert RetailEnvironment().turn_rewards is None
    pool.close(s)
    assert len(pool.free) == pool.slots  # get_reward freed every slot
    assert "Unknown SKU" in (a.reset(**rows[1]) and a.view_sku_prices(sku_ids=["nope"]))
    with pytest.raises(RuntimeError, match="reset"):
        RetailEnvironment().view_inventory()


def test_a_full_pool_names_slots(rows):
    one = environment_class(slots=1)
    a, b = one(), one()
    a.reset(**rows[0])
    a.reset(**rows[1])  # a reset frees the instance's own slot first
    with pytest.raises(RuntimeError, match=r"RetailEnvironment.slots is 1.*per_device_train_batch_size"):
        b.reset(**rows[0])
    a.get_reward()  # frees the slot
    assert "Current date:" in b.reset(**rows[0])
    assert one.pool.slots == 1 and one.pool is not RetailEnvironment.pool
    b.get_reward()

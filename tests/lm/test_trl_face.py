"""The TRL face (``rbjax.lm.faces.trl_env``) without TRL or torch: the protocol ``GRPOTrainer(environment_factory=
...)`` relies on (``reset(**row)``, public methods as tools with type hints and Google-style docstrings,
``get_reward()``), and rewards equal to a session's."""

import inspect
import json

import pytest

from rbjax.agents.tools.specs import TOOL_NAMES
from rbjax.lm.faces.trl_env import RetailEnvironment

pytestmark = pytest.mark.slow  # a slices run, its tool history and the session programs


@pytest.fixture(scope="module")
def rows(tasks_file):
    RetailEnvironment.slots, RetailEnvironment.pool = 8, None
    return [json.loads(line) for line in tasks_file.read_text().splitlines()]


def tools_of(env):
    """The methods TRL turns into tools: every public bound method but reset and get_reward."""
    return {
        name: m
        for name, m in inspect.getmembers(env, predicate=inspect.ismethod)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def test_every_tool_is_a_documented_typed_method():
    tools = tools_of(RetailEnvironment())
    assert sorted(tools) == sorted(TOOL_NAMES)
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
    schema = utils.get_json_schema(tools_of(RetailEnvironment())["place_order"])
    assert schema["function"]["name"] == "place_order"
    assert set(schema["function"]["parameters"]["required"]) == {"items", "supplier_id"}


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
    pool.close(s)
    assert len(pool.free) == pool.slots  # get_reward freed every slot
    assert "Unknown SKU" in (a.reset(**rows[1]) and a.view_sku_prices(sku_ids=["nope"]))
    with pytest.raises(RuntimeError, match="reset"):
        RetailEnvironment().view_inventory()

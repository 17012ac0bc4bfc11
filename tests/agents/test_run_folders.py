"""Run folders are data: checkpoints are never pickles, an old pickled checkpoint is never unpickled, and a
truncated or tampered checkpoint, run.json, slices.json, snapshot, trace or records.npz is a one-line
ValueError (or ``rbjax: ...`` exit) naming the file and the field. Two stores and three days for the one
run that needs the engine; every other folder is written by hand (no compilation)."""

import json
import pickle

import jax
import numpy as np
import pytest
from llm_runs import FailsOn, play

from rbjax.agents.runs.llm_agents import RunPaused
from rbjax.cli import main

END_PAYLOAD = {
    "funds": 1000.0,
    "net_worth": 1000.0,
    "sales_by_sku": {},
    "returns_by_sku": {},
    "expired_discount_by_sku": {},
    "insufficient_skus": [],
}
END = {
    "tool": "end_today",
    "call_source": "direct",
    "issued_by": "runner",
    "args": {},
    "result": {"result": END_PAYLOAD, "formatted": "Day ended."},
    "rb_store": 0,
    "rb_day": 1,
    "rb_turn": 0,
    "rb_call": 0,
}


class Marker:
    """A pickle whose reading creates ``path`` (what a shared pickled checkpoint could do, harmlessly)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def one_line_error(fn, *args, **kw) -> str:
    with pytest.raises(ValueError) as e:
        fn(*args, **kw)
    assert "\n" not in str(e.value), str(e.value)
    return str(e.value)


def cli_error(*argv) -> str:
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    message = str(e.value)
    assert message.startswith("rbjax: ") and "\n" not in message, message
    return message


def rewrite_npz(path, **changes):
    """``path`` again with some members replaced (None: removed)."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for k, v in changes.items():
        if v is None:
            arrays.pop(k)
        else:
            arrays[k] = v
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def hand_made_run(folder, records=(END,)):
    """A one-store, one-day run folder: run.json and a trace (no engine run)."""
    (folder / "store_0").mkdir(parents=True)
    run = {"model": "m", "framework": "react", "stores": 1, "days": 1, "seed": 0}
    (folder / "run.json").write_text(json.dumps(run | {"grouping": "20", "supplier_attempts": 1}))
    (folder / "store_0" / "tool_calls.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


# ---------------------------------------------------------------------------------------------- checkpoints
def test_checkpoints_are_data_and_old_pickles_are_never_read(env, params, tmp_path):
    from rbjax.agents.engine.batch import AgentEngine
    from rbjax.agents.runs.checkpoints import load_checkpoint

    out = tmp_path / "run"
    with pytest.raises(RunPaused):
        play(env, params, out, FailsOn(day=3))  # days 1 and 2 checkpointed
    path = out / "store_1" / "checkpoint.npz"
    assert not list(out.glob("store_*/checkpoint.pkl"))
    with np.load(path, allow_pickle=False) as z:  # arrays and strings only: no object to unpickle
        meta = json.loads(str(z["meta"]))
        assert meta["store"] == 1 and meta["days"] == 2 and meta["ledger"]["filled"] > 0
        assert z["records.alive"].shape == (2,) and all(z[k].dtype != object for k in z.files)

    good = path.read_bytes()
    engine = AgentEngine(env, params.replace(horizon=np.int32(3)), jax.random.split(jax.random.key(0), 2))
    assert load_checkpoint(str(path), engine, 1)["days"] == 2
    where = str(path)
    path.write_bytes(good[: len(good) // 2])  # truncated
    assert f"{where}: not a readable checkpoint" in one_line_error(load_checkpoint, where, engine, 1)
    bad_meta = dict(meta, ledger=dict(meta["ledger"], filled="abc"))
    for change, field in [
        ({"meta": np.asarray(json.dumps(bad_meta))}, "field 'ledger.filled' must be an int in 0.."),
        ({"meta": np.asarray(json.dumps(dict(meta, store=0)))}, "field 'store' must be 1"),
        ({"engine.state.funds": np.zeros(3, np.float64)}, "field 'engine.state.funds' must be an array"),
        ({"ledger.price": None}, "field 'ledger.price' must be an array"),
        ({"records.alive": np.ones(5, bool)}, "field 'records.alive' must be an array of shape (2,)"),
        ({"meta": np.asarray('{"format": 1')}, "not a readable checkpoint"),
        ({"meta": np.asarray(json.dumps(dict(meta, news_today=[])))}, "field 'news_today' must be a list of"),
    ]:
        path.write_bytes(good)
        rewrite_npz(path, **change)
        message = one_line_error(load_checkpoint, where, engine, 1)
        assert message.startswith(f"{where}: ") and field in message, message
    created = meta["ledger"]["first_cal"] + meta["ledger"]["filled"] - 1
    line = {"product": 0, "units": 5, "unit_price": 1.0, "line_cost": 5.0, "quality": 4.0}
    order = {"order_id": "o", "supplier": 0, "created": created, "arrival": created + 2, "lines": [line]}
    orders = [dict(order, cost=5.0, call=0)]
    path.write_bytes(good)
    rewrite_npz(path, meta=np.asarray(json.dumps(dict(meta, ledger=dict(meta["ledger"], orders=orders)))))
    assert load_checkpoint(where, engine, 1)["ledger"].orders[0].units == 5  # an order as the tools keep it
    for change, field in [  # values the tools would later turn into an OverflowError
        ({"arrival": 10**9}, "field 'ledger.orders[0].arrival' must be an int in 0.."),
        ({"lines": [dict(orders[0]["lines"][0], units=10**30)]}, "field 'ledger.orders[0].lines[0].units'"),
        ({"cost": float("inf")}, "field 'ledger.orders[0].cost' must be a number"),
    ]:
        tampered = dict(meta, ledger=dict(meta["ledger"], orders=[dict(orders[0], **change), *orders[1:]]))
        path.write_bytes(good)
        rewrite_npz(path, meta=np.asarray(json.dumps(tampered)))
        message = one_line_error(load_checkpoint, where, engine, 1)
        assert field in message, message
    path.write_bytes(good)
    with open(path, "wb") as f:  # an object member (a pickle inside the .npz): refused, never unpickled
        np.savez(f, meta=np.asarray([Marker(tmp_path / "npz_marker")], dtype=object))
    assert "not a readable checkpoint" in one_line_error(load_checkpoint, where, engine, 1)
    assert not (tmp_path / "npz_marker").exists()

    path.write_bytes(good)  # an older rbjax's checkpoint.pkl beside it: the resume refuses, reads nothing
    marker = tmp_path / "unpickled"
    (out / "store_0" / "checkpoint.pkl").write_bytes(pickle.dumps(Marker(marker)))
    message = one_line_error(play, env, params, out, FailsOn(), resume=True)
    assert "holds checkpoints of an older rbjax (store_0/checkpoint.pkl" in message, message
    assert message.endswith("start the run again with overwrite") and not marker.exists()  # the parameter


# ---------------------------------------------------------------------------------------------- run.json, traces
def test_tampered_run_json_traces_and_records_are_one_line_errors(tmp_path):
    from rbjax.agents.analysis import replay
    from rbjax.agents.runs import folder

    run = hand_made_run(tmp_path / "run")
    settings = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(settings | {"seed": "7"}))
    assert "run.json: field 'seed' must be an int" in one_line_error(folder.read_settings, str(run))
    for change, field in [
        ({"days": 3_000_000_000}, "field 'days' must be an int in 1..1,000,000"),
        ({"seed": 2**40}, "field 'seed' must be an int in 0..2**32 - 1"),
        ({"stores": 10**12}, "field 'stores' must be an int in 1..10,000,000"),
    ]:
        (run / "run.json").write_text(json.dumps(settings | change))
        assert field in cli_error("agents", "rescore", run), field
    (run / "run.json").write_text(json.dumps(settings)[:25])  # truncated
    assert "run.json: not a readable run.json" in cli_error("agents", "diagnose", run)
    (run / "run.json").write_text(json.dumps(settings))

    trace = run / "store_0" / "tool_calls.jsonl"
    for record, field in [
        (dict(END, args=["x"]), "line 1: field 'args' must be a JSON object"),
        (dict(END, rb_turn="1"), "line 1: field 'rb_turn' must be an int"),
        (
            dict(END, result={"result": dict(END_PAYLOAD, sales_by_sku=["a"])}),
            "line 1: field 'result.result.sales_by_sku' must be a JSON object of numbers",
        ),
        (
            dict(END, result={"result": dict(END_PAYLOAD, funds=float("inf"))}),
            "line 1: field 'result.result.funds' must be a number",
        ),
        (
            dict(END, result={"result": dict(END_PAYLOAD, sales_by_sku={"x": 10**400})}),
            "line 1: field 'result.result.sales_by_sku' must be a JSON object of numbers",
        ),
    ]:
        trace.write_text(json.dumps(record) + "\n")
        assert f"{trace}, {field}" in one_line_error(replay.replay, str(run)), field
        assert f"{trace}, {field}" in cli_error("agents", "diagnose", run), field
    trace.write_text("[1, 2]\n")
    assert f"{trace}, line 1: not a trace record" in cli_error("agents", "diagnose", run)
    trace.write_text(json.dumps(END) + "\n")
    (run / "store_0" / "tokens.jsonl").write_text(json.dumps({"total_tokens": "many"}) + "\n")
    assert "tokens.jsonl, line 1: field 'total_tokens' must be a number" in cli_error(
        "agents", "diagnose", run
    )
    (run / "store_0" / "tokens.jsonl").unlink()

    records = run / "records.npz"
    np.savez(records, alive=np.asarray([["yes"]]))
    assert f"{records}: field " in one_line_error(replay.replay, str(run))
    assert f"{records}: field " in cli_error("agents", "diagnose", run)
    with open(records, "wb") as f:  # a pickled member is refused, never unpickled
        np.savez(f, alive=np.asarray([Marker(tmp_path / "marker")], dtype=object))
    assert f"{records}: not a readable records file" in cli_error("agents", "diagnose", run)
    assert not (tmp_path / "marker").exists()
    records.unlink()
    (run / "four_stage_metrics.csv").write_bytes(b"\xff\xfe\x00 not a table")  # the run's own CSV, unreadable
    message = cli_error("agents", "rescore", run, "--traces-only")
    assert "four_stage_metrics.csv: not a readable table of the run" in message, message


# ---------------------------------------------------------------------------------------------- slices
def test_tampered_slices_json_and_snapshots_are_one_line_errors(env, tmp_path):
    from rbjax.files import snapshots

    folder = tmp_path / "slices"
    folder.mkdir()
    snap = folder / "day_005.npz"
    meta = {
        "format": snapshots.FORMAT,
        "version": snapshots.VERSION,
        "day": "abc",
        "stores": 2,
        "key_impl": "threefry2x32",
        "config": snapshots._config_dict(env.config),
        "catalog": snapshots.catalog_fingerprint(env.catalog),
        "params": None,
    }
    np.savez(snap, meta=np.asarray(json.dumps(meta)))
    message = one_line_error(snapshots.load, snap, env)
    assert message.startswith(f"{snap}: field 'meta.day' must be an int"), message
    np.savez(snap, meta=np.asarray(json.dumps(meta | {"day": 5})), keys=np.zeros((2, 2), np.float32))
    assert f"{snap}: field 'keys' must be an array of shape (2, 2) and dtype uint32" in one_line_error(
        snapshots.load, snap, env
    )
    np.savez(snap, meta=np.asarray(json.dumps(meta | {"day": 5, "key_impl": "os.system"})))
    assert f"{snap}: field 'meta.key_impl'" in one_line_error(snapshots.load, snap, env)
    for missing in ("key_impl", "params"):
        kept = {k: v for k, v in meta.items() if k != missing} | {"day": 5}
        np.savez(snap, meta=np.asarray(json.dumps(kept)))
        assert f"{snap}: field 'meta.{missing}'" in one_line_error(snapshots.load, snap, env), missing
    snap.write_bytes(snap.read_bytes()[:30])  # truncated
    assert f"{snap}: not a readable snapshot file" in one_line_error(snapshots.load, snap, env)

    manifest = {"policy": "oracle", "seed": 0, "grouping": "20", "supplier_attempts": 1, "days": 10}
    out = tmp_path / "out"
    for content, field in [
        (json.dumps(manifest | {"policy": 5}), "slices.json: field 'policy' must be a policy name"),
        (json.dumps(manifest | {"supplier_attempts": "50"}), "slices.json: field 'supplier_attempts'"),
        (json.dumps(manifest)[:20], "slices.json: not a readable slices manifest"),
        (json.dumps(manifest | {"days": 2**40}), "slices.json: field 'days' must be an int in 1.."),
    ]:
        (folder / "slices.json").write_text(content)
        message = cli_error(
            "agents", "run", "--model", "policy:oracle", "--from-states", folder, "--out", out
        )
        assert field in message, message

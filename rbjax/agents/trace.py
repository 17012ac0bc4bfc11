"""``tool_calls.jsonl``: one JSON line per tool call, in the reference's record format plus rbjax fields.

Reference fields: ts, tool, call_source (direct | execute_code), args, result {result, formatted}, funds,
net_worth and current_date after the call, elapsed_time, action_executed (for place_order,
modify_sku_price, end_today), parent_tool (inner calls). rbjax fields: rb_store, rb_day (1-based),
rb_turn, rb_call (index within the day), issued_by (model | runner). Only ts and elapsed_time depend on
timing; everything else is a function of the store's calls.
"""

from __future__ import annotations

import datetime as dt
import json
import os

from rbjax.agents.specs import ACTION_TOOLS

TIMING_FIELDS = ("ts", "elapsed_time")
MAX_FIELD = 1_000_000  # characters of JSON kept of a call's arguments or payload


def record(store, name, args, payload, text, ok, elapsed, index, issued_by, source) -> dict:
    """The trace record of one call of ``store`` (a ``tools.StoreTools``)."""
    t = store.today
    rec = {
        "ts": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "tool": name,
        "call_source": source,
        "args": args,
        "result": {"result": payload, "formatted": text},
        "funds": float(store.draft.funds),
        "net_worth": float(t.net_worth),
        "current_date": store.names.date(t.cal),
        "elapsed_time": round(elapsed, 4),
    }
    if source == "execute_code":
        rec["parent_tool"] = "execute_code"
    if name in ACTION_TOOLS:
        rec["action_executed"] = bool(ok)
    if isinstance(payload, dict) and "status" in payload:
        rec["result_status"] = payload["status"]
    rec |= {
        "rb_store": store.store,
        "rb_day": t.day + 1,
        "rb_turn": store.turn,
        "rb_call": index,
        "issued_by": issued_by,
    }
    return rec


class TraceWriter:
    """Buffered JSONL writer of one store's records, flushed at the end of every day."""

    def __init__(self, path: str, resume_at: int | None = None):
        """A new, empty file; or, with ``resume_at`` (a size from ``flushed_size``), the file cut back to the
        records written by then (a resumed run rewrites what came after its checkpoint). A file shorter
        than ``resume_at`` is an error: it is never padded."""
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.path = path
        self.buffer: list[str] = []
        if resume_at:
            size = os.path.getsize(path) if os.path.exists(path) else 0
            if size < resume_at:
                raise ValueError(
                    f"{path}: {size:,} bytes, less than the {resume_at:,} its checkpoint recorded "
                    "(the folder was changed after the checkpoint)"
                )
        with open(path, "a" if resume_at else "w") as f:
            f.truncate(resume_at or 0)

    def flushed_size(self) -> int:
        self.flush()
        return os.path.getsize(self.path)

    def write(self, rec: dict) -> None:
        line = json.dumps(rec, ensure_ascii=False, default=_plain)
        if len(line) > MAX_FIELD:  # a huge argument or payload is replaced by its size (the text is capped)
            rec = dict(rec, args=_capped(rec.get("args")), result=dict(rec["result"]))
            rec["result"]["result"] = _capped(rec["result"].get("result"))
            line = json.dumps(rec, ensure_ascii=False, default=_plain)
        self.buffer.append(line)

    def flush(self) -> None:
        """Append the buffered records and fsync them: a checkpoint that records this size never points
        past what is on disk. (Appending, not rewriting the file, keeps a day's flush cheap; whatever a
        killed run appended after its last checkpoint is cut off by the resume.)"""
        if self.buffer:
            with open(self.path, "a") as f:
                f.write("\n".join(self.buffer) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self.buffer = []


def _capped(value):
    n = len(json.dumps(value, ensure_ascii=False, default=_plain))
    return value if n <= MAX_FIELD else {"rb_cut": f"{n:,} characters of JSON, over the trace's limit"}


def _plain(x):
    """numpy scalars in payloads as Python numbers."""
    return x.item() if hasattr(x, "item") else str(x)


def read(path: str, timing: bool = True) -> list[dict]:
    """The records of a trace file; ``timing=False`` drops the fields that depend on wall time."""
    recs = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                recs.append(json.loads(line))
            except ValueError as e:
                raise ValueError(f"{path}, line {number}: not a trace record ({e})") from None
    if not timing:
        for r in recs:
            for k in TIMING_FIELDS:
                r.pop(k, None)
    return recs

"""A TRL face: ``RetailEnvironment`` fits ``GRPOTrainer(environment_factory=RetailEnvironment)``.

TRL makes one instance per rollout slot, calls ``reset(**row)`` with a dataset row (a tasks file's row:
``rbjax lm tasks``), exposes every public method but ``reset`` and ``get_reward`` to the model as a tool (its
name, type hints and Google-style docstring become the tool's schema) and calls ``get_reward()`` after the
rollout. All instances of a process share one ``SessionPool`` (``RetailEnvironment.slots`` slots), so
their stores live on one batched engine. TRL calls a rollout's tools one after another and waits for each,
so ``end_today`` steps its store at once (a step of the pool's engine with one store in it).

>>> from datasets import load_dataset
>>> from trl import GRPOConfig, GRPOTrainer
>>> trainer = GRPOTrainer(model, reward_funcs=[], train_dataset=load_dataset("json", data_files="tasks.jsonl")["train"],
...                       environment_factory=RetailEnvironment, args=GRPOConfig(...))

TRL needs torch; this module does not: it imports nothing from TRL.
"""

from __future__ import annotations

import inspect
from typing import ClassVar

from rbjax.agents.tools.specs import TOOL_SPECS

_TYPES = {"string": str, "number": float, "integer": int, "boolean": bool, "object": dict}


def _annotation(schema: dict):
    if schema.get("type") == "array":
        return list[_TYPES.get(schema.get("items", {}).get("type"), str)]
    return _TYPES.get(schema.get("type"), str)


def _arg_doc(name: str, schema: dict) -> str:
    if name == "items":
        return "the order's lines, each {sku_id: str, quantity: int}"
    return schema.get("description", name.replace("_", " "))


def _tool_method(spec: dict):
    """A method ``name(self, **arguments) -> str`` with the tool's parameters as annotated arguments (the
    optional ones default to None) and its description and arguments as a Google-style docstring."""
    name, params = spec["name"], spec["parameters"]
    required = set(params.get("required", ()))
    args = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations = {"return": str}
    for arg, schema in params["properties"].items():
        kind = _annotation(schema)
        optional = arg not in required
        annotations[arg] = kind | None if optional else kind
        args.append(
            inspect.Parameter(
                arg,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=None if optional else inspect.Parameter.empty,
                annotation=annotations[arg],
            )
        )
    lines = [spec["description"]]
    if params["properties"]:
        lines += ["", "Args:"] + [f"    {a}: {_arg_doc(a, s)}" for a, s in params["properties"].items()]
    lines += ["", "Returns:", "    The tool's answer, as the store's tools write it."]

    def method(self, *a, **kw):
        bound = method.__signature__.bind(self, *a, **kw)
        given = {k: v for k, v in list(bound.arguments.items())[1:] if v is not None}
        return self._call(name, given)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = "\n".join(lines)
    method.__signature__ = inspect.Signature(args, return_annotation=str)
    method.__annotations__ = annotations
    return method


class RetailEnvironment:
    """One rollout's store: ``reset(**row)`` opens a session on the row's task; the 21 tools are methods;
    ``get_reward()`` plays the episode to its end (no new decisions) and returns its reward
    (``rbjax.lm.rewards``; the pool's kind, ``reward``)."""

    slots: ClassVar[int] = 256
    reward: ClassVar[str] = "relative"
    pool: ClassVar = None  # one SessionPool per process, made on the first reset

    def __init__(self):
        self.session = None

    def reset(self, **row) -> str:
        """Open a session on the task of ``row`` (a tasks file's row; extra columns such as ``prompt`` are
        ignored) and return the store's morning (the text TRL appends to the prompt)."""
        from rbjax.lm.pool import SessionPool
        from rbjax.lm.tasks import Task

        task = Task.from_row(row)
        cls = type(self)
        if cls.pool is None:
            cls.pool = SessionPool.for_task(task, slots=cls.slots, reward=cls.reward)
        if self.session is not None:
            cls.pool.close(self.session)
        self.session = cls.pool.open(task)
        return self.session.morning

    def _call(self, name: str, args: dict) -> str:
        if self.session is None:
            raise RuntimeError("call reset(**row) first: no task is open")
        return self.session.call(name, args)

    def get_reward(self) -> float:
        """The episode's reward, after playing any remaining days with no new decisions; frees the slot."""
        if self.session is None:
            raise RuntimeError("call reset(**row) first: no task is open")
        if not self.session.closed:
            self.session.finish()
            type(self).pool.close(self.session)
        return float(self.session.reward)


for _spec in TOOL_SPECS:
    setattr(RetailEnvironment, _spec["name"], _tool_method(_spec))

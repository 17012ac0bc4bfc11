"""A TRL face: ``RetailEnvironment`` fits ``GRPOTrainer(environment_factory=RetailEnvironment)`` (TRL 1.16).

TRL makes one instance per rollout of a generation batch and reuses them from batch to batch. It calls
``reset(**row)`` with a dataset row (a tasks file's row: ``rbjax lm tasks``), exposes every public method
but ``reset`` and ``get_reward`` to the model as a tool (its name, type hints and Google-style docstring
become the tool's schema; the description is ``specs.describe``'s, as in every face) and calls
``get_reward()`` after the rollout. All instances of a class share one ``SessionPool`` of ``slots`` stores,
so their stores live on one batched engine. TRL calls a rollout's tools one after another and waits for
each, so ``end_today`` steps its store at once (a step of the pool's engine with one store in it).

What a TRL user trips over (``examples/lm_trl_grpo.py`` runs on a CPU):

- ``slots`` (default 8, TRL's default generation batch) should equal the rollouts one process generates at
  once: ``per_device_train_batch_size * steps_per_generation`` (``generation_batch_size`` over the
  processes). Each rollout holds a slot from ``reset`` to ``get_reward``; fewer slots fail the ``reset``
  that finds none free, and many more cost compile time (256 slots: 40-60 s at the first ``reset`` and
  again at the first ``get_reward``). ``environment_class(slots=..., reward=...)`` makes a class with its
  own pool of that size (a pool is made at the first ``reset`` and keeps its size).
- ``reward_funcs=[]`` is enough: TRL adds ``get_reward`` as a reward of weight 1, logged under the class's
  name (``RetailEnvironment``). TRL's hook is one float per rollout; each day's credit is the instance's
  ``turn_rewards`` after it (they sum to the relative reward), for a reward function or a logger.
- ``GRPOConfig`` turns bf16 on by default; without a GPU pass ``use_cpu=True`` (or ``bf16=False``).
- The 21 tool schemas and the first morning come to about 5k prompt tokens. TRL counts tool results in
  ``max_completion_length``: a call whose result would pass it is dropped from the completion and ends the
  rollout, after the tool has run (an order placed or a day ended stays; ``get_reward`` plays the days left
  with no decisions).
- A model that calls no tool plays every rollout of a task the same way, so the group's rewards are equal,
  its advantages 0 and the loss exactly 0. Use a model and chat template that call tools (TRL logs
  ``tools/call_frequency``).

>>> from datasets import load_dataset
>>> from trl import GRPOConfig, GRPOTrainer
>>> tasks = load_dataset("json", data_files="tasks.jsonl")["train"]
>>> config = GRPOConfig(per_device_train_batch_size=8, num_generations=4, use_cpu=True)
>>> trainer = GRPOTrainer(model, reward_funcs=[], train_dataset=tasks, args=config,
...                       environment_factory=environment_class(slots=8))

TRL needs torch; this module does not: it imports nothing from TRL.
"""

from __future__ import annotations

import inspect
from typing import ClassVar

from rbjax.agents.tools.specs import TOOL_SPECS, describe
from rbjax.checks import need_count
from rbjax.lm.pool import SessionPool
from rbjax.lm.rewards import check_kind
from rbjax.lm.tasks import Task

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
    lines = [describe(spec)]
    if params["properties"]:
        lines += ["", "Args:"] + [f"    {a}: {_arg_doc(a, s)}" for a, s in params["properties"].items()]
    lines += ["", "Returns:", "    The tool's text, as described above."]

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
    (``rbjax.lm.rewards``; the pool's kind, ``reward``). slots: the stores of the class's pool, made at the
    first ``reset`` (the rollouts TRL generates at once, see the module's notes)."""

    slots: ClassVar[int] = 8
    reward: ClassVar[str] = "relative"
    pool: ClassVar = None  # one SessionPool per class and process, made on the first reset

    def __init__(self):
        self.session = None

    def reset(self, **row) -> str:
        """Open a session on the task of ``row`` (a tasks file's row; extra columns such as ``prompt`` are
        ignored) and return the store's morning (the text TRL appends to the prompt). RuntimeError when
        every slot of the pool holds a rollout."""
        task = Task.from_row(row)
        cls = type(self)
        if cls.pool is None:
            cls.pool = SessionPool.for_task(task, slots=cls.slots, reward=cls.reward)
        if self.session is not None:
            cls.pool.close(self.session)
            self.session = None
        if not cls.pool.free:
            raise RuntimeError(
                f"{cls.__name__}.slots is {cls.pool.slots}, and every slot holds a rollout: make it the rollouts "
                "TRL generates at once (GRPOConfig's per_device_train_batch_size * steps_per_generation)"
            )
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

    @property
    def turn_rewards(self) -> list[float] | None:
        """Each decided day's credit once the episode is over (``rbjax.lm.credit``; after ``get_reward``):
        they sum to the relative reward. TRL's ``get_reward`` hook takes one float per rollout, so per-turn
        credit reaches a trainer through this property (a property, not a method: TRL would expose a method
        to the model as a tool). None before the episode is over."""
        return None if self.session is None else self.session.turn_rewards


for _spec in TOOL_SPECS:
    setattr(RetailEnvironment, _spec["name"], _tool_method(_spec))


def environment_class(slots: int = 8, reward: str = "relative") -> type[RetailEnvironment]:
    """A ``RetailEnvironment`` class for ``environment_factory`` with its own pool (made at its first ``reset``)
    of ``slots`` stores, reporting rewards of kind ``reward`` (``rewards.KINDS``); TRL logs the reward under
    the name ``RetailEnvironment``. ValueError naming the argument."""
    slots = need_count("slots", slots, whole=True)
    return type(
        "RetailEnvironment",
        (RetailEnvironment,),
        {"slots": slots, "reward": check_kind(reward), "pool": None},
    )

"""GRPO with TRL on rbjax tasks, on a CPU: a small tool-calling model runs stores of the shipped catalogue.

Needs, besides rbjax: torch (the CPU wheel is enough), TRL 1.16 or later with transformers 5.2 or later,
datasets, and jmespath with transformers below 5.13; and the model's weights from the Hugging Face Hub
(fetched on the first run; HF_HUB_OFFLINE=1 uses a cached copy):

    pip install torch --index-url https://download.pytorch.org/whl/cpu
    pip install "trl>=1.16" datasets jmespath
    python examples/lm_trl_grpo.py --out runs/trl_grpo [--model Qwen/Qwen3-0.6B] [--steps 2]

It makes its tasks first (once; kept in --out): an oracle run of 2 stores for 60 days with a snapshot every
20 days (``rbjax run --save-states``), then ``rbjax lm tasks`` of 2 decided days from day 20, each scored
with the reference's continuation. Each step then plays ``--batch`` rollouts of one task, a group whose
rewards differ only by the decisions made (common random numbers). What to watch, from
``rbjax.lm.faces.trl_env``'s notes:

- ``environment_class(slots=batch)``: one store slot per rollout TRL generates at once;
- ``use_cpu=True``: GRPOConfig turns bf16 on, which needs a GPU unless TRL is told it runs on the CPU;
- ``reward_funcs=[]``: ``get_reward`` is the reward, logged as ``rewards/RetailEnvironment/mean``;
- the tool schemas and the first morning take about 5k prompt tokens, and tool results count in
  ``max_completion_length`` (a result that would pass it ends the rollout; the days left are played
  with no decisions);
- ``tools/call_frequency`` 0 means the model made no call: every rollout of the group scored the same and
  the loss is 0.
"""

from __future__ import annotations

import argparse
import os


def make_tasks(out: str) -> str:
    """The tasks file in ``out`` (made once): 2-day tasks from day 20 of a 60-day oracle run of 2 stores."""
    from rbjax.cli import main

    slices, tasks = os.path.join(out, "slices"), os.path.join(out, "tasks.jsonl")
    if not os.path.exists(tasks):
        run = "--devices 1 run --policy oracle --stores 2 --days 60 --every 20 --progress 0 --save-states"
        main([*run.split(), slices])
        main(["lm", "tasks", "--from-states", slices, "--at", "20", "--days", "2", "--out", tasks])
    return tasks


def train(tasks: str, out: str, model: str, batch: int, steps: int) -> None:
    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from rbjax.lm.faces.trl_env import environment_class

    config = GRPOConfig(
        output_dir=os.path.join(out, "model"),
        use_cpu=True,
        per_device_train_batch_size=batch,  # with steps_per_generation 1, the rollouts generated at once
        num_generations=batch,  # one task's group per step
        max_completion_length=2048,  # the model's tokens and the tool results
        max_tool_calling_iterations=16,
        chat_template_kwargs={"enable_thinking": False},  # Qwen3: tool calls rather than long thoughts
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[],
        train_dataset=load_dataset("json", data_files=tasks)["train"],
        args=config,
        environment_factory=environment_class(slots=batch),
    )
    trainer.train()
    for log in trainer.state.log_history:
        if "rewards/RetailEnvironment/mean" in log:
            print(
                f"step {log['step']}: reward {log['rewards/RetailEnvironment/mean']:+.4f}, "
                f"tool calls per rollout {log.get('tools/call_frequency', 0):.2f}, loss {log.get('loss', 0):.4g}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/trl_grpo", help="folder for the slices, tasks and model")
    ap.add_argument("--model", default="Qwen/Qwen3-0.6B", help="a tool-calling chat model (Hub id or folder)")
    ap.add_argument("--batch", type=int, default=2, help="rollouts per step (one group), and store slots")
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    train(make_tasks(out), out, args.model, args.batch, args.steps)


if __name__ == "__main__":
    main()

"""RL past the students: PPO over a student's own choice among its candidates, from its distilled weights
(``recipe.finetune``), on episodes it plays sampling that choice (``experience``), with a critic that warms up
first and a KL term toward the start (``update``)."""

from rbjax.rl.finetune.recipe import FinetuneConfig, finetune

__all__ = ["FinetuneConfig", "finetune"]

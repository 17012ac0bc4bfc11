"""Students of the lookahead planner: policies that make the planner's choice in one forward pass
(``student``), the labeled mornings of a round (``labels``), and the rounds of approximate policy iteration that
train them (``recipe``)."""

from rbjax.rl.distill.labels import Labels, LabelSettings, collect
from rbjax.rl.distill.recipe import DistillConfig, distill, fit, load, load_policy, save
from rbjax.rl.distill.student import Student, StudentConfig, StudentParams, observed_anchor

__all__ = [
    "DistillConfig",
    "LabelSettings",
    "Labels",
    "Student",
    "StudentConfig",
    "StudentParams",
    "collect",
    "distill",
    "fit",
    "load",
    "load_policy",
    "observed_anchor",
    "save",
]

"""Where the shipped catalogue and checkpoints (PPO, the planner's students) are: inside an installed wheel,
or in the repository.

A built wheel carries copies under this folder (``setup.py``); an editable install or a checkout reads the
repository's ``data/hard_v2`` and ``checkpoints/ppo_hard_v2``.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[2]  # src/rbjax/shipped -> the repository


def _first(*candidates: Path) -> Path:
    for path in candidates:
        if path.is_dir():
            return path
    return candidates[-1]


CATALOG = _first(_HERE / "hard_v2", _REPO / "data" / "hard_v2")
PPO_CHECKPOINT = _first(_HERE / "ppo_hard_v2", _REPO / "checkpoints" / "ppo_hard_v2")
# the planner's students (``rbjax train distill``): what ``--policy distilled``, ``distilled_obs`` and
# ``distilled_belief`` load
STUDENT_CHECKPOINTS = {
    name: _first(_HERE / folder, _REPO / "checkpoints" / folder)
    for name, folder in (
        ("distilled", "distilled_hard_v2"),
        ("distilled_obs", "distilled_obs_hard_v2"),
        ("distilled_belief", "distilled_belief_hard_v2"),
    )
}
# the fine-tuned students (``rbjax train ppo --init STUDENT``), each only where one is shipped: only a fine-tune that
# beat its start on the held-out stores is (``benchmarks/finetune.py --ship``)
STUDENT_CHECKPOINTS |= {
    name: path
    for name, folder in (
        ("finetuned", "finetuned_hard_v2"),
        ("finetuned_obs", "finetuned_obs_hard_v2"),
        ("finetuned_belief", "finetuned_belief_hard_v2"),
    )
    if (path := _first(_HERE / folder, _REPO / "checkpoints" / folder)).is_dir()
}

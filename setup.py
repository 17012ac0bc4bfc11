"""Packaging hook: a built wheel (and ``pip install .``) carries the shipped catalogue and checkpoints
(PPO, the planner's students).

``data/hard_v2`` and ``checkpoints/ppo_hard_v2`` stay the sources in the repository; the build copies them into
``rbjax/shipped/`` of the built package, where ``rbjax.shipped`` finds them. An editable install reads the
repository folders directly.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
SHIPPED = {
    "hard_v2": ROOT / "data" / "hard_v2",
    **{
        name: ROOT / "checkpoints" / name
        for name in ("ppo_hard_v2", "distilled_hard_v2", "distilled_obs_hard_v2", "distilled_belief_hard_v2")
    },
    # the fine-tuned students, where one was shipped (benchmarks/finetune.py --ship: only one that beat its start)
    **{
        path.name: path
        for path in sorted((ROOT / "checkpoints").glob("finetuned*_hard_v2"))
        if (path / "student.msgpack").is_file()
    },
}


class BuildWithShippedData(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        for name, source in SHIPPED.items():
            target = Path(self.build_lib) / "rbjax" / "shipped" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.png", "curve.csv"))


setup(cmdclass={"build_py": BuildWithShippedData})

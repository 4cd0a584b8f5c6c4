"""The suite's rule rewards as verl custom reward functions.

verl loads this file by path (reward.custom_reward_function.path) and calls
`NAME(data_source, solution_str, ground_truth, extra_info)` per completion; `race export verl`
sets NAME to compute_score_<system>. The scores are exactly suite.train.rewards' systems, so a verl
run and a TRL run of the same cell optimise the same reward. Rule rewards cost 0 FLOPs.

verl's dataset rows carry the gold answer in reward_model.ground_truth and, for the dense
system, the gold solution in extra_info["solution"].
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from suite.train import rewards as _rewards
except ImportError:  # loaded by path from a checkout that is not pip-installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from suite.train import rewards as _rewards

_SYSTEMS: dict = {}


def _system(name: str):
    if name not in _SYSTEMS:  # one instance per worker process
        _SYSTEMS[name] = _rewards.get_reward_system(name)
    return _SYSTEMS[name]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, system: str = "sparse", **_) -> float:
    """Score one completion with the suite's rule reward `system` (sparse, structured, dense)."""
    extra = extra_info or {}
    question = extra.get("question")
    columns = {"answer": [ground_truth], "solution": [extra.get("solution")], "question": [question]}
    return _system(system)([question], [solution_str], **columns)[0]


def compute_score_sparse(data_source, solution_str, ground_truth, extra_info=None, **kw) -> float:
    """1 when the last \\boxed{} answer equals the gold answer, else 0."""
    return compute_score(data_source, solution_str, ground_truth, extra_info, system="sparse")


def compute_score_structured(data_source, solution_str, ground_truth, extra_info=None, **kw) -> float:
    """Format and answer with partial credit (suite.train.rewards.STRUCTURED_WEIGHTS)."""
    return compute_score(data_source, solution_str, ground_truth, extra_info, system="structured")


def compute_score_dense(data_source, solution_str, ground_truth, extra_info=None, **kw) -> float:
    """Share of correct steps, checked by rule against extra_info['solution'] when present."""
    return compute_score(data_source, solution_str, ground_truth, extra_info, system="dense")

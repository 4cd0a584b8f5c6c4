"""The paper's accounting facts in the miniature, on the reference cells (shrunk to a few
seconds each): a rule reward spends 0 reward FLOPs, the PRM a visible share, and at equal
budget the largest tiny policy takes fewer steps than the smallest."""

from __future__ import annotations

import json

import pytest

from suite.train.cell import load_cell
from suite.paths import tasks
from suite.train.run import run_cell

CELLS = tasks() / "cells"
SMALL = {"group_size": 4, "prompts_per_step": 2, "max_completion_tokens": 32}


def _cell(name, **changes):
    return load_cell(CELLS / f"{name}.yaml").with_changes(**{**SMALL, **changes})


BUDGET = 3 * 10**10


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """s-sparse (shrunk) trained until its budget stops it: the rule-reward run of both tests."""
    return run_cell(_cell("s-sparse", budget_flops=BUDGET), tmp_path_factory.mktemp("s"), progress=False, threads=1)


def test_rule_reward_spends_nothing_prm_a_visible_share(tmp_path, small, record_property):
    prm = run_cell(_cell("s-prm", budget_flops=10**15, max_steps=3), tmp_path / "prm", progress=False, threads=1)
    assert prm.steps == 3 and small.steps >= 3
    assert small.flops["reward"] == 0 and small.flops["rollout"] > 0
    share = prm.flops["reward"] / sum(prm.flops.values())
    record_property("prm_reward_share", share)
    print(f"PRM reward share of s-prm (K=4, 2 prompts, 32 tokens): {share:.1%}")
    assert 0.02 < share < 0.9
    report = json.loads((tmp_path / "prm" / "report.json").read_text())
    assert report["reward"]["kind"] == "prm" and report["reward"]["model"]["params_total"] > 0
    assert report["totals"]["flops"]["reward"] == prm.flops["reward"]


def test_equal_budget_largest_policy_takes_fewer_steps(tmp_path, small):
    large = run_cell(_cell("l-sparse", budget_flops=BUDGET), tmp_path / "l", progress=False, threads=1)
    assert small.stopped_by_budget and large.stopped_by_budget
    assert 1 <= large.steps < small.steps
    for r in (small, large):
        assert sum(r.flops.values()) <= BUDGET

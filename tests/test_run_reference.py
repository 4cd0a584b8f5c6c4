"""The paper's accounting facts in the miniature, on the reference cells (shrunk to a few
seconds each): a rule reward spends 0 reward FLOPs, the PRM a visible share, and at equal
budget the largest tiny policy takes fewer steps than the smallest."""

from __future__ import annotations

import json


from suite.train.cell import load_cell
from suite.paths import tasks
from suite.train.run import run_cell

CELLS = tasks() / "cells"
SMALL = {"K": 4, "prompts_per_step": 2, "max_completion_tokens": 32}


def _cell(name, **changes):
    c = load_cell(CELLS / f"{name}.yaml")
    small = {"group_size": SMALL["K"], "prompts_per_step": SMALL["prompts_per_step"],
             "max_completion_tokens": SMALL["max_completion_tokens"]}
    return c.with_changes(**{**small, **changes})


def test_rule_reward_spends_nothing_prm_a_visible_share(tmp_path, record_property):
    rule = run_cell(_cell("s-sparse", budget_flops=10**15, max_steps=3), tmp_path / "rule", progress=False, threads=1)
    prm = run_cell(_cell("s-prm", budget_flops=10**15, max_steps=3), tmp_path / "prm", progress=False, threads=1)
    assert rule.steps == prm.steps == 3
    assert rule.flops["reward"] == 0 and rule.flops["rollout"] > 0
    share = prm.flops["reward"] / sum(prm.flops.values())
    record_property("prm_reward_share", share)
    print(f"PRM reward share of s-prm (K=4, 2 prompts, 32 tokens): {share:.1%}")
    assert 0.02 < share < 0.9
    report = json.loads((tmp_path / "prm" / "report.json").read_text())
    assert report["reward"]["kind"] == "prm" and report["reward"]["model"]["params_total"] > 0
    assert report["totals"]["flops"]["reward"] == prm.flops["reward"]


def test_equal_budget_largest_policy_takes_fewer_steps(tmp_path):
    budget = 3 * 10**10
    small = run_cell(_cell("s-sparse", budget_flops=budget), tmp_path / "s", progress=False, threads=1)
    large = run_cell(_cell("l-sparse", budget_flops=budget), tmp_path / "l", progress=False, threads=1)
    assert small.stopped_by_budget and large.stopped_by_budget
    assert 1 <= large.steps < small.steps
    for r in (small, large):
        assert sum(r.flops.values()) <= budget

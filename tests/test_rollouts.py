"""What real runs do (report 1.2): discarded rollouts are rollout compute and never update
compute, multi-turn environment tokens are prefill, and a staged run's totals are the sum of its
stages. Numbers worked by hand on Qwen2.5-1.5B-Instruct (hidden d = 1536, vocabulary V = 151,936:
the LM head costs 2·d·V = 466,747,392 FLOPs per position forward)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.accounting import Adapter, GRPOSettings, step_flops
from suite.accounting.specs import spec_for
from suite.cli import main
from suite.train.cell import cell_from_dict, load_cell
from suite.validate import validate_report

ROOT = Path(__file__).resolve().parents[1]
DEEPSCALER = ROOT / "leaderboard" / "published" / "deepscaler-1.5b.yaml"
D, V = 1536, 151936
HEAD = 2 * D * V                     # one LM-head position, forward
S = GRPOSettings(group_size=8, prompts_per_step=4, max_completion_tokens=4096, gradient_checkpointing=False)
N = 32                               # completions per step


@pytest.fixture(scope="module")
def policy():
    spec = spec_for("Qwen2.5-1.5B-Instruct")
    assert (spec.hidden_size, spec.vocab_size) == (D, V)
    return spec


def test_filtered_run_charges_the_update_for_the_kept_groups_only(policy):
    """Two of the four groups had zero reward variance (DAPO's filter): 16 of 32 completions
    are discarded. Their generation was spent (rollout unchanged); the update trains 16, so its
    FLOPs halve; the total drops by exactly half the naive update."""
    full = Adapter.from_rank(0)
    naive = step_flops(policy, full, S, 200, 1000).flops
    kept = step_flops(policy, full, S, 200, 1000, kept=16)
    assert kept.flops["rollout"] == naive["rollout"]
    assert kept.flops["update"] * 2 == naive["update"]
    assert sum(naive.values()) - sum(kept.flops.values()) == naive["update"] // 2
    assert kept.work["count.discarded"] == 16 and kept.tokens["update"] == 16 * 1200
    assert kept.tokens["rollout_completion"] == N * 1000      # all 32 were generated


@pytest.mark.parametrize("rank, update_head", [(0, 6), (64, 4)])
def test_multi_turn_prices_environment_tokens_as_prefill(policy, rank, update_head):
    """1,000 policy tokens over 5 turns plus 500 tool-output tokens per completion, against the
    naive pricing of 1,500 completion tokens. Every token still runs through the model and
    attends to its prefix, so only the LM head moves: the rollout samples no token at the 500
    prefilled positions (-32 x 500 x 2dV), and the training passes score only the policy's
    tokens (generic profile): forward, input gradient (and, full fine-tuning, the head's weight
    gradient) at 2dV each: -32 x 500 x 6dV (full) or x 4dV (LoRA, head frozen)."""
    ad = Adapter.from_rank(rank)
    naive = step_flops(policy, ad, S, 200, 1500).flops
    mt = step_flops(policy, ad, S, 200, 1000, environment_tokens=500, turns=5)
    assert naive["rollout"] - mt.flops["rollout"] == N * 500 * HEAD == 7_467_958_272_000
    assert naive["update"] - mt.flops["update"] == N * 500 * update_head * D * V
    assert mt.tokens["rollout_completion"] == N * 1000 and mt.work["count.rollout_env"] == N * 500
    assert mt.tokens["update"] == N * 1700                      # every position trained through


def _single(cell, stage):
    """One stage as its own single-stage estimate (the cell with the stage's numbers)."""
    d = {k: v for k, v in cell.to_dict().items() if k not in ("stages", "sources", "assumed", "published", "hardware")}
    d.update({k: v for k, v in stage.items() if k != "name"})
    c = cell_from_dict(d, name=f"{cell.name}-{stage['name']}", check_paths=False)
    return c.estimate(created="2026-12-01T00:00:00Z").doc


def test_deepscaler_three_stages_as_one_estimate_equal_three_single_estimates(tmp_path):
    out = tmp_path / "deepscaler.json"
    assert main(["report", "--estimate", str(DEEPSCALER), "--out", str(out)]) == 0
    assert main(["validate", "--strict", str(out)]) == 0
    doc = json.loads(out.read_text())
    cell = load_cell(DEEPSCALER, check_paths=False)
    singles = [_single(cell, st) for st in cell.stages]
    assert [s["grpo"]["group_size"] for s in singles] == [8, 16, 16]
    assert [s["grpo"]["max_completion_tokens"] for s in singles] == [8192, 16384, 24576]
    for ph in ("rollout", "update", "reward", "total"):
        assert doc["totals"]["flops"][ph] == sum(s["totals"]["flops"][ph] for s in singles)
    assert doc["totals"]["steps"] == 1040 + 480 + 230 == sum(s["totals"]["steps"] for s in singles)
    assert [st["flops"]["total"] for st in doc["stages"]] == [s["totals"]["flops"]["total"] for s in singles]
    assert doc["grpo"]["group_size"] == 16 and doc["grpo"]["max_completion_tokens"] == 24576   # the last stage
    # A stage left out no longer sums: ST-001 names its FLOPs, ST-004 its work; and the stages left
    # no longer carry the maintained description's means stage by stage (PUB-005).
    doc["stages"].pop(0)
    assert {f.rule_id for f in validate_report(doc)} == {"ST-001", "ST-004", "PUB-005"}


def test_staged_estimate_of_a_filtered_multi_turn_run_states_its_rollouts():
    cell = cell_from_dict({"name": "x", "policy": "Qwen2.5-0.5B-Instruct", "reward": "sparse", "lora_rank": 16,
                           "prompts_per_step": 4, "group_size": 8, "max_completion_tokens": 4096,
                           "mean_prompt_tokens": 100,
                           "rollouts": {"kept_share": 0.75, "environment_tokens": 300, "turns": 3},
                           "stages": [{"name": "a", "steps": 3, "mean_completion_tokens": 500},
                                      {"name": "b", "steps": 2, "mean_completion_tokens": 900}]}, check_paths=False)
    doc = cell.estimate().doc
    assert validate_report(doc) == []
    ro = doc["rollouts"]
    assert ro["generated"] == 5 * 32 and ro["discarded"] == 5 * 8 and ro["discarded_share"] == 0.25
    assert ro["multi_turn"]["environment_tokens"] == 5 * 32 * 300
    assert ro["discarded_rollout_flops"] == round(doc["totals"]["flops"]["rollout"] / 4)

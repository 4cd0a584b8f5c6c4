"""GRPO learns: from fixed seeds, a reference cell's adapter beats its base model on the
native reward of held-out prompts, for the sparse and the PRM reward systems.

Held out: the first 100 problems of arith-easy-250 (a test split, never in the training data;
the base policy-s solves about 0.38 of them), greedy completions, scored by the cell's own
reward system. Slow (it trains): see MARGIN and BUDGETS for what is claimed.

Measured (2 shared cores, 2026-11-29): s-sparse at 4e11 FLOPs (35 steps, ~90 s) took sparse
reward 0.38 -> 0.46. The PRM case still fails, now with a PRM that checks arithmetic (2026-11-30,
tasks/arith/README.md): its min step reward separates policy-s's T=1 samples (mean 0.50 on right
answers, 0.17 on wrong; AUC 0.67), and the training reward rises (0.245 -> 0.29 over 100 steps),
but held-out greedy PRM reward falls (0.460 -> 0.424 at 51 steps, 2e12 FLOPs; 0.380 at 103 steps,
4e12) and pass@1 with it (0.38 -> 0.27). The 103-step adapter's greedy completions are as long
(3.0 steps) but go wrong at a result more often (73 of 100 vs the base's 64; operands 3 vs 0):
the policy drifts toward wrong sums the PRM lets through (it passes 0.27 of held-out wrong
results). Marked xfail until GRPO on it learns."""

from __future__ import annotations

import json

import pytest

from suite.cell import load_cell
from suite.paths import tasks
from suite.run import run_cell

N_HELD_OUT = 100
MARGIN = 0.05  # adapter mean native reward - base mean native reward, at least
BUDGETS = {"sparse": 4 * 10**11, "prm": 6 * 10**11}


def native_reward(policy_dir, adapter_dir, system: str, rows) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from suite.embedded import greedy_completions
    from suite.rewards import get_reward_system

    tok = AutoTokenizer.from_pretrained(policy_dir)
    model = AutoModelForCausalLM.from_pretrained(policy_dir)
    if adapter_dir is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_dir)
    model.eval()
    with torch.inference_mode():
        outs = greedy_completions(model, tok, [r["question"] for r in rows], max_new_tokens=48)
    reward = get_reward_system(system)
    scores = reward(prompts=[r["question"] for r in rows], completions=outs, answer=[r["answer"] for r in rows],
                    question=[r["question"] for r in rows])
    return sum(scores) / len(scores)


@pytest.mark.slow
@pytest.mark.parametrize("system", ["sparse", pytest.param("prm", marks=pytest.mark.xfail(
    reason="GRPO on the tiny PRM raises its training reward but lowers held-out native reward "
           "(measured in the module docstring)"))])
def test_adapter_beats_base_on_held_out_native_reward(tmp_path, system, record_property):
    import torch

    torch.manual_seed(0)
    cell = load_cell(tasks() / "cells" / f"s-{system}.yaml").with_changes(budget_flops=BUDGETS[system])
    res = run_cell(cell, tmp_path / "run", progress=False, threads=1)
    rows = [json.loads(line) for line in open(tasks() / "arith" / "data" / "arith-easy-250.jsonl")][:N_HELD_OUT]
    base = native_reward(cell.policy, None, system, rows)
    tuned = native_reward(cell.policy, tmp_path / "run" / "adapter", system, rows)
    record_property("native_reward", {"base": base, "adapter": tuned, "steps": res.steps})
    print(f"{system}: base {base:.3f} -> adapter {tuned:.3f} after {res.steps} steps")
    assert tuned - base >= MARGIN, (base, tuned, res.steps)

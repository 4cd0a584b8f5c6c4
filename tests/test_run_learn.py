"""GRPO learns: from fixed seeds, a reference cell's adapter beats its base model on the
native reward of held-out prompts, for the sparse and the PRM reward systems.

Held out: all 250 problems of arith-easy-250 (a test split, never in the training data; the
base policy-s solves 0.376 of them), greedy completions, scored by the cell's own reward system.
Slow (it trains; both systems at once, one worker each): see MARGIN and BUDGETS for what is claimed.
CI checks the sparse system; the PRM system runs with RACE_LEARN_PRM=1 (SYSTEMS).

Measured (2 cores, 1 thread per run, 2026-11-30): s-sparse 0.376 -> 0.396 at 4e11 and 1e12 FLOPs
(35, 88 steps), 0.496 at 1.5e12 (133 steps) and 2e12 (177). On the first 100 problems alone
4e11 had shown 0.38 -> 0.46: 100 greedy problems are too few to see a 0.05 gain reliably.
s-prm, PRM reward (base 0.340): at lr 3e-4 0.330 at 4e12 (103 steps), 0.397 at 8e12 (207 steps);
at lr 1e-4 (the cell's rate) 0.398 at 6e12 and 0.415 at 8e12, sparse reward rising with it (0.376
-> 0.50). Both systems need well over 100 steps here to gain 0.05. Before the PRM's polish stage
(tasks/arith/README.md) held-out PRM reward fell under GRPO: the judge passed a third of
policy-s's wrong two-digit results and the policy drifted to them."""

from __future__ import annotations

import json
import os

import pytest

from suite.train.cell import load_cell
from suite.paths import tasks
from suite.train.run import run_cell

N_HELD_OUT = 250
MARGIN = 0.05  # adapter mean native reward - base mean native reward, at least
BUDGETS = {"sparse": 15 * 10**11, "prm": 8 * 10**12}
# The PRM run (207 steps, ~340 s on 2 cores) is the long lane: CI's 25-minute budget holds the
# sparse system's claim; RACE_LEARN_PRM=1 trains and checks the PRM one too (both at once).
SYSTEMS = list(BUDGETS) if os.environ.get("RACE_LEARN_PRM") else ["sparse"]


def native_reward(policy_dir, adapter_dir, system: str, rows) -> float:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tools.embedded import greedy_completions
    from suite.train.rewards import get_reward_system

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


def _train(system: str, out: str) -> int:
    """One learn cell from seed 0, one torch thread (a worker process of the executor); its steps."""
    import torch

    torch.manual_seed(0)
    cell = load_cell(tasks() / "cells" / f"s-{system}.yaml").with_changes(budget_flops=BUDGETS[system])
    return run_cell(cell, out, progress=False, threads=1).steps


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, tuple[int, object]]:
    """Both systems trained at once, one worker each (suite.pipeline.executors, as grids run
    cells): the two single-thread runs share two cores and take the PRM run's time, not the sum."""
    from suite.pipeline.executors import Job, run_jobs

    root = tmp_path_factory.mktemp("learn")
    jobs = [Job(key=s, fn=_train, args=(s, str(root / s))) for s in SYSTEMS]
    results = {r.key: r for r in run_jobs(jobs, workers=len(jobs))}
    for r in results.values():
        assert r.ok, (r.key, r.error)
    return {s: (results[s].value, root / s) for s in SYSTEMS}


@pytest.mark.slow
@pytest.mark.parametrize("system", SYSTEMS)
def test_adapter_beats_base_on_held_out_native_reward(trained, system, record_property):
    steps, run = trained[system]
    cell = load_cell(tasks() / "cells" / f"s-{system}.yaml")
    rows = [json.loads(line) for line in open(tasks() / "arith" / "data" / "arith-easy-250.jsonl")][:N_HELD_OUT]
    base = native_reward(cell.policy, None, system, rows)
    tuned = native_reward(cell.policy, run / "adapter", system, rows)
    record_property("native_reward", {"base": base, "adapter": tuned, "steps": steps})
    print(f"{system}: base {base:.3f} -> adapter {tuned:.3f} after {steps} steps")
    assert tuned - base >= MARGIN, (base, tuned, steps)

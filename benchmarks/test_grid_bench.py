"""Planning speed: a 1,000-cell grid (the paper's Qwen2.5 sizes, rule and PRM rewards, five
allocations, five seeds, five budgets) expands and plans, as a ratio to pricing its distinct
steps with suite.accounting alone in the same run (benchmarks/ratio.py)."""

from __future__ import annotations

import shutil

import pytest

from benchmarks.ratio import Limit, check, interleaved
from suite.analysis import grid
from suite.paths import home

ALLOCATIONS = {"a60": {"lora_rank": 8, "num_iterations": 1}, "a100": {"lora_rank": 32, "num_iterations": 1},
               "a140": {"lora_rank": 64, "num_iterations": 2}, "a180": {"lora_rank": 128, "num_iterations": 2},
               "a220": {"lora_rank": 256, "num_iterations": 4}}


@pytest.fixture(scope="module")
def thousand(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    catalog = home() / "suite" / "accounting" / "catalog"
    for name in ("Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B-Instruct", "Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct",
                 "Qwen2.5-Math-PRM-7B"):
        (d / name).mkdir()
        shutil.copy(catalog / f"{name}.json", d / name / "config.json")
    (d / "polaris.jsonl").write_text('{"question": "1+1", "answer": "2"}\n')
    g = grid.grid_from_dict({
        "cell": {"dataset": str(d / "polaris.jsonl"), "group_size": 2, "prompts_per_step": 64,
                 "max_completion_tokens": 2048},
        "models": {n.split("-")[1]: str(d / n) for n in ("Qwen2.5-0.5B-Instruct", "Qwen2.5-1.5B-Instruct",
                                                        "Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct")},
        "budgets": [1e19, 2e19, 4e19, 8e19, 1.6e20], "band": 0.25, "allocations": ALLOCATIONS,
        "rewards": {"sparse": "sparse", "prm": {"system": "prm", "model_path": str(d / "Qwen2.5-Math-PRM-7B")}},
        "seeds": [0, 1, 2, 3, 4], "eval": {"targets": ["gsm8k-250", "math500-250"]}}, name="bench")
    return g


#: Measured 2026-12-01 (2 cores, load ~2): 4.4x (0.10 s against 0.023 s).
PLAN_1000 = Limit(10.0, "1,000 cell specs built and checked, each step priced once per distinct (model, allocation, "
                        "reward) and every cell placed in its band, against pricing the 40 distinct steps alone "
                        "(the reference): about 4.4x; 10x means per-cell pricing or per-cell file reads")


def test_plan_1000_cells(benchmark, thousand):
    from suite.accounting import step_cost_bound, step_flops
    from suite.accounting.specs import spec_for

    stats = {}

    def expand_and_plan():
        cells = grid.expand(thousand)
        for c in cells:  # prompt lengths of Polaris-like prompts, measured once per dataset in real use
            stats.setdefault(grid._stats_key(c.spec), grid.PromptStats(longest=320, mean=140.0))
        return grid.plan(cells, stats)

    distinct = {}
    for c in grid.expand(thousand):
        s = c.spec
        distinct.setdefault((s.policy, s.lora_rank, s.num_iterations, s.reward.system), s)

    def price_distinct_steps():
        for s in distinct.values():
            policy = spec_for(s.policy)
            reward = spec_for(s.reward.options["model_path"]) if s.reward.system == "prm" else None
            step_cost_bound(policy, s.adapter(), s.settings(), max_prompt_tokens=320, engine="trl-cpu",
                            reward_model=reward)
            step_flops(policy, s.adapter(), s.settings(), 140.0, s.max_completion_tokens, "trl-cpu", s.attention,
                       reward)

    timing = interleaved(benchmark, expand_and_plan, price_distinct_steps, rounds=3)
    planned = timing.result
    assert len(planned) == 1000 and len(distinct) == 40
    check(benchmark, timing, PLAN_1000)
    # Larger models buy fewer steps in the same band; every cell is in its band's bound.
    by_model = {pc.cell.model: pc.steps for pc in planned if pc.cell.allocation == "a100" and pc.cell.budget == 1e19
                and pc.cell.reward == "sparse"}
    assert by_model["0.5B"] > by_model["1.5B"] > by_model["3B"] > by_model["7B"] > 0
